// oneDNN convolution primitives (forward, backward data, backward weights) behind a bounded,
// thread-safe LRU cache keyed by pass, shape, dtypes and layout policy. In blocked mode the
// primitive computes in the layouts oneDNN prefers and each call reorders the caller's buffers
// (NCHW or NHWC activations, OIHW weights) into per-thread temporaries (and outputs back); the reorder primitives are cached too.
#include "kernels/cpu/conv_onednn.h"

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/onednn_context.h"
#include "kernels/cpu/primitive_cache.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct Key {
  ConvPass pass;
  bool blocked;
  std::int64_t n, c, h, w, o, kh, kw, stride, padding;
  DType dtype;
  bool has_bias;
  DType bias_dtype;
  bool channels_last;

  Key(ConvPass p, const Conv2dDesc& d, bool b)
      : pass(p), blocked(b), n(d.n), c(d.c), h(d.h), w(d.w), o(d.o), kh(d.kh), kw(d.kw),
        stride(d.stride), padding(d.padding), dtype(d.dtype), has_bias(d.has_bias),
        bias_dtype(d.has_bias ? d.bias_dtype : DType::f32), channels_last(d.channels_last) {}
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  std::size_t operator()(const Key& k) const noexcept {
    std::size_t h = 0;
    auto mix = [&h](std::uint64_t v) { hash_mix(h, v); };
    for (std::int64_t v : {k.n, k.c, k.h, k.w, k.o, k.kh, k.kw, k.stride, k.padding}) {
      mix(static_cast<std::uint64_t>(v));
    }
    mix(static_cast<std::uint64_t>(k.pass) | static_cast<std::uint64_t>(k.blocked) << 4 |
        static_cast<std::uint64_t>(k.dtype) << 8 | static_cast<std::uint64_t>(k.has_bias) << 12 |
        static_cast<std::uint64_t>(k.bias_dtype) << 16 |
        static_cast<std::uint64_t>(k.channels_last) << 20);
    return h;
  }
};

// Which caller buffer an operand lives in.
enum class Slot : std::uint8_t { x, weight, bias, dy, y, dx, dweight, dbias };

// One operand of the primitive: the caller's plain layout and the primitive's, with the reorder
// between them when they differ.
struct Operand {
  int arg = 0;  // DNNL_ARG_*
  Slot slot = Slot::x;
  bool output = false;
  memory::desc user_md, prim_md;
  bool reorder = false;
  dnnl::reorder reorder_prim;  // user -> prim for inputs, prim -> user for outputs
};

struct Entry {
  bool usable = false;
  dnnl::primitive primitive;
  std::vector<Operand> operands;
  memory::desc scratchpad_md;
  std::string impl;
};

using Cache = PrimitiveCache<Key, Entry, KeyHash, 128>;

Cache& cache() {
  static Cache* instance = new Cache;  // never destroyed: primitives must not outlive oneDNN
  return *instance;
}

[[noreturn]] void fail(const char* what, const dnnl::error& e) {
  throw BackendError("conv2d", std::string("oneDNN ") + what + " (" + e.what() +
                                   "); set MIXPREC_CONV=ref to use the reference kernel");
}

