// cuDNN convolutions through the cuDNN frontend's graph API (conv_cudnn.h). Host code: the
// frontend is header-only C++ in its dynamic-loading mode (set by CMake for this file), sharing
// the process's cuDNN handle, lock and workspace allocator with the attention graphs
// (cudnn_session.h). Without the cuDNN path (no CUDA, or no frontend headers) every desc is
// refused and only the host logic below is compiled.
#include "kernels/cuda/conv_cudnn.h"

#include <string>

#include "kernels/cuda/cudnn_loader.h"

#if defined(MIXPREC_HAVE_CUDNN)
#include <cuda_runtime.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cudnn_session.h"
#include "kernels/cuda/stream_bridge.h"
#include "mixprec/core/verbose.h"
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

const char* conv_pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::forward: return "fprop";
    case ConvPass::backward_data: return "dgrad";
    default: return "wgrad";
  }
}

const char* cudnn_conv_refusal_given(const Conv2dDesc& d, const char* loaded_why_none) {
  auto refuse = [](std::string why) {
    t_refusal = std::move(why);
    return t_refusal.c_str();
  };
  if (d.dtype != DType::bf16 && d.dtype != DType::f16 && d.dtype != DType::f32) {
    return refuse(std::string("dtype ") + name(d.dtype) + ": cuDNN's path takes bf16, f16 or f32");
  }
  if (d.has_bias && d.bias_dtype != d.dtype && d.bias_dtype != DType::f32) {
    return refuse(std::string("bias dtype ") + name(d.bias_dtype) + ": neither " + name(d.dtype) +
                  " nor f32");
  }
  for (const std::int64_t extent : {d.n, d.c, d.h, d.w, d.o, d.kh, d.kw}) {
    if (extent <= 0) return refuse("an extent is zero: cuDNN takes no empty tensor");
  }
  if (d.out_h() <= 0 || d.out_w() <= 0) {
    return refuse("an extent is zero: cuDNN takes no empty tensor");
  }
  if (loaded_why_none != nullptr && loaded_why_none[0] != '\0') {
    return refuse(std::string("cuDNN not loaded: ") + loaded_why_none);
  }
  return nullptr;
}

const char* cudnn_conv_refusal(const Conv2dDesc& d) {
  // The cheap checks first: the loader's search runs only for a desc cuDNN could take.
  if (const char* why = cudnn_conv_refusal_given(d, nullptr)) return why;
  return cudnn_conv_refusal_given(d, cudnn_library().why_none.c_str());
}

const char* cudnn_conv_last_error() { return t_last_error.c_str(); }

CudnnConvKey cudnn_conv_key(ConvPass pass, const Conv2dDesc& d, int device,
                            std::int64_t alignment) {
  CudnnConvKey k;
  k.pass = pass;
  k.dtype = d.dtype;
  k.bias_dtype = d.bias_dtype;
  k.has_bias = d.has_bias;
  k.channels_last = d.channels_last;
  k.tf32 = d.tf32;
  k.device = device;
  k.alignment = alignment;
  k.n = d.n, k.c = d.c, k.h = d.h, k.w = d.w;
  k.o = d.o, k.kh = d.kh, k.kw = d.kw;
  k.stride = d.stride, k.padding = d.padding;
  return k;
}

#if !defined(MIXPREC_HAVE_CUDNN)

namespace {
bool refused(const Conv2dDesc& d) {
  const char* why = cudnn_conv_refusal(d);
  return fail(why != nullptr ? why : "built without cuDNN");
}
}  // namespace

bool cudnn_conv2d(const Conv2dDesc& d, const void*, const void*, const void*, void*) {
  return refused(d);
}

bool cudnn_conv2d_backward_data(const Conv2dDesc& d, const void*, const void*, void*) {
  return refused(d);
}

bool cudnn_conv2d_backward_weights(const Conv2dDesc& d, const void*, const void*, void*) {
  return refused(d);
}

