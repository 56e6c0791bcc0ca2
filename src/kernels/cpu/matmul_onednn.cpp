// oneDNN matmul primitives behind a bounded, thread-safe LRU cache.
#include "kernels/cpu/matmul_onednn.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/onednn_context.h"
#include "kernels/cpu/primitive_cache.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace cpu {
namespace {

using dnnl::memory;

// Everything a primitive depends on; pointers are bound at execution time.
struct Key {
  std::int64_t m, n, k;
  bool trans_a, trans_b;
  DType dtype, c_dtype;
  bool has_bias;
  DType bias_dtype;
  MatmulPostOp post_op;
  bool accumulate;
  bool bf16_fpmath;
  std::int64_t ldb;  // B's row stride (non-transposed B), 0 = n

  Key(const MatmulDesc& d, std::int64_t b_stride)
      : m(d.m), n(d.n), k(d.k), trans_a(d.trans_a), trans_b(d.trans_b), dtype(d.dtype),
        c_dtype(d.c_dtype), has_bias(d.has_bias),
        bias_dtype(d.has_bias ? d.bias_dtype : DType::f32),  // irrelevant without a bias
        post_op(d.post_op), accumulate(d.accumulate), bf16_fpmath(d.bf16_fpmath),
        ldb(d.trans_b ? 0 : b_stride) {}
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  std::size_t operator()(const Key& key) const noexcept {
    std::size_t h = std::hash<std::int64_t>{}(key.m);
    auto mix = [&h](std::uint64_t v) { hash_mix(h, v); };
    mix(static_cast<std::uint64_t>(key.n));
    mix(static_cast<std::uint64_t>(key.k));
    mix(static_cast<std::uint64_t>(key.trans_a) | static_cast<std::uint64_t>(key.trans_b) << 1 |
        static_cast<std::uint64_t>(key.has_bias) << 2 |
        static_cast<std::uint64_t>(key.accumulate) << 3 |
        static_cast<std::uint64_t>(key.post_op) << 4 | static_cast<std::uint64_t>(key.dtype) << 8 |
        static_cast<std::uint64_t>(key.c_dtype) << 12 |
        static_cast<std::uint64_t>(key.bias_dtype) << 16 |
        static_cast<std::uint64_t>(key.bf16_fpmath) << 20);
    mix(static_cast<std::uint64_t>(key.ldb));
    return h;
  }
};

// A created primitive, or the verdict that oneDNN has nothing usable for the key (so the
// fallback does not retry primitive creation on every call).
struct Entry {
  bool usable = false;
  dnnl::matmul primitive;
  memory::desc a_md, b_md, bias_md, c_md, scratchpad_md;
  std::string impl;  // "onednn:<impl_info_str>" or why nothing is usable
};

using Cache = PrimitiveCache<Key, Entry, KeyHash, 256>;

Cache& cache() {
  static Cache* instance = new Cache;  // never destroyed: primitives must not outlive oneDNN
  return *instance;
}

std::shared_ptr<const Entry> create(const Key& key) {
  auto entry = std::make_shared<Entry>();
  const memory::dim m = key.m, n = key.n, k = key.k;
  // Row-major storage; a transposed operand is the same buffer read with swapped strides.
  entry->a_md = memory::desc({m, k}, to_dnnl(key.dtype),
                             key.trans_a ? memory::dims{1, m} : memory::dims{k, 1});
  entry->b_md = memory::desc({k, n}, to_dnnl(key.dtype),
                             key.trans_b ? memory::dims{1, k} : memory::dims{key.ldb > 0 ? key.ldb : n, 1});
  entry->c_md = memory::desc({m, n}, to_dnnl(key.c_dtype), memory::dims{n, 1});
  if (key.has_bias) entry->bias_md = memory::desc({1, n}, to_dnnl(key.bias_dtype), {n, 1});

  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (key.bf16_fpmath) attr.set_fpmath_mode(dnnl::fpmath_mode::bf16);
  // Order matters: relu sees product + bias, then the sum post-op adds the old C.
  dnnl::post_ops ops;
  if (key.post_op == MatmulPostOp::relu) {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    // oneDNN's reference relu (all it has on arm64) returns x * 0 = -0 for negative x; 1*x + 0
    // turns that -0 into +0, as the reference's relu gives, and changes nothing else.
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, 1.0f, 0.0f);
  }
  if (key.accumulate) ops.append_sum(1.0f);
  attr.set_post_ops(ops);

