// The cache key of a call's captured graph: everything that can change which kernels run or
// their launch shapes (operator, options, every tensor's presence, dtype and shape), and
// nothing that only moves data (regions and offsets: the replay gets the new pointers).
#pragma once

#include <string>

#include "ops/op_spec.h"

namespace cakegrad::server {

std::string GraphKey(const BoundCall& call);

}  // namespace cakegrad::server
