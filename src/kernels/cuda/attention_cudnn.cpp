// cuDNN's fused SDPA through the cuDNN frontend (attention_cudnn.h). Host code: the frontend is
// header-only C++ in its dynamic-loading mode (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING, set by
// CMake), so every cuDNN call is a dlsym on the handle cudnn_loader.cpp opened; the handle, the
// lock and the workspace are the ones the convolutions use too (cudnn_session.h). Without the
// cuDNN path (no CUDA, or no frontend headers) every desc is refused and nothing else is
// compiled.
#include "kernels/cuda/attention_cudnn.h"

#include <cstdint>
#include <string>

#include "kernels/cuda/cudnn_loader.h"

#if defined(MIXPREC_HAVE_CUDNN)
#include <cuda_runtime.h>
#include <cudnn_frontend.h>

#include <bit>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cudnn_session.h"
#endif

namespace mixprec::kernels::cuda {
namespace {

thread_local std::string t_refusal;
thread_local std::string t_last_error;

bool fail(std::string why) {
  t_last_error = std::move(why);
  return false;
}

}  // namespace

const char* cudnn_attention_refusal_given(const AttentionDesc& d, const char* loaded_why_none) {
  auto refuse = [](std::string why) {
    t_refusal = std::move(why);
    return t_refusal.c_str();
  };
  if (d.dtype != DType::bf16 && d.dtype != DType::f16) {
    return refuse(std::string("dtype ") + name(d.dtype) + ": cuDNN's SDPA takes bf16 or f16");
  }
  if (d.mask != nullptr) return refuse("additive mask: cuDNN's SDPA path takes none");
  if (d.dropout_p != 0.0f) return refuse("dropout: cuDNN's mask differs from mixprec's Philox mask");
  if (!d.round_probs) {
    return refuse("round_probs off (attention precision highest): cuDNN rounds P and dS to "
                  "the 16-bit dtype");
  }
  if (d.bh <= 0 || d.tq <= 0 || d.tk <= 0 || d.heads <= 0 || d.bh % d.heads != 0) {
    return refuse("shape: bh " + std::to_string(d.bh) + ", heads " + std::to_string(d.heads) +
                  ", tq " + std::to_string(d.tq) + ", tk " + std::to_string(d.tk));
  }
  for (const std::int64_t w : {d.d, d.dv}) {
    if (w <= 0 || w % 8 != 0 || w > 256) {
      return refuse("head size d " + std::to_string(d.d) + ", dv " + std::to_string(d.dv) +
                    ": cuDNN takes multiples of 8 up to 256");
    }
  }
  for (const AttentionLayout* l : {&d.q_rows, &d.k_rows, &d.v_rows, &d.out_rows}) {
    if (l->batch % 8 != 0 || l->head % 8 != 0 || l->row % 8 != 0) {
      return refuse("strides not multiples of 8 elements (cuDNN needs 16-byte aligned rows)");
    }
  }
  if (loaded_why_none != nullptr && loaded_why_none[0] != '\0') {
    return refuse(std::string("cuDNN not loaded: ") + loaded_why_none);
  }
  return nullptr;
}

const char* cudnn_attention_refusal(const AttentionDesc& d) {
  // The cheap checks first: the loader's search runs only for a desc cuDNN could take.
  if (const char* why = cudnn_attention_refusal_given(d, nullptr)) return why;
  return cudnn_attention_refusal_given(d, cudnn_library().why_none.c_str());
}

const char* cudnn_attention_last_error() { return t_last_error.c_str(); }

#if !defined(MIXPREC_HAVE_CUDNN)

bool cudnn_attention_forward(const AttentionDesc& d, const void*, const void*, const void*, void*,
                             float*) {
  const char* why = cudnn_attention_refusal(d);
  return fail(why != nullptr ? why : "built without cuDNN");
}

bool cudnn_attention_backward(const AttentionDesc& d, const void*, const void*, const void*,
                              const void*, const float*, const void*, void*, void*, void*) {
  const char* why = cudnn_attention_refusal(d);
  return fail(why != nullptr ? why : "built without cuDNN");
}

#else

namespace {

namespace fe = cudnn_frontend;

// Tensor uids of the variant packs.
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

enum class Pass : std::uint8_t { forward, backward };

/// The strides (in elements) of one operand as [B, H, T, width]: the layout's, or contiguous
/// [bh, t, width] when the layout is all zero (kernels/attention.h).
std::vector<std::int64_t> strides_of(const AttentionLayout& l, std::int64_t heads, std::int64_t t,
                                     std::int64_t width) {
  if (l.batch == 0 && l.head == 0 && l.row == 0) return {heads * t * width, t * width, width, 1};
  return {l.batch, l.head, l.row, 1};
}


/// Everything a built graph depends on: the plan cache's key.
struct PlanKey {
  Pass pass;
  DType dtype;
  bool causal;
  int device;
  std::uint32_t scale_bits;
  std::int64_t b, h, tq, tk, d, dv;
  std::int64_t strides[4][3];  // q, k, v, out (dq, dk, dv, dout share them)
  auto tie() const {
    return std::tie(pass, dtype, causal, device, scale_bits, b, h, tq, tk, d, dv);
  }
  bool operator<(const PlanKey& o) const {
    if (tie() != o.tie()) return tie() < o.tie();
    return std::memcmp(strides, o.strides, sizeof strides) < 0;
  }
};

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  std::int64_t workspace = 0;
  std::string error;  ///< non-empty: this key cannot be built (not retried)
};

fe::DataType_t io_type(DType t) {
  return t == DType::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& g, const char* name,
                                                    Uid uid, std::vector<std::int64_t> dim,
                                                    std::vector<std::int64_t> stride) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(std::move(dim))
                      .set_stride(std::move(stride)));
}

