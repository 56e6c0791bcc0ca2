#pragma once
/// The process-wide oneDNN CPU engine, a stream per calling thread and a reusable scratchpad per
/// calling thread, shared by every kernel that runs oneDNN primitives.
#include <cstddef>

#include <oneapi/dnnl/dnnl.hpp>

#include "mixprec/core/dtype.h"

namespace mixprec::kernels::cpu {

/// oneDNN's data type for f32, bf16 or f16 (the fp8 storage types are refused before any
/// primitive is built).
dnnl::memory::data_type to_dnnl(DType t);

/// The oneDNN CPU engine (index 0), created on first use; throws BackendError(op, ...) if oneDNN
/// cannot create it (the message says how to use the reference kernels instead).
const dnnl::engine& onednn_engine(const char* op);

/// This thread's stream on onednn_engine(), created once per thread: CPU streams execute
/// synchronously and a stream is not meant to be shared by threads submitting concurrently.
dnnl::stream& onednn_stream(const char* op);

/// This thread's scratchpad, at least `bytes` long and 64-byte aligned; grows, never shrinks,
/// so steady-state calls allocate nothing. Valid until the next call on this thread.
void* onednn_scratchpad(std::size_t bytes);

}  // namespace mixprec::kernels::cpu
