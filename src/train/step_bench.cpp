// StepBenchmark: whole training steps timed as the Trainer runs them, with the FLOP count, the
// GEMM-only and optimizer-only floors, memory peaks and allocation counts that explain the time.
#include "mixprec/train/step_bench.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>

#include "kernels/matmul.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/runtime/matmul_precision.h"
#include "mixprec/amp/precision.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/train/machine_peaks_memory.h"
#include "mixprec/train/step_profile.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/conv_layers.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/residual.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/train/task.h"

namespace mixprec::train {
namespace {

constexpr const char* kOp = "bench";
// The machine peaks of the hardware floor: a GEMM large enough to reach the rate a big training
// GEMM gets on a few cores, and a copy far larger than the caches.
constexpr std::int64_t kPeakGemmN = 2048, kPeakCopyMiB = 64;
constexpr int kPeakRepeats = 3;

// Records every Linear/Conv2d leaf a forward pass runs, with its shapes and FLOPs, whatever
// the model's data flow (residual branches, attention, several inputs).
class LayerRecorder : public nn::ForwardObserver {
 public:
  explicit LayerRecorder(std::vector<LayerCost>& out) : out_(out) {}
  Tensor on_leaf_forward(nn::Module& m, const Tensor& x, const Tensor& y) override {
    if (auto* linear = dynamic_cast<nn::Linear*>(&m)) {
      const double rows = static_cast<double>(x.numel() / linear->in_features());
      out_.push_back({m.path(), "Linear", x.shape(), y.shape(), linear->bias().defined(),
                      2.0 * rows * static_cast<double>(linear->in_features()) *
                          static_cast<double>(linear->out_features())});
    } else if (auto* conv = dynamic_cast<nn::Conv2d*>(&m)) {
      const double k = static_cast<double>(conv->kernel_size());
      // 2 * N * O * C * kh * kw * Ho * Wo; y is [N, O, Ho, Wo].
      out_.push_back({m.path(), "Conv2d", x.shape(), y.shape(), conv->bias().defined(),
                      2.0 * static_cast<double>(y.numel()) * static_cast<double>(conv->in_channels()) * k * k});
    }
    return y;
  }

