#pragma once
/// AVX-512 row kernels for batch norm (norm_avx512.cpp): plain declarations only. One call
/// handles one contiguous row of `len` values of one channel; the caller (kernels/cpu/norm.cpp)
/// loops over rows, channels and threads and accumulates the row sums in double. Call only when
/// max_isa() >= Isa::avx512. Dtype codes are DType's underlying values; x and dy share a dtype;
/// outputs are in that dtype or f32 (functions with an output return false for other pairs and
/// do nothing).
#include <cstdint>

namespace mixprec::kernels::avx512 {

/// sum of x[0..len) in f32 (four 16-lane accumulators, combined in a fixed order).
float norm_row_sum(const void* x, int dtype, std::int64_t len);
/// sum of (x - mean)^2 over the row, in f32.
float norm_row_sq_dev_sum(const void* x, int dtype, std::int64_t len, float mean);
/// y = (x - mean) * scale + shift over the row.
bool norm_row_apply(const void* x, int dtype, std::int64_t len, float mean, float scale,
                    float shift, void* y, int y_dtype);
/// *sum_dy = sum dy, *sum_dy_xmu = sum dy * (x - mean) over the row, in f32.
void norm_row_backward_sums(const void* x, const void* dy, int dtype, std::int64_t len,
                            float mean, float* sum_dy, float* sum_dy_xmu);
/// dx = dy * k1 + ((x - mean) * k2 + k3) over the row.
bool norm_row_backward_dx(const void* x, const void* dy, int dtype, std::int64_t len, float mean,
                          float k1, float k2, float k3, void* dx, int dx_dtype);

}  // namespace mixprec::kernels::avx512