void output(const std::shared_ptr<fe::graph::Tensor_attributes>& t, Uid uid,
            std::vector<std::int64_t> dim, std::vector<std::int64_t> stride) {
  t->set_output(true).set_uid(uid).set_dim(std::move(dim)).set_stride(std::move(stride));
}

/// Builds the graph of `key` into plan; returns why not ("" when built).
std::string build(const PlanKey& key, cudnnHandle_t handle, Plan& plan) {
  const std::int64_t B = key.b, H = key.h;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io_type(key.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // The compute capability from our (static) runtime, so the frontend does not ask its dlopen'd
  // libcudart; before the sdpa node is added, which copies the graph's context.
  std::string error;
  const std::int32_t sm = cudnn_sm_version(key.device, error);
  if (sm == 0) return error;
  if (sm < 80) return "cuDNN's fused SDPA needs sm_80 or newer";
  g->set_sm_version(sm);
  auto s = [&](int i) {
    return std::vector<std::int64_t>{key.strides[i][0], key.strides[i][1], key.strides[i][2], 1};
  };
  const std::vector<std::int64_t> qdim{B, H, key.tq, key.d}, kdim{B, H, key.tk, key.d},
      vdim{B, H, key.tk, key.dv}, odim{B, H, key.tq, key.dv}, sdim{B, H, key.tq, 1},
      sstride{H * key.tq, key.tq, 1, 1};
  auto Q = input(*g, "Q", kQ, qdim, s(0));
  auto K = input(*g, "K", kK, kdim, s(1));
  auto V = input(*g, "V", kV, vdim, s(2));
  if (key.pass == Pass::forward) {
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("sdpa")
                    .set_generate_stats(true)
                    .set_attn_scale(std::bit_cast<float>(key.scale_bits));
    if (key.causal) {  // top-left: key j > row i is masked (set_causal_mask, not deprecated)
      opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    }
    auto [O, Stats] = g->sdpa(Q, K, V, opts);
    output(O, kO, odim, s(3));
    output(Stats, kStats, sdim, sstride);
    Stats->set_data_type(fe::DataType_t::FLOAT);
  } else {
    auto O = input(*g, "O", kO, odim, s(3));
    auto dO = input(*g, "dO", kDO, odim, s(3));
    auto Stats = input(*g, "Stats", kStats, sdim, sstride);
    Stats->set_data_type(fe::DataType_t::FLOAT);
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("sdpa_backward")
                    .set_attn_scale(std::bit_cast<float>(key.scale_bits))
                    .set_deterministic_algorithm(true);
    if (key.causal) {
      opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    }
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, opts);
    output(dQ, kDQ, qdim, s(0));
    output(dK, kDK, kdim, s(1));
    output(dV, kDV, vdim, s(2));
  }
  MIXPREC_FE_TRY(g->validate());
  MIXPREC_FE_TRY(g->build_operation_graph(handle));
  MIXPREC_FE_TRY(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}));
  MIXPREC_FE_TRY(g->check_support());
  MIXPREC_FE_TRY(g->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE));
  std::int64_t workspace = 0;
  MIXPREC_FE_TRY(g->get_workspace_size(workspace));
  plan.graph = std::move(g);
  plan.workspace = workspace;
  return "";
}