 private:
  std::vector<LayerCost>& out_;
};

// The GEMMs of one Linear layer's training step, with their own buffers.
struct GemmCall {
  kernels::MatmulDesc desc;
  Tensor a, b, bias, c;
  void run() const {
    kernels::matmul(desc, a.data_ptr(), b.data_ptr(), bias.defined() ? bias.data_ptr() : nullptr,
                    c.data_ptr());
  }
};

// dw_dtype: what the step's weight-gradient GEMMs write: f32 under autocast (the f32 master's
// gradient comes straight from the accumulator), else the compute dtype.
std::vector<GemmCall> make_gemm_calls(const std::vector<LayerCost>& layers, DType dtype,
                                      DType dw_dtype, bool bf16_fpmath, std::uint64_t seed) {
  std::vector<GemmCall> calls;
  auto desc = [&](std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb) {
    kernels::MatmulDesc d;
    d.m = m; d.n = n; d.k = k;
    d.trans_a = ta; d.trans_b = tb;
    d.dtype = dtype;
    d.c_dtype = dtype;
    d.bf16_fpmath = bf16_fpmath;
    return d;
  };
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerCost& l = layers[i];
    const std::int64_t k = l.input_shape.back(), n = l.output_shape.back();
    const std::int64_t m = numel(l.input_shape) / k;
    const std::uint64_t s = seed + 16 * i;
    // Uniform operands: the random kernels fill them where they live (threads, or the GPU);
    // randn is a host loop that took over a minute for GPT-2-small's operands. A GEMM's time
    // does not depend on the values' distribution.
    const Tensor x = Tensor::uniform({m, k}, s, -1.0f, 1.0f, dtype);
    const Tensor w = Tensor::uniform({n, k}, s + 1, -1.0f, 1.0f, dtype);
    const Tensor dy = Tensor::uniform({m, n}, s + 2, -1.0f, 1.0f, dtype);
    // Forward y [m, n] = x W^T (+ bias), as linear() runs it.
    GemmCall fwd{desc(m, n, k, false, true), x, w, Tensor(), Tensor::empty({m, n}, dtype)};
    if (l.bias) {
      fwd.desc.has_bias = true;
      fwd.desc.bias_dtype = dtype;
      fwd.bias = Tensor::uniform({n}, s + 3, -1.0f, 1.0f, dtype);
    }
    calls.push_back(fwd);
    // dX [m, k] = dY W: autograd skips it for the first layer, whose input needs no gradient.
    if (i > 0) calls.push_back({desc(m, k, n, false, false), dy, w, Tensor(), Tensor::empty({m, k}, dtype)});
    // dW [n, k] = dY^T X.
    GemmCall dw{desc(n, k, m, true, false), dy, x, Tensor(), Tensor::empty({n, k}, dw_dtype)};
    dw.desc.c_dtype = dw_dtype;
    calls.push_back(dw);
  }
  return calls;
}

// Milliseconds taken by fn, once per repetition, up to the end of the device work it queued.
std::vector<double> time_each(int repetitions, const std::function<void()>& fn) {
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(repetitions));
  const Device device = current_device();
  synchronize(device);
  for (int r = 0; r < repetitions; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    synchronize(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return ms;
}

Shape batch_shape(std::int64_t n, const std::vector<std::int64_t>& sample_shape) {
  Shape s{n};
  s.insert(s.end(), sample_shape.begin(), sample_shape.end());
  return s;
}

}  // namespace

std::vector<LayerCost> count_layer_flops(nn::Module& model, const Shape& input_shape) {
  MIXPREC_CHECK(!input_shape.empty(), ValueError, "count_layer_flops",
                "the input shape must include the batch dimension, got []");
  for (std::int64_t d : input_shape) {
    MIXPREC_CHECK(d >= 1, ValueError, "count_layer_flops",
                  "every input dimension must be >= 1, got " << to_string(input_shape));
  }
  Shape one = input_shape;
  one[0] = 1;
  const bool was_training = model.is_training();
  std::vector<LayerCost> layers;
  {
    runtime::NoGradGuard no_grad;
    model.eval();
    try {
      LayerRecorder recorder(layers);
      nn::ForwardObserverScope scope(&recorder);
      model(Tensor::zeros(one));
    } catch (...) {
      model.train(was_training);
      throw;
    }
    model.train(was_training);
  }
  const std::int64_t batch = input_shape[0];
  for (LayerCost& l : layers) {
    l.input_shape[0] *= batch;
    l.output_shape[0] *= batch;
    l.forward_flops *= static_cast<double>(batch);
  }
  return layers;
}

double step_gemm_flops(const std::vector<LayerCost>& layers) {
  double total = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) total += (i == 0 ? 2.0 : 3.0) * layers[i].forward_flops;
  return total;
}

double training_step_flops(const std::vector<LayerCost>& layers) {
  double forward = 0;
  for (const LayerCost& l : layers) forward += l.forward_flops;
  return 3.0 * forward;
}

TimingStats summarize_times(std::vector<double> times_ms) {
  MIXPREC_CHECK(!times_ms.empty(), ValueError, "summarize_times", "no times to summarize");
  std::sort(times_ms.begin(), times_ms.end());
  const std::size_t n = times_ms.size();
  const double median = n % 2 == 1 ? times_ms[n / 2] : 0.5 * (times_ms[n / 2 - 1] + times_ms[n / 2]);
  return {median, times_ms.front(), times_ms.back()};
}

std::int64_t default_batch_size(const std::string& model) {
  const models::ModelSpec& spec = models::model_spec(model);
  if (spec.task == models::TaskKind::language_model) return 16;  // windows of `context` tokens
  return spec.name == "cnn" || spec.name == "resnet" ? 128 : 256;
}

const char* speedup_verdict(double speedup) {
  if (!(speedup >= 1.1)) return "stay in fp32";
  if (speedup < 1.5) return "optional";
  if (speedup <= 2.5) return "use it";
  return "definitely use it";
}

std::string speedup_limit_reason(const CpuFeatures& cpu) {
  if (cpu.avx512_bf16 || cpu.amx_bf16) return "";
  const char* missing = cpu.arm_bf16 ? "oneDNN 2.6 has no bf16 GEMM for arm64"
                        : cpu.neon     ? "it lacks Arm BF16"
                                       : "it lacks AVX512_BF16/AMX-BF16";
  return std::string("this CPU cannot speed up lower-precision GEMMs: ") + missing +
         ", so bf16 GEMMs run through fp32 (amp::choose_precision picks fp32)" +
         (cpu.avx512_fp16 ? "" : " and fp16 is emulated with fp32 arithmetic") +
         "; any gain left comes from memory-bound ops moving fewer bytes";
}