#else

namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// Tensor uids of the variant packs.
enum Uid : std::int64_t { kX = 1, kW, kY, kBias, kDY, kDX, kDW };

/// How many plans the first call of a shape builds and times, in the heuristics' order: enough
/// to find the fast engine (it is nearly always among the first few), without building every
/// engine cuDNN lists (each build may compile kernels at run time).
constexpr std::int64_t kMaxCandidates = 8;
/// Timed runs per candidate after one warm-up run; the fastest run counts.
constexpr int kTimedRuns = 3;
/// The largest workspace an engine may ask for: more is memory a training step needs.
constexpr std::int64_t kMaxWorkspace = std::int64_t{512} << 20;

fe::DataType_t data_type(DType t) {
  switch (t) {
    case DType::bf16: return fe::DataType_t::BFLOAT16;
    case DType::f16: return fe::DataType_t::HALF;
    default: return fe::DataType_t::FLOAT;
  }
}

/// Strides (elements) of an activation [n, ch, hh, ww] in NCHW or channels-last memory.
std::vector<std::int64_t> activation_strides(bool channels_last, std::int64_t ch, std::int64_t hh,
                                             std::int64_t ww) {
  if (channels_last) return {hh * ww * ch, 1, ww * ch, ch};
  return {ch * hh * ww, hh * ww, ww, 1};
}

/// One built graph and the engine chosen for it.
struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  std::vector<std::int64_t> candidates;  ///< plan indices that built, heuristics' order
  std::int64_t index = -1;               ///< the chosen plan; -1 until timed
  std::int64_t workspace = 0;            ///< its workspace bytes
  std::string error;                     ///< non-empty: this key cannot run (not retried)
};

/// The plans, guarded by CudnnCall's lock; never destroyed (plans must not outlive cuDNN at
/// process exit).
std::map<CudnnConvKey, std::shared_ptr<Plan>>& plans() {
  static auto* m = new std::map<CudnnConvKey, std::shared_ptr<Plan>>;
  return *m;
}

TensorPtr input(fe::graph::Graph& g, const char* name, Uid uid, std::vector<std::int64_t> dim,
                std::vector<std::int64_t> stride, std::int64_t alignment) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(std::move(dim))
                      .set_stride(std::move(stride))
                      .set_alignment(alignment));
}

void output(const TensorPtr& t, Uid uid, std::vector<std::int64_t> dim,
            std::vector<std::int64_t> stride, std::int64_t alignment) {
  t->set_output(true)
      .set_uid(uid)
      .set_dim(std::move(dim))
      .set_stride(std::move(stride))
      .set_alignment(alignment);
}

/// The attributes of every pass's node: square padding and stride, no dilation, f32 compute.
template <class Attributes>
Attributes conv_attributes(const char* node, const CudnnConvKey& k) {
  return Attributes()
      .set_name(node)
      .set_padding({k.padding, k.padding})
      .set_stride({k.stride, k.stride})
      .set_dilation({1, 1})
      .set_compute_data_type(fe::DataType_t::FLOAT);
}

