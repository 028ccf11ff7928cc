// Two launches of one call that may run side by side: a second stream that first waits for the
// caller's stream (fork) and that the caller's stream waits for at the end (join). Both are event
// waits, so the pair works eagerly and inside a CUDA graph capture alike, where the side stream
// joins the capture and the graph gets two branches.
//
// The side stream and its two events belong to the calling host thread and the current device:
// the daemon's workers call from several threads, and a stream shared between them would order
// unrelated calls or, worse, pull one thread's launches into another's capture. They are created
// on the thread's first call per device and never destroyed (one stream and two events per
// thread and device; destroying them at thread exit could run after the context is gone).
// Creating them is not legal inside a capture, so a captured call with nothing created yet
// reports that no side stream exists, and the caller runs both launches on its own stream: the
// same kernels and grids, so the same bits, only not side by side.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "cakegrad/kernels/status.h"

namespace cakegrad::kernels {

namespace side_stream_detail {
struct Slot {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr;
  cudaEvent_t join = nullptr;
};
}  // namespace side_stream_detail

class SideStream {
 public:
  // Makes *side wait for what `main` has queued so far. Sets *side to nullptr (and returns OK)
  // where no side stream can be had without breaking a capture; the caller then stays on main.
  static Status Fork(cudaStream_t main, cudaStream_t* side) {
    *side = nullptr;
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess) return Failed("cudaGetDevice", err);
    if (dev < 0 || dev >= kMaxDevices) return OkStatus();
    Slot& s = slots_[dev];
    if (s.stream == nullptr) {
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      err = cudaStreamIsCapturing(main, &capture);
      if (err != cudaSuccess) return Failed("cudaStreamIsCapturing", err);
      if (capture != cudaStreamCaptureStatusNone) return OkStatus();
      Status st = Create(&s);
      if (!st.ok()) return st;
    }
    err = cudaEventRecord(s.fork, main);
    if (err != cudaSuccess) return Failed("cudaEventRecord (fork)", err);
    err = cudaStreamWaitEvent(s.stream, s.fork, 0);
    if (err != cudaSuccess) return Failed("cudaStreamWaitEvent (fork)", err);
    *side = s.stream;
    return OkStatus();
  }

  // Makes `main` wait for what `side` (from Fork, on the same device) has queued so far. Call it
  // after every successful Fork with a side stream, also when a launch on it failed: a capture
  // with an unjoined branch cannot end.
  static Status Join(cudaStream_t main, cudaStream_t side) {
    if (side == nullptr) return OkStatus();
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess) return Failed("cudaGetDevice", err);
    const Slot& s = slots_[dev];
    err = cudaEventRecord(s.join, side);
    if (err != cudaSuccess) return Failed("cudaEventRecord (join)", err);
    err = cudaStreamWaitEvent(main, s.join, 0);
    if (err != cudaSuccess) return Failed("cudaStreamWaitEvent (join)", err);
    return OkStatus();
  }

 private:
  using Slot = side_stream_detail::Slot;
  static constexpr int kMaxDevices = 64;

  static Status Failed(const char* what, cudaError_t err) {
    return Internal(std::string("side stream: ") + what + ": " + cudaGetErrorString(err));
  }

  static Status Create(Slot* s) {
    Slot n;
    cudaError_t err = cudaStreamCreateWithFlags(&n.stream, cudaStreamNonBlocking);
    if (err == cudaSuccess) err = cudaEventCreateWithFlags(&n.fork, cudaEventDisableTiming);
    if (err == cudaSuccess) err = cudaEventCreateWithFlags(&n.join, cudaEventDisableTiming);
    if (err != cudaSuccess) {
      // Nothing half-made stays behind; the next call tries again.
      if (n.join != nullptr) (void)cudaEventDestroy(n.join);
      if (n.fork != nullptr) (void)cudaEventDestroy(n.fork);
      if (n.stream != nullptr) (void)cudaStreamDestroy(n.stream);
      return Failed("creating the stream and its events", err);
    }
    *s = n;
    return OkStatus();
  }

  static inline thread_local Slot slots_[kMaxDevices];
};

}  // namespace cakegrad::kernels
