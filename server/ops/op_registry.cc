#include "ops/op_registry.h"

#include "absl/strings/str_cat.h"

namespace cakegrad::server {

const BoundTensor& BoundCall::tensor(const std::string& name) const {
  static const BoundTensor kAbsent;
  auto it = tensors.find(name);
  return it == tensors.end() ? kAbsent : it->second;
}

int64_t BoundCall::dim(const std::string& symbol) const {
  auto it = dims.find(symbol);
  return it == dims.end() ? 0 : it->second;
}

const std::vector<OpSpec>& AllOps() {
  static const std::vector<OpSpec>* ops = [] {
    auto* all = new std::vector<OpSpec>();
    for (auto family : {Conv1dOps, MhcOps, KdaOps}) {
      for (OpSpec& op : family()) all->push_back(std::move(op));
    }
    return all;
  }();
  return *ops;
}

const OpSpec* FindOp(const std::string& name) {
  for (const OpSpec& op : AllOps()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

}  // namespace cakegrad::server
