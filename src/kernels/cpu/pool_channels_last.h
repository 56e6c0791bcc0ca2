#pragma once
/// The cpu backend's pooling on channels-last (NHWC) activations (pool.cpp routes calls whose
/// descriptor says channels_last here): ref::'s contracts and bits, loops along channel rows.
#include <cstdint>

#include "kernels/conv.h"

namespace mixprec::kernels::cpu {

void max_pool2d_channels_last(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax);
void max_pool2d_backward_channels_last(const Pool2dDesc& d, const void* dy,
                                       const std::int32_t* argmax, void* dx);
void avg_pool2d_channels_last(const Pool2dDesc& d, const void* x, void* y);
void avg_pool2d_backward_channels_last(const Pool2dDesc& d, const void* dy, void* dx);

}  // namespace mixprec::kernels::cpu
