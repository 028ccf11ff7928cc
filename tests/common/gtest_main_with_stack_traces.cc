// GoogleTest's main plus Abseil's failure signal handler: a test process that crashes prints a
// symbolized stack trace, so a crash seen only on the GPU machine can be located from its log.
#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  absl::InitializeSymbolizer(argv[0]);
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