struct StepBenchmark::State {
  models::ModelSpec spec;
  DType gemm_dtype = DType::f32;
  std::int64_t batch = 0;
  std::uint64_t seed = 0;
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<TrainStep> train_step;
  std::vector<LayerCost> layers;
  std::shared_ptr<Task> task;
  data::Batch batch_data;
  std::int64_t tokens_per_sample = 0;

  // The loss as training computes it (the fused cross-entropy, told the step's loss gradient).
  Tensor forward_loss() {
    return task->training_loss((*model)(batch_data.inputs), batch_data,
                               train_step->loss_gradient());
  }
  void step() {
    train_step->run(batch_data, [this](const data::Batch& b) {
      return task->training_loss((*model)(b.inputs), b, train_step->loss_gradient());
    });
  }
};

StepBenchmark::StepBenchmark(std::string model, std::string precision, std::int64_t batch_size,
                             std::uint64_t seed, std::int64_t width)
    : StepBenchmark(std::move(model),
                    StepConfig{.precision = std::move(precision), .optimizer = "adam", .lr = 1e-3f,
                               .scheduler = "none", .seed = seed},
                    batch_size, width) {}

StepBenchmark::StepBenchmark(std::string model, const StepConfig& step, std::int64_t batch_size,
                             std::int64_t width)
    : StepBenchmark(std::move(model), step, batch_size, [&] {
        models::ModelOptions o;
        o.width = width;
        return o;
      }()) {}

StepBenchmark::StepBenchmark(std::string model, const StepConfig& step, std::int64_t batch_size,
                             const models::ModelOptions& options)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.spec = models::model_spec(model);
  step.validate(kOp);
  MIXPREC_CHECK(batch_size >= 0 && batch_size <= 65536, ValueError, kOp,
                "--batch-size must be in [1, 65536] (0 = the model's default), got " << batch_size);
  s.batch = batch_size > 0 ? batch_size : default_batch_size(s.spec.name);
  s.seed = step.seed;
  const bool lm = s.spec.task == models::TaskKind::language_model;
  const std::int64_t width = options.width;
  MIXPREC_CHECK(width == 0 || s.spec.name == "seed-mlp" || lm, ValueError, kOp,
                "--width applies to seed-mlp (its hidden width) and transformers, not to " << s.spec.name);
  models::ModelOptions o = options;
  o.seed = s.seed;
  o = models::resolve_options(s.spec, o);
  s.model = width > 0 && !lm ? models::make_seed_mlp(width, s.seed) : models::build_model(s.spec, o);
  const Shape input_shape = batch_shape(s.batch, models::input_shape(s.spec, o));
  s.layers = count_layer_flops(*s.model, input_shape);  // while the model is still f32
  s.train_step = std::make_unique<TrainStep>(*s.model, step);
  s.gemm_dtype = s.train_step->policy().dtypes.compute;
  s.task = make_task(s.spec);

  // Random inputs (token ids for a language model) and random targets: one per sample, or one
  // per position of a language model.
  const std::int64_t targets = lm ? s.batch * o.context : s.batch;
  auto random_ids = [&](std::int64_t n, std::uint64_t seed) {
    std::vector<std::int64_t> ids;
    ids.reserve(static_cast<std::size_t>(n));
    for (float v : Tensor::uniform({n}, seed, 0.0f, static_cast<float>(s.spec.num_classes)).to_vector()) {
      ids.push_back(std::clamp<std::int64_t>(static_cast<std::int64_t>(v), 0, s.spec.num_classes - 1));
    }
    return ids;
  };
  if (lm) {
    s.tokens_per_sample = o.context;
    const std::vector<std::int64_t> ids = random_ids(s.batch * o.context, s.seed + 2);
    s.batch_data.inputs = Tensor::from_vector(std::vector<float>(ids.begin(), ids.end()), input_shape);
  } else {
    s.batch_data.inputs = Tensor::randn(input_shape, s.seed);
  }
  s.batch_data.targets = random_ids(targets, s.seed + 1);
  s.model->train();
}

StepBenchmark::~StepBenchmark() = default;

void StepBenchmark::step() { s_->step(); }

CaptureProbeResult StepBenchmark::capture_probe() {
  State& s = *s_;
  return probe_cuda_capture(s.spec.name + " " + s.train_step->precision_name() + " forward+backward",
                            [&] { s.train_step->forward_backward([&] { return s.forward_loss(); }); });
}

std::int64_t StepBenchmark::batch_size() const { return s_->batch; }
const std::string& StepBenchmark::precision() const { return s_->train_step->precision_name(); }

