// Debian's Abseil (20220623) ships no status macros; these are the two the codebase uses.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CAKEGRAD_CONCAT_INNER(a, b) a##b
#define CAKEGRAD_CONCAT(a, b) CAKEGRAD_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    ::absl::Status cakegrad_status_ = (expr);            \
    if (!cakegrad_status_.ok()) return cakegrad_status_; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  CAKEGRAD_ASSIGN_OR_RETURN_IMPL(CAKEGRAD_CONCAT(cakegrad_statusor_, __LINE__), lhs, expr)

#define CAKEGRAD_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
