// A client can shrink the shm object behind a registered host region (ftruncate); touching the
// vanished pages raises SIGBUS in the daemon. RunGuarded turns that into an error for the one
// request instead of a crash of the daemon.
#pragma once

#include <functional>

#include "absl/status/status.h"

namespace cakegrad::server {

// Installs the process-wide SIGBUS handler once. Faults outside RunGuarded still crash, and
// SIGSEGV (a bug of ours, not a client's doing) is left alone.
void InstallFaultGuard();

// Runs fn on this thread; a memory fault inside it returns FAILED_PRECONDITION. fn's frames are
// abandoned on a fault (no destructors run), so it must only compute over raw memory.
absl::Status RunGuarded(const std::function<absl::Status()>& fn);

}  // namespace cakegrad::server