StepBenchResult StepBenchmark::run(int steps, int warmup, bool machine_floor) {
  State& s = *s_;
  MIXPREC_CHECK(steps >= 1 && steps <= 100000, ValueError, kOp,
                "--steps must be in [1, 100000], got " << steps);
  MIXPREC_CHECK(warmup >= 0 && warmup <= 100000, ValueError, kOp,
                "--warmup must be in [0, 100000], got " << warmup);
  StepBenchResult r;
  r.model = s.spec.name;
  r.precision = s.train_step->precision_name();
  r.batch_size = s.batch;
  r.threads = num_threads();
  r.steps = steps;
  r.warmup = warmup;
  r.layers = s.layers;
  r.flops_per_step = training_step_flops(s.layers);

  for (int i = 0; i < warmup; ++i) s.step();
  reset_peak_memory();
  const MemoryStats before = memory_stats();
  r.step_ms = summarize_times(time_each(steps, [&] { s.step(); }));
  r.memory = memory_stats();
  r.max_rss_bytes = peak_resident_bytes();
  r.allocations_per_step = static_cast<double>(r.memory.system_allocations -
                                               before.system_allocations) / steps;
  r.tensor_allocations_per_step =
      static_cast<double>(r.memory.allocations - before.allocations) / steps;
  r.samples_per_second = static_cast<double>(s.batch) / (r.step_ms.median / 1e3);
  r.tokens_per_sample = s.tokens_per_sample;
  r.tokens_per_second = r.samples_per_second * static_cast<double>(s.tokens_per_sample);
  r.gflops = r.flops_per_step / (r.step_ms.median / 1e3) / 1e9;

  // The optimizer alone, re-run on one step's (unscaled) gradients; with fp16, gradients that
  // overflowed are dropped (and the scale backed off) until a finite set comes, as scaler.step
  // would never apply them.
  TrainStep& ts = *s.train_step;
  for (int attempt = 0;; ++attempt) {
    for (int i = 0; i < ts.config().accum; ++i) ts.accumulate([&] { return s.forward_loss(); });
    ts.scaler().unscale(ts.optimizer());
    if (attempt == 8 || !ts.scaler().found_inf(ts.optimizer()).value_or(false)) break;
    ts.scaler().update();
    ts.optimizer().zero_grad();
  }
  r.optimizer_ms = summarize_times(time_each(steps, [&] { ts.optimizer().step(); })).median;
  ts.scaler().update();
  ts.optimizer().zero_grad();

  // The GEMMs alone: the same shapes, dtype and kernel as the step's linear layers.
  r.gemm_dtype = name(s.gemm_dtype);
  const bool linear_only = std::all_of(s.layers.begin(), s.layers.end(),
                                       [](const LayerCost& l) { return l.type == "Linear"; });
  if (linear_only && !s.layers.empty()) {
    const bool fpmath = s.gemm_dtype == DType::f32 &&
                        runtime::matmul_precision() == runtime::MatmulPrecision::medium;
    const DType dw_dtype = ts.autocast() ? DType::f32 : s.gemm_dtype;
    const std::vector<GemmCall> calls =
        make_gemm_calls(s.layers, s.gemm_dtype, dw_dtype, fpmath, s.seed + 7);
    auto pass = [&] { for (const GemmCall& c : calls) c.run(); };
    pass();  // creates the oneDNN primitives, as the warm-up steps did for the model
    r.gemm_ms = summarize_times(time_each(steps, pass)).median;
    r.floor_ratio = r.step_ms.median / (*r.gemm_ms + r.optimizer_ms);
  } else {
    r.gemm_note = "the model has convolutions: their GEMM-equivalent time depends on oneDNN's "
                  "convolution algorithm, so there is no GEMM-only floor to compare against";
  }

  // The machine's own floor, measured now, in the same run as the steps, at the best peaks
  // this machine has shown: one run's sample of a shared machine's bandwidth can be half of it.
  r.gemm_flops_per_step = step_gemm_flops(s.layers);
  r.optimizer_bytes = static_cast<double>(ts.optimizer().step_bytes());
  if (machine_floor) {
    train::MachinePeaks peaks =
        train::measure_machine_peaks(train::peak_gemm_n(kPeakGemmN), kPeakCopyMiB,
                                           kPeakRepeats, DType::f32);
    if (s.gemm_dtype == DType::bf16) {  // bf16 ops at the bf16 rate (native dot products double it)
      peaks.bf16_gflops =
          train::measure_machine_peaks(train::peak_gemm_n(kPeakGemmN), 1, kPeakRepeats,
                                             DType::bf16)
              .gflops;
    }
    peaks = train::remember_best_peaks(peaks);
    const bool bf16 = s.gemm_dtype == DType::bf16;
    r.gemm_peak_gflops = bf16 ? peaks.bf16_gflops : peaks.gflops;
    r.gemm_peak_gflops_measured = bf16 ? peaks.measured_bf16_gflops : peaks.measured_gflops;
    r.copy_gbps = peaks.gbytes_per_s;
    r.copy_gbps_measured = peaks.measured_gbytes_per_s;
    r.peaks_file = peaks.peaks_file;
    // One more step, profiled: its ops' FLOPs and bytes, each op at its roofline.
    runtime::ProfileData ops;
    {
      runtime::Profile session;
      s.step();
      ops = session.data();
    }
    for (const runtime::OpStats& op : ops.ops) r.hw_floor_ms += train::floor_ms(op, peaks);
    r.hw_floor_ratio = r.hw_floor_ms > 0 ? r.step_ms.median / r.hw_floor_ms : 0.0;
  }

  r.cpu_flags = cpu_features().to_string();
  r.max_isa = name(max_isa());
  r.onednn = onednn_description();
  r.warnings = amp::precision_warnings(ts.mode(), ts.scaler().is_enabled(), cpu_features());
  return r;
}

