#pragma once
/// The fp8 decodings as 256-entry tables, the same values as float8.h's scalar decoders:
/// what a lookup-table decode (the cpu backend's fp8 GEMM, a user's own loop) indexes.
#include <array>

#include "mixprec/core/dtype.h"

namespace mixprec {

/// The 256 f32 values of an fp8 format indexed by bit pattern (NaN patterns hold quiet NaNs of
/// their sign). DTypeError unless format is f8e4m3 or f8e5m2.
const std::array<float, 256>& fp8_decode_table(DType format);

namespace detail {
/// DTypeError prefixed with op unless format is f8e4m3 or f8e5m2 (naming what it got, a code
/// outside the dtype table included): the check of every public call that takes an fp8 format.
void require_fp8_format(const char* op, DType format);
}  // namespace detail

}  // namespace mixprec
