#include "launch/workspace_plan.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ops/op_registry.h"

namespace cakegrad::server {

absl::StatusOr<int64_t> WorkspaceBytesForPlan(const std::string& plan) {
  int64_t largest = 0;
  for (absl::string_view entry : absl::StrSplit(plan, ';', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    const std::vector<absl::string_view> op_and_sizes = absl::StrSplit(entry, ':');
    if (op_and_sizes.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("--workspace_for: \"", entry, "\" is not operator:SYM=N,SYM=N"));
    }
    const std::string name(absl::StripAsciiWhitespace(op_and_sizes[0]));
    const OpSpec* op = FindOp(name);
    if (op == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--workspace_for: unknown operator \"", name, "\""));
    }
    absl::flat_hash_map<std::string, int64_t> dims = WorkspaceDims(0, 0, 0, 0, 0);
    for (absl::string_view size : absl::StrSplit(op_and_sizes[1], ',', absl::SkipWhitespace())) {
      const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(size, '=');
      const std::string symbol(absl::StripAsciiWhitespace(kv.first));
      int64_t value = 0;
      if (!dims.contains(symbol) ||
          !absl::SimpleAtoi(absl::StripAsciiWhitespace(kv.second), &value) || value < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--workspace_for: \"", size, "\" of ", name,
                         " must be SYM=N with SYM one of S, T, C, H, B, N and N >= 0"));
      }
      dims[symbol] = value;
    }
    // A training step runs a family's forward and backward at the same shapes, and their
    // needs differ (KDA's chunked forward needs more than its backward at some shapes): an
    // entry sizes the workspace for every operator of its family.
    // A view of `name` itself: name.substr() would return a temporary that dies at the ';'.
    const absl::string_view family = absl::string_view(name).substr(0, name.find('_'));
    for (const OpSpec& sibling : AllOps()) {
      if (sibling.workspace_bytes &&
          absl::string_view(sibling.name).substr(0, sibling.name.find('_')) == family) {
        largest = std::max(largest, sibling.workspace_bytes(dims));
      }
    }
  }
  return largest;
}

}  // namespace cakegrad::server