std::shared_ptr<const Entry> create(const Key& k) {
  auto entry = std::make_shared<Entry>();
  const memory::dim ho = (k.h + 2 * k.padding - k.kh) / k.stride + 1;
  const memory::dim wo = (k.w + 2 * k.padding - k.kw) / k.stride + 1;
  const memory::data_type dt = to_dnnl(k.dtype);
  const memory::dims src_dims{k.n, k.c, k.h, k.w}, wei_dims{k.o, k.c, k.kh, k.kw};
  const memory::dims dst_dims{k.n, k.o, ho, wo};
  const tag activations = k.channels_last ? tag::nhwc : tag::nchw;
  const memory::desc src_user(src_dims, dt, activations), wei_user(wei_dims, dt, tag::oihw);
  const memory::desc dst_user(dst_dims, dt, activations);
  const memory::desc bias_md =
      k.has_bias ? memory::desc({k.o}, to_dnnl(k.bias_dtype), tag::x) : memory::desc();
  // Blocked mode lets oneDNN pick every activation/weight layout; plain mode pins the caller's
  // (NCHW or NHWC activations, OIHW weights).
  auto md = [&](const memory::desc& user, const memory::dims& dims) {
    return k.blocked ? memory::desc(dims, dt, tag::any) : user;
  };
  // Weights are oneDNN's choice in both modes: they are small (a reorder of 64x32x3x3 costs
  // microseconds) and its JIT kernels for plain nchw/nhwc activations want blocked weights:
  // with oihw pinned oneDNN 2.6 falls back to its reference loop for bf16 nhwc (~700x slower).
  const memory::desc wei_md(wei_dims, dt, tag::any);
  const memory::dims strides{k.stride, k.stride}, pad{k.padding, k.padding};
  const auto algo = dnnl::algorithm::convolution_direct;
  const dnnl::engine& engine = onednn_engine("conv2d");
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

  dnnl::primitive_desc pd;
  try {
    const dnnl::convolution_forward::desc fwd_desc(
        dnnl::prop_kind::forward_training, algo, md(src_user, src_dims), wei_md,
        bias_md, md(dst_user, dst_dims), strides, pad, pad);
    const dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, attr, engine);
    auto add = [&](int arg, Slot slot, bool output, const memory::desc& user) {
      Operand o;
      o.arg = arg, o.slot = slot, o.output = output, o.user_md = user;
      entry->operands.push_back(std::move(o));
    };
    switch (k.pass) {
      case ConvPass::forward:
        pd = fwd_pd;
        add(DNNL_ARG_SRC, Slot::x, false, src_user);
        add(DNNL_ARG_WEIGHTS, Slot::weight, false, wei_user);
        if (k.has_bias) add(DNNL_ARG_BIAS, Slot::bias, false, bias_md);
        add(DNNL_ARG_DST, Slot::y, true, dst_user);
        break;
      case ConvPass::backward_data: {
        const dnnl::convolution_backward_data::desc bd(algo, md(src_user, src_dims),
                                                       wei_md,
                                                       md(dst_user, dst_dims), strides, pad, pad);
        pd = dnnl::convolution_backward_data::primitive_desc(bd, attr, engine, fwd_pd);
        add(DNNL_ARG_DIFF_DST, Slot::dy, false, dst_user);
        add(DNNL_ARG_WEIGHTS, Slot::weight, false, wei_user);
        add(DNNL_ARG_DIFF_SRC, Slot::dx, true, src_user);
        break;
      }
      case ConvPass::backward_weights: {
        const dnnl::convolution_backward_weights::desc bw(
            algo, md(src_user, src_dims), wei_md, bias_md,
            md(dst_user, dst_dims), strides, pad, pad);
        pd = dnnl::convolution_backward_weights::primitive_desc(bw, attr, engine, fwd_pd);
        add(DNNL_ARG_SRC, Slot::x, false, src_user);
        add(DNNL_ARG_DIFF_DST, Slot::dy, false, dst_user);
        add(DNNL_ARG_DIFF_WEIGHTS, Slot::dweight, true, wei_user);
        if (k.has_bias) add(DNNL_ARG_DIFF_BIAS, Slot::dbias, true, bias_md);
        break;
      }
    }
  } catch (const dnnl::error& e) {
    if (e.status != dnnl_unimplemented) fail("could not create a convolution primitive", e);
    entry->impl = "onednn: unimplemented";
    return entry;
  }
  std::string info = pd.impl_info_str();
  while (!info.empty() && info.back() == ' ') info.pop_back();  // oneDNN pads some names
  entry->impl = "onednn:" + info;
  // oneDNN's "ref" convolution is a scalar loop: for bf16, widening to f32 for the JIT kernels
  // is far faster; for f32 there is nothing better, so it is accepted there.
  entry->usable = !info.starts_with("ref") || k.dtype == DType::f32;
  if (!entry->usable) return entry;
  try {
    for (Operand& op : entry->operands) {
      op.prim_md = pd.query_md(dnnl::query::exec_arg_md, op.arg);
      op.reorder = op.prim_md != op.user_md;
      if (op.reorder) {
        op.reorder_prim = op.output ? dnnl::reorder(dnnl::reorder::primitive_desc(
                                          engine, op.prim_md, engine, op.user_md))
                                    : dnnl::reorder(dnnl::reorder::primitive_desc(
                                          engine, op.user_md, engine, op.prim_md));
      }
    }
    entry->scratchpad_md = pd.scratchpad_desc();
    entry->primitive = dnnl::primitive(pd);
  } catch (const dnnl::error& e) {
    fail("could not create a convolution primitive", e);
  }
  return entry;
}

struct AlignedFree {
  void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
};

// Per-thread temporaries for reordered operands, one per operand position; grow only.
void* temp_buffer(std::size_t index, std::size_t bytes) {
  struct Buf {
    std::unique_ptr<std::byte[], AlignedFree> data;
    std::size_t capacity = 0;
  };
  thread_local std::array<Buf, 4> bufs;
  Buf& b = bufs.at(index);
  if (bytes > b.capacity) {
    b.data.reset();
    b.capacity = 0;
    b.data.reset(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64})));
    b.capacity = bytes;
  }
  return b.data.get();
}

