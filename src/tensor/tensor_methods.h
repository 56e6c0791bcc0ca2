#pragma once
// The Tensor methods that are differentiable ops (to(DType), reshape, transpose, permute, slice,
// contiguous, clone) or run the autograd engine (backward) record or walk autograd nodes, which
// floors above this one own: ops/ (the cast, view and copy ops) and runtime/ (the engine).
// tensor.h declares the methods and tensor_methods.cpp defines them, each a call through this
// table; the floors that own the ops fill it while the library loads (ops/view_ops.cpp,
// ops/elementwise_ops.cpp, runtime/engine.cpp). So a call goes up only through an interface this
// floor declares, and no floor defines what a floor below declares (docs/ARCHITECTURE.md,
// "Layers"; tests/layers/check_links.py keeps it so).
#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec::detail {

struct TensorMethodTable {
  Tensor (*to)(const Tensor& self, DType dtype) = nullptr;
  Tensor (*reshape)(const Tensor& self, const Shape& shape) = nullptr;
  Tensor (*transpose)(const Tensor& self, std::int64_t d0, std::int64_t d1) = nullptr;
  Tensor (*permute)(const Tensor& self, const Shape& dims) = nullptr;
  Tensor (*slice)(const Tensor& self, std::int64_t dim, std::int64_t start, std::int64_t end,
                  std::int64_t step) = nullptr;
  /// contiguous() is contiguous(self, MemoryFormat::contiguous).
  Tensor (*contiguous)(const Tensor& self, MemoryFormat format) = nullptr;
  Tensor (*clone)(const Tensor& self) = nullptr;
  void (*backward)(const Tensor& self, const Tensor& gradient, bool retain_graph) = nullptr;
};

/// The one table (a function-local static, so it exists before any library-load initializer
/// fills it). Written only while the library loads; read-only afterwards.
TensorMethodTable& tensor_method_table() noexcept;

}  // namespace mixprec::detail
