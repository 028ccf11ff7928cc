#include "launch/fault_guard.h"

#include <setjmp.h>
#include <signal.h>

#include <cstring>
#include <mutex>

namespace cakegrad::server {
namespace {

thread_local sigjmp_buf* tls_jump = nullptr;
struct sigaction previous_bus;

void OnFault(int sig, siginfo_t* info, void* ucontext) {
  if (tls_jump != nullptr) siglongjmp(*tls_jump, sig);
  // Not ours: restore the default behaviour and re-raise, so real bugs still crash loudly.
  if (previous_bus.sa_flags & SA_SIGINFO) {
    previous_bus.sa_sigaction(sig, info, ucontext);
    return;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void InstallFaultGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = OnFault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous_bus);
  });
}

absl::Status RunGuarded(const std::function<absl::Status()>& fn) {
  sigjmp_buf jump;
  sigjmp_buf* const saved = tls_jump;
  if (sigsetjmp(jump, 1) != 0) {
    tls_jump = saved;
    return absl::FailedPreconditionError(
        "a memory fault occurred while reading or writing a host region: was its shared-memory "
        "object truncated after registration? Re-register the region");
  }
  tls_jump = &jump;
  absl::Status status = fn();
  tls_jump = saved;
  return status;
}

}  // namespace cakegrad::server