  const dnnl::engine& engine = onednn_engine("matmul");
  dnnl::matmul::primitive_desc pd;
  try {
    const dnnl::matmul::desc desc =
        key.has_bias ? dnnl::matmul::desc(entry->a_md, entry->b_md, entry->bias_md, entry->c_md)
                     : dnnl::matmul::desc(entry->a_md, entry->b_md, entry->c_md);
    pd = dnnl::matmul::primitive_desc(desc, attr, engine);
  } catch (const dnnl::error& e) {
    if (e.status != dnnl_unimplemented) {
      throw BackendError("matmul", std::string("oneDNN could not create a matmul primitive (") +
                                       e.what() + "); set MIXPREC_MATMUL=ref to use the "
                                       "reference kernel");
    }
    entry->impl = "onednn: unimplemented";
    return entry;
  }
  entry->impl = std::string("onednn:") + pd.impl_info_str();
  // oneDNN's "ref:any" is a scalar loop far slower than converting bf16 to f32 and using the
  // JIT f32 kernel; for f32 there is nothing better, so it is accepted there.
  const bool reference = std::string_view(pd.impl_info_str()).starts_with("ref");
  entry->usable = !reference || key.dtype == DType::f32;
  if (!entry->usable) return entry;
  entry->scratchpad_md = pd.scratchpad_desc();
  try {
    entry->primitive = dnnl::matmul(pd);
  } catch (const dnnl::error& e) {
    throw BackendError("matmul", std::string("oneDNN could not create a matmul primitive (") +
                                     e.what() + "); set MIXPREC_MATMUL=ref to use the reference "
                                     "kernel");
  }
  return entry;
}

dnnl_exec_arg_t arg(int index, const memory& mem) { return {index, mem.get()}; }

}  // namespace

bool onednn_matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias,
                   void* c, OnednnInfo* info, std::int64_t ldb) {
  MIXPREC_ASSERT(ldb == 0 || (!desc.trans_b && ldb >= desc.n));
  const Key key(desc, ldb);
  std::shared_ptr<const Entry> entry = cache().find(key);
  const bool cached = entry != nullptr;
  if (!cached) entry = cache().insert(key, create(key));
  if (info != nullptr) {
    info->impl = entry->impl;
    info->cached = cached;
  }
  if (!entry->usable) return false;

  try {
    const dnnl::engine& engine = onednn_engine("matmul");
    // Memory objects only wrap the caller's buffers: no copies.
    const memory a_mem(entry->a_md, engine, const_cast<void*>(a));
    const memory b_mem(entry->b_md, engine, const_cast<void*>(b));
    const memory c_mem(entry->c_md, engine, c);
    memory bias_mem, scratch_mem;
    std::array<dnnl_exec_arg_t, 5> args{};
    int nargs = 0;
    args[nargs++] = arg(DNNL_ARG_SRC, a_mem);
    args[nargs++] = arg(DNNL_ARG_WEIGHTS, b_mem);
    args[nargs++] = arg(DNNL_ARG_DST, c_mem);
    if (desc.has_bias) {
      bias_mem = memory(entry->bias_md, engine, const_cast<void*>(bias));
      args[nargs++] = arg(DNNL_ARG_BIAS, bias_mem);
    }
    if (const std::size_t bytes = entry->scratchpad_md.get_size(); bytes > 0) {
      scratch_mem = memory(entry->scratchpad_md, engine, onednn_scratchpad(bytes));
      args[nargs++] = arg(DNNL_ARG_SCRATCHPAD, scratch_mem);
    }
    // The C API takes a plain array, avoiding the std::unordered_map of the C++ execute().
    dnnl::stream& stream = onednn_stream("matmul");
    dnnl::error::wrap_c_api(
        dnnl_primitive_execute(entry->primitive.get(), stream.get(), nargs, args.data()),
        "could not execute a matmul primitive");
    stream.wait();
  } catch (const dnnl::error& e) {
    throw BackendError("matmul", std::string("oneDNN failed to run ") + entry->impl + " (" +
                                     e.what() + "); set MIXPREC_MATMUL=ref to use the "
                                     "reference kernel");
  }
  return true;
}

}  // namespace cpu

std::size_t matmul_cache_size() { return cpu::cache().size(); }
std::uint64_t matmul_cache_hits() { return cpu::cache().hits(); }
void matmul_cache_clear() { cpu::cache().clear(); }

}  // namespace mixprec::kernels