void* pointer(const ConvBuffers& bufs, Slot slot) {
  switch (slot) {
    case Slot::x: return const_cast<void*>(bufs.x);
    case Slot::weight: return const_cast<void*>(bufs.weight);
    case Slot::bias: return const_cast<void*>(bufs.bias);
    case Slot::dy: return const_cast<void*>(bufs.dy);
    case Slot::y: return bufs.y;
    case Slot::dx: return bufs.dx;
    case Slot::dweight: return bufs.dweight;
    case Slot::dbias: return bufs.dbias;
  }
  return nullptr;
}

void execute(const dnnl::primitive& prim, dnnl::stream& stream, std::vector<dnnl_exec_arg_t>& args) {
  dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), stream.get(),
                                                 static_cast<int>(args.size()), args.data()),
                          "could not execute a primitive");
}

}  // namespace

namespace {
// The cached entry of key, created on first use; cached says whether it was there.
std::shared_ptr<const Entry> entry_of(const Key& key, bool* cached) {
  std::shared_ptr<const Entry> entry = cache().find(key);
  if (cached != nullptr) *cached = entry != nullptr;
  return entry != nullptr ? entry : cache().insert(key, create(key));
}
}  // namespace

std::string onednn_conv_impl(ConvPass pass, const Conv2dDesc& desc, bool blocked) {
  return entry_of(Key(pass, desc, blocked), nullptr)->impl;
}

bool onednn_conv(ConvPass pass, const Conv2dDesc& desc, bool blocked, const ConvBuffers& bufs,
                 ConvOnednnInfo* info) {
  bool cached = false;
  const std::shared_ptr<const Entry> entry = entry_of(Key(pass, desc, blocked), &cached);
  bool reordered = false, weights_reordered = false;
  for (const Operand& op : entry->operands) {
    const bool weights = op.slot == Slot::weight || op.slot == Slot::dweight;
    (weights ? weights_reordered : reordered) |= op.reorder;
  }
  if (info != nullptr) {
    *info = {entry->impl, cached, entry->usable && reordered, entry->usable && weights_reordered};
  }
  if (!entry->usable) return false;

  try {
    const dnnl::engine& engine = onednn_engine("conv2d");
    dnnl::stream& stream = onednn_stream("conv2d");
    std::vector<memory> mems;  // keeps the wrappers alive until the primitive ran
    mems.reserve(2 * entry->operands.size() + 1);
    std::vector<dnnl_exec_arg_t> args;
    std::vector<std::pair<const Operand*, std::pair<memory, memory>>> pending_outputs;
    std::size_t temp_index = 0;
    for (const Operand& op : entry->operands) {
      memory user(op.user_md, engine, pointer(bufs, op.slot));
      if (!op.reorder) {
        args.push_back({op.arg, user.get()});
        mems.push_back(std::move(user));
        continue;
      }
      memory prim(op.prim_md, engine, temp_buffer(temp_index++, op.prim_md.get_size()));
      if (!op.output) {
        std::vector<dnnl_exec_arg_t> rargs{{DNNL_ARG_FROM, user.get()}, {DNNL_ARG_TO, prim.get()}};
        execute(op.reorder_prim, stream, rargs);
      } else {
        pending_outputs.push_back({&op, {prim, user}});
      }
      args.push_back({op.arg, prim.get()});
      mems.push_back(std::move(user));
      mems.push_back(std::move(prim));
    }
    if (const std::size_t bytes = entry->scratchpad_md.get_size(); bytes > 0) {
      mems.emplace_back(entry->scratchpad_md, engine, onednn_scratchpad(bytes));
      args.push_back({DNNL_ARG_SCRATCHPAD, mems.back().get()});
    }
    execute(entry->primitive, stream, args);
    for (auto& [op, pair] : pending_outputs) {
      std::vector<dnnl_exec_arg_t> rargs{{DNNL_ARG_FROM, pair.first.get()},
                                         {DNNL_ARG_TO, pair.second.get()}};
      execute(op->reorder_prim, stream, rargs);
    }
    stream.wait();
  } catch (const dnnl::error& e) {
    fail(("failed to run " + entry->impl).c_str(), e);
  }
  return true;
}

std::size_t onednn_conv_cache_size() { return cache().size(); }
void onednn_conv_cache_clear() { cache().clear(); }

}  // namespace mixprec::kernels::cpu
