#pragma once
// The autograd node of a cast: the gradient goes back to the input's gradient dtype. Recorded by
// the cast op (ops/elementwise_ops.cpp, Tensor::to) and by autocast around a kept weight copy
// (runtime/autocast.cpp), so it lives on the floor below both.
#include <vector>

#include "mixprec/runtime/node.h"

namespace mixprec::runtime {

class CastNode final : public runtime::Node {
 public:
  explicit CastNode(DType in_dtype) : in_dtype_(in_dtype) {}
  const char* name() const override { return "cast"; }
  bool saves_tensors() const override { return false; }
  bool accepts_any_grad_dtype() const override { return true; }  // converted below anyway
  DType preferred_grad_dtype() const override { return gradient_dtype(in_dtype_); }
  // Straight-through for fp8: the gradient of a cast to or from fp8 passes in f32, unrounded.
  std::vector<Tensor> backward(const Tensor& dy) override {
    return {dy.to(gradient_dtype(in_dtype_))};
  }

 private:
  DType in_dtype_;
};

}  // namespace mixprec::runtime