/// Builds the graph of `k` and the plans of its first kMaxCandidates acceptable engines into
/// plan; returns why not ("" when at least one built).
std::string build(const CudnnConvKey& k, const CudnnCall& call, Plan& plan) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(data_type(k.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  std::string error;
  const std::int32_t sm = cudnn_sm_version(call.device(), error);
  if (sm == 0) return error;
  g->set_sm_version(sm);  // before the nodes, which copy the graph's context

  const std::int64_t ho = (k.h + 2 * k.padding - k.kh) / k.stride + 1;
  const std::int64_t wo = (k.w + 2 * k.padding - k.kw) / k.stride + 1;
  const std::vector<std::int64_t> xdim{k.n, k.c, k.h, k.w}, ydim{k.n, k.o, ho, wo},
      wdim{k.o, k.c, k.kh, k.kw};
  const std::vector<std::int64_t> xstride = activation_strides(k.channels_last, k.c, k.h, k.w),
                                  ystride = activation_strides(k.channels_last, k.o, ho, wo),
                                  wstride{k.c * k.kh * k.kw, k.kh * k.kw, k.kw, 1};  // OIHW
  const std::int64_t a = k.alignment;
  switch (k.pass) {
    case ConvPass::forward: {
      auto X = input(*g, "x", kX, xdim, xstride, a);
      auto W = input(*g, "w", kW, wdim, wstride, a);
      auto Y = g->conv_fprop(X, W, conv_attributes<fe::graph::Conv_fprop_attributes>("fprop", k));
      if (k.has_bias) {
        // The sum stays f32 (a virtual tensor) and the bias is added in f32 before the one
        // rounding to the dtype, as the reference's T(acc + b).
        Y->set_dim(ydim).set_stride(ystride).set_data_type(fe::DataType_t::FLOAT);
        auto B = input(*g, "bias", kBias, {1, k.o, 1, 1}, {k.o, 1, 1, 1}, a);
        B->set_data_type(data_type(k.bias_dtype));
        Y = g->pointwise(Y, B,
                         fe::graph::Pointwise_attributes()
                             .set_name("bias")
                             .set_mode(fe::PointwiseMode_t::ADD)
                             .set_compute_data_type(fe::DataType_t::FLOAT));
      }
      output(Y, kY, ydim, ystride, a);
      Y->set_data_type(data_type(k.dtype));
      break;
    }
    case ConvPass::backward_data: {
      auto DY = input(*g, "dy", kDY, ydim, ystride, a);
      auto W = input(*g, "w", kW, wdim, wstride, a);
      auto DX = g->conv_dgrad(DY, W, conv_attributes<fe::graph::Conv_dgrad_attributes>("dgrad", k));
      output(DX, kDX, xdim, xstride, a);
      DX->set_data_type(data_type(k.dtype));
      break;
    }
    case ConvPass::backward_weights: {
      auto DY = input(*g, "dy", kDY, ydim, ystride, a);
      auto X = input(*g, "x", kX, xdim, xstride, a);
      auto DW = g->conv_wgrad(DY, X, conv_attributes<fe::graph::Conv_wgrad_attributes>("wgrad", k));
      output(DW, kDW, wdim, wstride, a);
      DW->set_data_type(data_type(k.dtype));
      break;
    }
  }
  MIXPREC_FE_TRY(g->validate());
  MIXPREC_FE_TRY(g->build_operation_graph(call.handle()));
  MIXPREC_FE_TRY(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}));
  // After create_execution_plans: the notes filter the engines it listed. Nondeterministic
  // engines would break "two runs, the same bits"; the others would break "products exact,
  // sums in f32, one rounding" (FFT and Winograd transforms round in between).
  std::vector<fe::NumericalNote_t> barred{
      fe::NumericalNote_t::NONDETERMINISTIC,   fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION,
      fe::NumericalNote_t::DOWN_CONVERT_INPUTS, fe::NumericalNote_t::FFT,
      fe::NumericalNote_t::WINOGRAD,           fe::NumericalNote_t::WINOGRAD_TILE_4x4,
      fe::NumericalNote_t::WINOGRAD_TILE_6x6,  fe::NumericalNote_t::WINOGRAD_TILE_13x13};
  // f32 data on Tensor Cores is TF32: only when the matmul precision allows it. (16-bit data
  // is exact on Tensor Cores, so their engines stay.)
  if (k.dtype == DType::f32 && !k.tf32) barred.push_back(fe::NumericalNote_t::TENSOR_CORE);
  g->deselect_numeric_notes(barred);
  g->deselect_workspace_greater_than(kMaxWorkspace);
  MIXPREC_FE_TRY(g->check_support());
  std::string failures;
  for (std::int64_t i = 0; i < g->get_execution_plan_count() &&
                           static_cast<std::int64_t>(plan.candidates.size()) < kMaxCandidates;
       ++i) {
    if (auto e = g->build_plan_at_index(i); e.is_bad()) {
      if (failures.empty()) failures = e.get_message();
      continue;
    }
    plan.candidates.push_back(i);
  }
  if (plan.candidates.empty()) return "no engine plan built: " + failures;
  plan.graph = std::move(g);
  return "";
}

