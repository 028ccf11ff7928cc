#include "sessions/session_manager.h"

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace cakegrad::server {
namespace {

std::string NewSessionId() {
  std::random_device rd;  // /dev/urandom on Linux
  return absl::StrFormat("%08x%08x%08x%08x", rd(), rd(), rd(), rd());
}

}  // namespace

absl::StatusOr<std::string> SessionManager::Open(const std::string& client_name,
                                                 std::function<void()> on_close) {
  absl::MutexLock lock(&mu_);
  if (sessions_.size() >= max_sessions_) {
    return absl::ResourceExhaustedError(absl::StrCat("the daemon already serves ", sessions_.size(),
                                                     " sessions, the limit (--max_sessions)"));
  }
  std::string id = NewSessionId();
  while (sessions_.contains(id)) id = NewSessionId();
  sessions_[id] = Entry{client_name, std::move(on_close)};
  spdlog::info("session {} opened by \"{}\"", id.substr(0, 8), client_name);
  return id;
}

absl::Status SessionManager::Check(const std::string& session_id) const {
  absl::MutexLock lock(&mu_);
  if (!sessions_.contains(session_id)) {
    return absl::NotFoundError(
        "unknown or closed session: open one with OpenSession and keep its stream open");
  }
  return absl::OkStatus();
}

bool SessionManager::Close(const std::string& session_id, bool notify) {
  Entry entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) return false;
    entry = std::move(it->second);
    sessions_.erase(it);
  }
  const size_t released = regions_->RemoveSession(session_id);
  if (on_end_) on_end_(session_id);
  spdlog::info("session {} of \"{}\" closed, {} regions released", session_id.substr(0, 8),
               entry.client_name, released);
  if (notify && entry.on_close) entry.on_close();
  return true;
}

void SessionManager::CloseAll() {
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : sessions_) ids.push_back(id);
  }
  for (const std::string& id : ids) Close(id);
}

size_t SessionManager::size() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

}  // namespace cakegrad::server
