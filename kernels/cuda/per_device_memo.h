// A host-side answer that depends on the device alone (the resident clusters of a cluster kernel),
// computed on a device's first call and remembered, so that later calls spend no host time on it
// and a call captured into a CUDA graph after an eager warm-up issues no query.
#pragma once

#include <atomic>

#include "cakegrad/kernels/status.h"

namespace cakegrad::kernels {

class PerDeviceMemo {
 public:
  // `query` (Status(int* value), value >= 0) runs unless `device` has an answer; a failed query is
  // not remembered. Devices past the 64th are queried on every call. Two first calls at once
  // may both query; they store the same answer.
  template <typename Query>
  Status Get(int device, Query query, int* value) {
    std::atomic<int>* slot = device >= 0 && device < kMaxDevices ? &slots_[device] : nullptr;
    if (slot != nullptr) {
      const int v = slot->load(std::memory_order_acquire);
      if (v > 0) {
        *value = v - 1;
        return OkStatus();
      }
    }
    Status st = query(value);
    if (!st.ok()) return st;
    if (slot != nullptr) slot->store(*value + 1, std::memory_order_release);
    return OkStatus();
  }

 private:
  static constexpr int kMaxDevices = 64;
  std::atomic<int> slots_[kMaxDevices] = {};  // 0: not asked yet, else the answer + 1
};

}  // namespace cakegrad::kernels