PlanKey key_of(Pass pass, const AttentionDesc& d, int device) {
  PlanKey k{};
  k.pass = pass;
  k.dtype = d.dtype;
  k.causal = d.causal;
  k.device = device;
  k.scale_bits = std::bit_cast<std::uint32_t>(d.scale);
  k.b = d.bh / d.heads;
  k.h = d.heads;
  k.tq = d.tq;
  k.tk = d.tk;
  k.d = d.d;
  k.dv = d.dv;
  const std::vector<std::int64_t> st[4] = {strides_of(d.q_rows, d.heads, d.tq, d.d),
                                           strides_of(d.k_rows, d.heads, d.tk, d.d),
                                           strides_of(d.v_rows, d.heads, d.tk, d.dv),
                                           strides_of(d.out_rows, d.heads, d.tq, d.dv)};
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) k.strides[i][j] = st[i][j];
  }
  return k;
}

/// Finds or builds the plan of (pass, d) and runs it with `pack`. Holds the state's lock
/// throughout (one handle, one stream).
bool run(Pass pass, const AttentionDesc& d, std::unordered_map<std::int64_t, void*>& pack) {
  try {
    CudnnCall call;
    if (!call.error().empty()) return fail(call.error());
    static auto* plans = new std::map<PlanKey, std::shared_ptr<Plan>>;  // under call's lock
    const PlanKey key = key_of(pass, d, call.device());
    std::shared_ptr<Plan>& slot = (*plans)[key];
    if (!slot) {
      slot = std::make_shared<Plan>();
      slot->error = build(key, call.handle(), *slot);
    }
    if (!slot->error.empty()) return fail("cuDNN graph: " + slot->error);
    CudnnWorkspace workspace(static_cast<std::size_t>(slot->workspace));
    if (!workspace.ok()) {
      return fail("out of device memory for " + std::to_string(slot->workspace) +
                  " bytes of cuDNN workspace");
    }
    if (auto e = slot->graph->execute(call.handle(), pack, workspace.get()); e.is_bad()) {
      return fail("cuDNN execute: " + e.get_message());
    }
    t_last_error.clear();
    return true;
  } catch (const std::exception& e) {  // the frontend throws for a symbol it cannot find
    return fail(std::string("cuDNN: ") + e.what());
  }
}

}  // namespace

bool cudnn_attention_forward(const AttentionDesc& d, const void* q, const void* k, const void* v,
                             void* out, float* lse) {
  if (const char* why = cudnn_attention_refusal(d)) return fail(why);
  if (cudnn_pointer_alignment({q, k, v, out, lse}) < 16) return fail("a buffer is not 16-byte aligned");
  std::unordered_map<std::int64_t, void*> pack{{kQ, const_cast<void*>(q)},
                                               {kK, const_cast<void*>(k)},
                                               {kV, const_cast<void*>(v)},
                                               {kO, out},
                                               {kStats, lse}};
  return run(Pass::forward, d, pack);
}

bool cudnn_attention_backward(const AttentionDesc& d, const void* q, const void* k,
                              const void* v, const void* out, const float* lse, const void* dout,
                              void* dq, void* dk, void* dv) {
  if (const char* why = cudnn_attention_refusal(d)) return fail(why);
  if (cudnn_pointer_alignment({q, k, v, out, lse, dout, dq, dk, dv}) < 16) {
    return fail("a buffer is not 16-byte aligned");
  }
  std::unordered_map<std::int64_t, void*> pack{{kQ, const_cast<void*>(q)},
                                               {kK, const_cast<void*>(k)},
                                               {kV, const_cast<void*>(v)},
                                               {kO, const_cast<void*>(out)},
                                               {kStats, const_cast<float*>(lse)},
                                               {kDO, const_cast<void*>(dout)},
                                               {kDQ, dq},
                                               {kDK, dk},
                                               {kDV, dv}};
  return run(Pass::backward, d, pack);
}

#endif  // MIXPREC_HAVE_CUDNN

}  // namespace mixprec::kernels::cuda
