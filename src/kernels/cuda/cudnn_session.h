#pragma once
// What every cuDNN graph of the cuda backend shares (attention_cudnn.cpp, conv_cudnn.cpp): the
// process's cuDNN state set up once from the loader (cudnn_loader.h), one handle per device on
// the backend's stream, one lock for all of it, the workspace from the backend's caching
// allocator. Only for files compiled with the cuDNN path (MIXPREC_HAVE_CUDNN and the frontend's
// include folder, set by CMake): it needs cudnn.h.
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>

namespace mixprec::kernels::cuda {

/// One call's hold on cuDNN: the lock (one handle and one stream per device: calls from several
/// threads would race on the handle's stream and on the plans), the current device and its
/// handle bound to the backend's stream. Holds the lock for its lifetime; build and run graphs
/// while it lives.
class CudnnCall {
 public:
  CudnnCall();
  CudnnCall(const CudnnCall&) = delete;
  CudnnCall& operator=(const CudnnCall&) = delete;

  /// Empty when ready; else why not (cuDNN not loaded, its libraries, no device, cudnnCreate or
  /// cudnnSetStream failed), and handle() is null.
  const std::string& error() const { return error_; }
  cudnnHandle_t handle() const { return handle_; }
  int device() const { return device_; }

 private:
  std::unique_lock<std::mutex> lock_;
  std::string error_;
  cudnnHandle_t handle_ = nullptr;
  int device_ = 0;
};

/// The compute capability of `device` as cuDNN's sm version (90 for 9.0), from our static
/// runtime (the frontend would ask its dlopen'd libcudart); 0 and `error` set on failure.
std::int32_t cudnn_sm_version(int device, std::string& error);

/// Device workspace from the backend's caching allocator (as cuda::Scratch): the stream orders
/// later users after this call's kernels, so returning it needs no synchronisation.
class CudnnWorkspace {
 public:
  explicit CudnnWorkspace(std::size_t bytes);
  ~CudnnWorkspace();
  CudnnWorkspace(const CudnnWorkspace&) = delete;
  CudnnWorkspace& operator=(const CudnnWorkspace&) = delete;
  void* get() const { return p_; }
  /// False when the allocator had no block of this size.
  bool ok() const { return bytes_ == 0 || p_ != nullptr; }

 private:
  std::size_t bytes_;
  std::shared_ptr<void> pool_;  // a graph capture's pool it came from, or null (the cache)
  void* p_;
};

/// The largest power of two up to 16 that divides every address (cuDNN engines assume their
/// operands' alignment, 16 bytes by default; null pointers are not counted).
std::int64_t cudnn_pointer_alignment(std::initializer_list<const void*> ptrs);

}  // namespace mixprec::kernels::cuda

/// Returns "<call>: <message>" from the enclosing function (a std::string) when a frontend call
/// returns a bad error_t.
#define MIXPREC_FE_TRY(call)                                                              \
  do {                                                                                    \
    if (auto mixprec_fe_e = (call); mixprec_fe_e.is_bad()) {                              \
      return std::string(#call ": ") + mixprec_fe_e.get_message();                        \
    }                                                                                     \
  } while (0)
