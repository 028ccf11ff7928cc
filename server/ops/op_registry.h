// Every operator the daemon knows, by name. Each family registers its specs in its own file.
#pragma once

#include <string>
#include <vector>

#include "ops/op_spec.h"

namespace cakegrad::server {

// The specs, in a stable order (conv1d, mHC, KDA).
const std::vector<OpSpec>& AllOps();
const OpSpec* FindOp(const std::string& name);

// Per-family spec lists (ops/<family>_ops.cc).
std::vector<OpSpec> Conv1dOps();
std::vector<OpSpec> MhcOps();
std::vector<OpSpec> KdaOps();

}  // namespace cakegrad::server
