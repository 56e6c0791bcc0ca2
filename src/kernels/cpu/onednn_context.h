#pragma once
/// The process-wide oneDNN CPU engine, a stream per calling thread and a reusable scratchpad per
/// calling thread, shared by every kernel that runs oneDNN primitives.
#include <cstddef>

#include <oneapi/dnnl/dnnl.hpp>

namespace mixprec::kernels::cpu {

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