/// Runs plan `index` of `graph` once with a workspace of its own size; "" or why not.
std::string execute(const fe::graph::Graph& graph, cudnnHandle_t handle, std::int64_t index,
                    std::unordered_map<std::int64_t, void*>& pack) {
  std::int64_t bytes = 0;
  MIXPREC_FE_TRY(graph.get_workspace_size_plan_at_index(index, bytes));
  CudnnWorkspace workspace(static_cast<std::size_t>(bytes));
  if (!workspace.ok()) {
    return "out of device memory for " + std::to_string(bytes) + " bytes of cuDNN workspace";
  }
  MIXPREC_FE_TRY(graph.execute_plan_at_index(handle, pack, workspace.get(), index));
  return "";
}

/// CUDA events on the backend's stream, destroyed with the object.
class Events {
 public:
  Events() {
    ok_ = cudaEventCreate(&start_) == cudaSuccess && cudaEventCreate(&stop_) == cudaSuccess;
  }
  ~Events() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  bool ok() const { return ok_; }
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool ok_ = false;
};

/// Times every candidate of plan on this call's operands (their outputs are overwritten, which
/// the call does anyway) and keeps the fastest; "" or why none ran. Once per shape, outside the
/// steady state: it synchronises with the device.
std::string choose_engine(const CudnnConvKey& key, Plan& plan, cudnnHandle_t handle,
                          std::unordered_map<std::int64_t, void*>& pack) {
  Events events;
  if (!events.ok()) return "cudaEventCreate failed";
  const cudaStream_t s = backend_stream();
  float best_ms = std::numeric_limits<float>::infinity();
  std::string failures;
  for (const std::int64_t index : plan.candidates) {
    if (std::string e = execute(*plan.graph, handle, index, pack); !e.empty()) {  // warm-up
      if (failures.empty()) failures = e;
      continue;
    }
    float fastest = std::numeric_limits<float>::infinity();
    std::string e;
    for (int run = 0; run < kTimedRuns && e.empty(); ++run) {
      if (cudaEventRecord(events.start(), s) != cudaSuccess) return "cudaEventRecord failed";
      e = execute(*plan.graph, handle, index, pack);
      float ms = 0.0f;
      if (cudaEventRecord(events.stop(), s) != cudaSuccess ||
          cudaEventSynchronize(events.stop()) != cudaSuccess ||
          cudaEventElapsedTime(&ms, events.start(), events.stop()) != cudaSuccess) {
        return "timing with CUDA events failed";
      }
      if (e.empty()) fastest = std::min(fastest, ms);
    }
    if (!e.empty()) {
      if (failures.empty()) failures = e;
      continue;
    }
    if (fastest < best_ms) {
      best_ms = fastest;
      plan.index = index;
    }
  }
  if (plan.index < 0) return "no engine ran: " + failures;
  if (auto e = plan.graph->get_workspace_size_plan_at_index(plan.index, plan.workspace);
      e.is_bad()) {
    plan.index = -1;
    return e.get_message();
  }
  if (verbose_enabled()) {
    std::string engine;
    if (plan.graph->get_plan_name_at_index(plan.index, engine).is_bad()) engine = "?";
    verbose_log(std::string("conv2d cuDNN ") + conv_pass_name(key.pass) + " plan", name(key.dtype),
                engine + ", the fastest of " + std::to_string(plan.candidates.size()) +
                    " deterministic engines timed (" + std::to_string(best_ms) + " ms)");
  }
  return "";
}