std::string to_json(const StepBenchResult& r, int indent) {
  using nlohmann::json;
  json peak;
  for (std::size_t c = 0; c < kMemoryCategoryCount; ++c) {
    peak[name(static_cast<MemoryCategory>(c))] = r.memory.peak[c];
  }
  peak["total"] = r.memory.total_peak;
  json layers = json::array();
  for (const LayerCost& l : r.layers) {
    layers.push_back({{"path", l.path}, {"type", l.type}, {"input_shape", l.input_shape},
                      {"output_shape", l.output_shape}, {"forward_flops", l.forward_flops}});
  }
  json j{{"model", r.model},
         {"precision", r.precision},
         {"batch_size", r.batch_size},
         {"threads", r.threads},
         {"steps", r.steps},
         {"warmup", r.warmup},
         {"step_ms", {{"median", r.step_ms.median}, {"min", r.step_ms.min}, {"max", r.step_ms.max}}},
         {"samples_per_second", r.samples_per_second},
         {"tokens_per_second", r.tokens_per_second},
         {"flops_per_step", r.flops_per_step},
         {"gflops", r.gflops},
         {"gemm_ms", r.gemm_ms ? json(*r.gemm_ms) : json(nullptr)},
         {"gemm_dtype", r.gemm_dtype},
         {"gemm_note", r.gemm_note.empty() ? json(nullptr) : json(r.gemm_note)},
         {"optimizer_ms", r.optimizer_ms},
         {"floor_ratio", r.floor_ratio ? json(*r.floor_ratio) : json(nullptr)},
         {"hw_floor_ms", r.hw_floor_ms > 0 ? json(r.hw_floor_ms) : json(nullptr)},
         {"hw_floor_ratio", r.hw_floor_ms > 0 ? json(r.hw_floor_ratio) : json(nullptr)},
         {"gemm_peak_gflops", r.gemm_peak_gflops > 0 ? json(r.gemm_peak_gflops) : json(nullptr)},
         {"copy_gbps", r.copy_gbps > 0 ? json(r.copy_gbps) : json(nullptr)},
         {"gemm_peak_gflops_measured",
          r.gemm_peak_gflops_measured > 0 ? json(r.gemm_peak_gflops_measured) : json(nullptr)},
         {"copy_gbps_measured", r.copy_gbps_measured > 0 ? json(r.copy_gbps_measured) : json(nullptr)},
         {"peaks_file", r.peaks_file.empty() ? json(nullptr) : json(r.peaks_file)},
         {"gemm_flops_per_step", r.gemm_flops_per_step},
         {"optimizer_bytes", r.optimizer_bytes},
         {"max_rss_bytes", r.max_rss_bytes},
         {"peak_bytes", peak},
         {"allocations_per_step", r.allocations_per_step},
         {"tensor_allocations_per_step", r.tensor_allocations_per_step},
         {"cached_bytes", r.memory.cached_bytes},
         {"cpu_flags", r.cpu_flags},
         {"max_isa", r.max_isa},
         {"onednn", r.onednn},
         {"warnings", r.warnings},
         {"layers", layers}};
  return j.dump(indent);
}

}  // namespace mixprec::train
