#pragma once
/// AVX-512 row kernels for softmax, log-softmax and cross-entropy (softmax_avx512.cpp): plain
/// declarations only. One call handles one contiguous row of `cols` elements; the caller loops
/// over rows (and threads). Call only when max_isa() >= Isa::avx512. Dtype codes are DType's
/// underlying values; functions returning bool cover out dtype == in dtype or f32, else return
/// false without doing anything.
#include <cstdint>

namespace mixprec::kernels::avx512 {

/// out = softmax(in) (log_softmax when log) over one row; ws: scratch for cols floats.
bool softmax_row(const void* in, int in_dtype, void* out, int out_dtype, std::int64_t cols,
                 bool log, float* ws);

/// dx from the forward output y and dy (y and dy share dtype) over one row; the formulas of
/// kernels::softmax_backward.
bool softmax_backward_row(const void* y, const void* dy, int dtype, void* dx, int dx_dtype,
                          std::int64_t cols, bool log);

/// Row statistics for cross-entropy: *max = NaN-propagating max x, *sum_exp = sum exp(x - max),
/// *sum_shifted = sum (x - max).
void cross_entropy_row_stats(const void* x, int dtype, std::int64_t cols, float* max,
                             float* sum_exp, float* sum_shifted);

/// dx = grad * (softmax(x) - q) over one row, q the smoothed one-hot of `target`; ws: scratch
/// for cols floats.
bool cross_entropy_backward_row(const void* x, int dtype, std::int64_t cols, std::int64_t target,
                                float label_smoothing, float grad, void* dx, int dx_dtype,
                                float* ws);

}  // namespace mixprec::kernels::avx512
