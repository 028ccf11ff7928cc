// Client sessions. A session is opened by the OpenSession stream and lives until the client
// closes it (CloseSession), the stream ends, or the connection dies; then everything it
// registered is released. Session ids are 128-bit random tokens: knowing one is what lets a
// client use it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "regions/region_registry.h"

namespace cakegrad::server {

class SessionManager {
 public:
  // `on_end` runs for every session that ends, after its regions are released (the backend
  // drops what else it holds for the session).
  SessionManager(RegionRegistry* regions, size_t max_sessions,
                 std::function<void(const std::string&)> on_end = nullptr)
      : regions_(regions), max_sessions_(max_sessions), on_end_(std::move(on_end)) {}

  // `on_close` runs once when the session ends by any path other than the stream's own end
  // (e.g. CloseSession), so the stream can be finished.
  absl::StatusOr<std::string> Open(const std::string& client_name, std::function<void()> on_close);

  // NOT_FOUND unless the session is open.
  absl::Status Check(const std::string& session_id) const;

  // Ends the session and releases its regions; false if it was not open. Idempotent.
  bool Close(const std::string& session_id, bool notify = true);

  // Ends every session (daemon shutdown), finishing their streams.
  void CloseAll();

  size_t size() const;

 private:
  struct Entry {
    std::string client_name;
    std::function<void()> on_close;
  };
  RegionRegistry* const regions_;
  const size_t max_sessions_;
  const std::function<void(const std::string&)> on_end_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cakegrad::server