/// `text` on one line of at most kMaxReason characters: the frontend's messages list every
/// engine on a line of its own, and the verbose log is one line a call.
std::string one_line(std::string text) {
  constexpr std::size_t kMaxReason = 400;
  for (char& ch : text) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  if (text.size() > kMaxReason) text = text.substr(0, kMaxReason) + "...";
  return text;
}

/// Finds or builds the plan of (pass, d) and runs it with `pack`, under the session's lock.
bool run(ConvPass pass, const Conv2dDesc& d, std::initializer_list<const void*> operands,
         std::unordered_map<std::int64_t, void*>& pack) {
  if (const char* why = cudnn_conv_refusal(d)) return fail(why);
  const std::int64_t alignment = cudnn_pointer_alignment(operands);
  if (alignment < static_cast<std::int64_t>(size_of(d.dtype))) {
    return fail("a buffer is not aligned to its elements");
  }
  try {
    CudnnCall call;
    if (!call.error().empty()) return fail(call.error());
    const CudnnConvKey key = cudnn_conv_key(pass, d, call.device(), alignment);
    std::shared_ptr<Plan>& slot = plans()[key];
    if (!slot) {
      slot = std::make_shared<Plan>();
      slot->error = build(key, call, *slot);
      if (slot->error.empty()) slot->error = choose_engine(key, *slot, call.handle(), pack);
      if (!slot->error.empty()) {  // keep only the reason
        slot->error = one_line(std::move(slot->error));
        slot->graph.reset();
      }
    }
    if (!slot->error.empty()) {
      return fail(std::string("cuDNN ") + conv_pass_name(pass) + ": " + slot->error);
    }
    CudnnWorkspace workspace(static_cast<std::size_t>(slot->workspace));
    if (!workspace.ok()) {
      return fail("out of device memory for " + std::to_string(slot->workspace) +
                  " bytes of cuDNN workspace");
    }
    if (auto e = slot->graph->execute_plan_at_index(call.handle(), pack, workspace.get(),
                                                     slot->index);
        e.is_bad()) {
      return fail(std::string("cuDNN ") + conv_pass_name(pass) + " execute: " +
                  one_line(e.get_message()));
    }
    t_last_error.clear();
    return true;
  } catch (const std::exception& e) {  // the frontend throws for a symbol it cannot find
    return fail(std::string("cuDNN: ") + e.what());
  }
}

}  // namespace

bool cudnn_conv2d(const Conv2dDesc& d, const void* x, const void* weight, const void* bias,
                  void* y) {
  std::unordered_map<std::int64_t, void*> pack{
      {kX, const_cast<void*>(x)}, {kW, const_cast<void*>(weight)}, {kY, y}};
  if (d.has_bias) pack.emplace(kBias, const_cast<void*>(bias));
  return run(ConvPass::forward, d, {x, weight, d.has_bias ? bias : nullptr, y}, pack);
}

bool cudnn_conv2d_backward_data(const Conv2dDesc& d, const void* dy, const void* weight,
                                void* dx) {
  std::unordered_map<std::int64_t, void*> pack{
      {kDY, const_cast<void*>(dy)}, {kW, const_cast<void*>(weight)}, {kDX, dx}};
  return run(ConvPass::backward_data, d, {dy, weight, dx}, pack);
}

bool cudnn_conv2d_backward_weights(const Conv2dDesc& d, const void* x, const void* dy,
                                   void* dweight) {
  std::unordered_map<std::int64_t, void*> pack{
      {kX, const_cast<void*>(x)}, {kDY, const_cast<void*>(dy)}, {kDW, dweight}};
  return run(ConvPass::backward_weights, d, {x, dy, dweight}, pack);
}

#endif  // MIXPREC_HAVE_CUDNN

}  // namespace mixprec::kernels::cuda
