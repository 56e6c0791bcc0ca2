#pragma once
/// One convolution pass through a cached oneDNN primitive, for the dtypes oneDNN runs directly
/// (f32, bf16); kernels::conv2d* (conv.cpp) widens everything else to f32 first.
#include <cstdint>
#include <string>

#include "kernels/conv.h"

namespace mixprec::kernels::cpu {

/// Which of the three convolution computations to run.
enum class ConvPass : std::uint8_t { forward, backward_data, backward_weights };

/// The caller's buffers of one pass (activations NCHW or NHWC as the descriptor says, OIHW) (unused ones null). forward: x, weight, bias ->
/// y. backward_data: dy, weight -> dx. backward_weights: x, dy -> dweight, dbias (when
/// desc.has_bias).
struct ConvBuffers {
  const void* x = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;
  const void* dy = nullptr;
  void* y = nullptr;
  void* dx = nullptr;
  void* dweight = nullptr;
  void* dbias = nullptr;
};

/// Filled by onednn_conv when the caller wants to log what ran.
struct ConvOnednnInfo {
  std::string impl;       ///< "onednn:" + impl_info_str(), e.g. "onednn:jit:avx512_core"
  bool cached = false;    ///< the primitive (or the verdict that none is usable) was cached
  bool reordered = false; ///< an activation (x, y, dy or dx) went through a layout reorder
  bool weights_reordered = false;  ///< the weights (or their gradient) did: small, every call
};

/// Runs one pass of desc (dtype f32 or bf16; bias f32 or dtype; every extent > 0). blocked lets
/// oneDNN choose its layouts (format_tag::any) and reorders from and to the caller's buffers
/// (NCHW or NHWC as desc says, OIHW); otherwise oneDNN computes on the plain layouts directly. Returns false, touching
/// nothing, when oneDNN has no implementation or, for bf16, only its slow reference one.
/// Throws BackendError if oneDNN fails otherwise. info may be null.
bool onednn_conv(ConvPass pass, const Conv2dDesc& desc, bool blocked, const ConvBuffers& bufs,
                 ConvOnednnInfo* info);

/// The implementation oneDNN picks for this pass in this layout mode ("onednn:" +
/// impl_info_str(); built and cached without running). Starts with "onednn:ref" when oneDNN has
/// only its scalar reference loop.
std::string onednn_conv_impl(ConvPass pass, const Conv2dDesc& desc, bool blocked);

/// Entries in the primitive cache, and clearing it (for tests).
std::size_t onednn_conv_cache_size();
void onednn_conv_cache_clear();

}  // namespace mixprec::kernels::cpu
