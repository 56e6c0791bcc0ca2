#pragma once
// A scratch f32 buffer that only grows: kept per thread by the oneDNN bridges (matmul.cpp,
// conv.cpp) for the f32 copies of 16-bit operands, so steady-state calls allocate nothing.
#include <cstddef>
#include <memory>

namespace mixprec::kernels::cpu {

class GrowingBuffer {
 public:
  /// At least n floats, uninitialised; earlier contents are lost when it grows.
  float* get(std::size_t n) {
    if (n > capacity_) {
      data_.reset();  // the old block goes first, so peak memory never holds both
      capacity_ = 0;
      data_ = std::make_unique_for_overwrite<float[]>(n);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<float[]> data_;
  std::size_t capacity_ = 0;
};

}  // namespace mixprec::kernels::cpu
