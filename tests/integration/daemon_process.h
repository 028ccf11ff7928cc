// Starts cakegradd as a child process on a private socket and stops it with SIGTERM.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cakegrad/client/client.h"

extern char** environ;

namespace cakegrad::testing {

class DaemonProcess {
 public:
  // Starts the daemon with `extra_flags` and waits until health says SERVING. `env` entries
  // ("NAME=value") replace or add to this process's environment for the daemon only (e.g. its
  // own CUDA_VISIBLE_DEVICES).
  absl::Status Start(std::vector<std::string> extra_flags = {},
                     const std::vector<std::string>& env = {}) {
    char dir_template[] = "/tmp/cakegrad-test-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) return absl::InternalError("mkdtemp failed");
    dir_ = dir_template;
    socket_ = dir_ + "/cakegrad.sock";
    log_ = dir_ + "/daemon.log";
    // $CAKEGRAD_DAEMON overrides the build tree's binary (a packaged build on the GPU machine).
    const char* daemon = std::getenv("CAKEGRAD_DAEMON");
    std::vector<std::string> args = {daemon != nullptr ? daemon : CAKEGRAD_DAEMON_PATH,
                                     "--socket=" + socket_, "--backend=host", "--log_level=info"};
    for (auto& f : extra_flags) args.push_back(f);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<std::string> environment;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      const std::string name = entry.substr(0, entry.find('='));
      bool replaced = false;
      for (const std::string& o : env) replaced |= o.substr(0, o.find('=')) == name;
      if (!replaced) environment.push_back(entry);
    }
    for (const std::string& o : env) environment.push_back(o);
    std::vector<char*> envp;
    for (auto& e : environment) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return absl::InternalError(absl::StrCat("posix_spawn cakegradd: ", rc));
    for (int i = 0; i < 200; ++i) {
      if (CheckHealth(address(), 0.2).ok()) return absl::OkStatus();
      // A daemon that refuses its flags exits at once: say so instead of waiting out the 5 s.
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return absl::FailedPreconditionError(absl::StrCat(
            "cakegradd exited at start with status ",
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), "; see ", log_));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return absl::DeadlineExceededError("cakegradd did not become SERVING in 5 s");
  }

  // SIGTERM, then the exit status (0 is a clean drain).
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  bool Alive() const { return pid_ > 0 && kill(pid_, 0) == 0; }
  pid_t pid() const { return pid_; }
  std::string address() const { return "unix://" + socket_; }
  const std::string& socket_path() const { return socket_; }
  const std::string& log_path() const { return log_; }

  ~DaemonProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) {
      unlink(log_.c_str());
      unlink(socket_.c_str());
      rmdir(dir_.c_str());
    }
  }

 private:
  pid_t pid_ = -1;
  std::string dir_, socket_, log_;
};

}  // namespace cakegrad::testing
