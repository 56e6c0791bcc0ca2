#pragma once
/// StepBenchmark: times whole training steps of a built-in model (models/zoo.h) on synthetic
/// inputs, each step done exactly as the Trainer does it, and puts the time in context: the
/// model's FLOPs, the time of the step's GEMMs alone, the time of the optimizer alone, peak
/// memory by category and allocations per step. What `mixprec bench` prints.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/memory.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/models/zoo.h"
#include "mixprec/nn/module.h"
#include "mixprec/train/capture_probe.h"
#include "mixprec/train/train_step.h"

namespace mixprec::train {

/// One Linear or Conv2d layer met by count_layer_flops, with its activation shapes.
struct LayerCost {
  std::string path;     ///< module path, e.g. "layers.0" or "features.3.conv1"
  std::string type;     ///< "Linear" or "Conv2d"
  Shape input_shape;    ///< at the batch size asked for
  Shape output_shape;
  bool bias = false;    ///< whether the layer adds a bias (not counted in the FLOPs)
  /// Forward FLOPs (a multiply-add counts 2): Linear 2 * rows * in * out, where rows is the
  /// input's element count / in; Conv2d 2 * N * O * C * kh * kw * Ho * Wo. Bias additions,
  /// activations, normalisation, pooling and the loss are not counted.
  double forward_flops = 0;
};

/// The Linear and Conv2d layers of an f32 model fed an input of input_shape (dim 0 the batch),
/// in execution order. Shapes come from one forward pass on a batch of one (zeros: token id 0
/// for a language model) in eval mode without autograd (so the model is not changed), watched
/// by a ForwardObserver, then scaling dim 0 back to the batch: every built-in layer treats dim
/// 0 as the batch. GEMMs outside Linear modules (attention scores, a tied output head) are not
/// layers and are not counted. ValueError if input_shape is empty or has a dimension < 1;
/// ShapeError if the model rejects it.
std::vector<LayerCost> count_layer_flops(nn::Module& model, const Shape& input_shape);

/// FLOPs of the GEMMs (and convolutions) one training step really runs: the forward, the
/// weight gradient, and the input gradient of every layer but the first (autograd skips it).
double step_gemm_flops(const std::vector<LayerCost>& layers);

/// FLOPs of one training step: 3x the forward FLOPs of the layers (forward, plus the gradients
/// with respect to inputs and to weights, each costing one forward). The first layer's input
/// gradient, which autograd skips, is counted too: the convention of the seeds' benchmarks.
double training_step_flops(const std::vector<LayerCost>& layers);

/// Median, minimum and maximum of a series of times, in milliseconds.
struct TimingStats {
  double median = 0, min = 0, max = 0;
};
/// Summary of times in ms (the median of an even count is the mean of the middle two);
/// ValueError if times is empty.
TimingStats summarize_times(std::vector<double> times_ms);

/// What StepBenchmark::run measured. Times are wall-clock milliseconds.
struct StepBenchResult {
  std::string model;           ///< models::model_names()
  std::string precision;       ///< the mode run ("auto" resolved), e.g. "bf16"
  std::int64_t batch_size = 0;
  int threads = 0;             ///< num_threads() during the run
  int steps = 0, warmup = 0;
  TimingStats step_ms;         ///< whole training steps
  double samples_per_second = 0;   ///< batch_size / median step time
  std::int64_t tokens_per_sample = 0;  ///< a language model's context (0 for other models)
  double tokens_per_second = 0;    ///< samples_per_second x tokens_per_sample
  double flops_per_step = 0;       ///< training_step_flops of the model's layers
  double gflops = 0;               ///< flops_per_step / median step time, in GFLOP/s
  /// Median time of the step's GEMMs alone (Linear-only models), else nullopt and gemm_note says why.
  std::optional<double> gemm_ms;
  std::string gemm_dtype;          ///< dtype the GEMMs ran in ("f32", "bf16", "f16")
  std::string gemm_note;           ///< why gemm_ms is null; empty otherwise
  double optimizer_ms = 0;         ///< median time of optimizer.step() alone
  /// step_ms.median / (gemm_ms + optimizer_ms): how far the step is above its compute floor.
  std::optional<double> floor_ratio;
  /// The machine's own floor: this machine's peaks (the best GEMM of 2048^3 in gemm_dtype
  /// through mixprec::matmul, and a parallel copy of 64 MiB counting bytes read + written),
  /// measured in the same run and raised to the best remembered on this machine
  /// (train/machine_peaks_memory.h) ...
  double gemm_peak_gflops = 0;
  double copy_gbps = 0;
  /// ... this run's own samples of them, and the file they were remembered in ("" when
  /// remembering is off: then they equal the two above).
  double gemm_peak_gflops_measured = 0;
  double copy_gbps_measured = 0;
  std::string peaks_file;
  double gemm_flops_per_step = 0;  ///< step_gemm_flops of the layers
  double optimizer_bytes = 0;      ///< optim::Optimizer::step_bytes()
  /// ... and the step at them: one more step, profiled, with every op at its roofline
  /// (train::floor_ms: GEMM, convolution and attention FLOPs at the GEMM peak of their
  /// dtype, memory-bound passes such as norms, activations, pooling, casts and the optimizer at
  /// copy_gbps), in ms. What the step spends above it is its distance from this machine's limits.
  double hw_floor_ms = 0;
  double hw_floor_ratio = 0;       ///< step_ms.median / hw_floor_ms
  /// Peak resident memory of the whole process at the end of the timed steps (before the
  /// floors are measured), from getrusage: what compares with another framework's process.
  std::size_t max_rss_bytes = 0;
  MemoryStats memory;              ///< peaks over the timed steps (reset after warm-up)
  /// Storage blocks taken from the system allocator per timed step (caching-allocator misses);
  /// 0 in steady state. Host-side objects (autograd nodes, shapes) are not counted.
  double allocations_per_step = 0;
  /// Tensor storages created per timed step, whether the cache served them or not.
  double tensor_allocations_per_step = 0;
  std::string cpu_flags;           ///< cpu_features().to_string()
  std::string max_isa;             ///< name(max_isa())
  std::string onednn;              ///< onednn_description()
  std::string warnings;            ///< amp::precision_warnings for this mode on this CPU
  std::vector<LayerCost> layers;   ///< at batch_size
};

/// The result as a JSON object with the keys model, precision, batch_size, threads,
/// step_ms{median,min,max}, gemm_ms (null if not measured), optimizer_ms, gflops,
/// peak_bytes{parameter,gradient,optimizer_state,activation,workspace,total},
/// allocations_per_step, cpu_flags, and more (samples_per_second, floor_ratio,
/// tensor_allocations_per_step, cached_bytes, hw_floor_ms, hw_floor_ratio, gemm_peak_gflops,
/// copy_gbps (the best remembered), gemm_peak_gflops_measured, copy_gbps_measured (this run's),
/// peaks_file (null when off or not measured), max_rss_bytes, ...).
std::string to_json(const StepBenchResult& result, int indent = 2);

/// Times training steps of one built-in model: each step is a TrainStep::run (train_step.h),
/// the very step the Trainer runs, with the StepConfig given (precision, optimizer, clipping,
/// accumulation, loss scaling, schedule). Inputs are Tensor::randn of the model's sample shape
/// and labels fixed pseudo-random classes, both from the config's seed: no dataset is read.
class StepBenchmark {
 public:
  /// step: as StepConfig::validate accepts; batch_size 0 = the model's default
  /// (default_batch_size). ValueError on an unknown model, an invalid config or a batch size
  /// outside [0, 65536]. width > 0 sets seed-mlp's hidden width (models::make_seed_mlp);
  /// ValueError for other models.
  /// options: the model's sizes (transformers: --context, --layers, --heads, --width, and
  /// checkpoint_activations; seed-mlp: width = its hidden width); 0 = the model's default.
  StepBenchmark(std::string model, const StepConfig& step, std::int64_t batch_size,
                const models::ModelOptions& options);
  StepBenchmark(std::string model, const StepConfig& step, std::int64_t batch_size = 0,
                std::int64_t width = 0);
  /// The benchmark's default step: Adam (lr 1e-3), no schedule, no clipping, accum 1, dynamic
  /// loss scaling for fp16; precision: fp32, bf16, fp16, pure-bf16, pure-bf16-sr or auto.
  StepBenchmark(std::string model, std::string precision, std::int64_t batch_size = 0,
                std::uint64_t seed = 0, std::int64_t width = 0);
  ~StepBenchmark();
  StepBenchmark(const StepBenchmark&) = delete;
  StepBenchmark& operator=(const StepBenchmark&) = delete;

  /// Runs warmup untimed steps, then steps timed steps, then the optimizer alone and the GEMMs
  /// alone steps times each. ValueError unless steps in [1, 100000] and warmup in [0, 100000].
  /// The model keeps training across calls.
  /// machine_floor: also measure this machine's GEMM peak and copy bandwidth for hw_floor_ms
  /// (about a second natively, minutes under an emulator) and remember their best
  /// (remember_best_peaks: MIXPREC_PEAKS_FILE); false leaves gemm_peak_gflops, copy_gbps, their
  /// _measured twins, hw_floor_ms and hw_floor_ratio at 0 (null in the JSON).
  StepBenchResult run(int steps, int warmup = 3, bool machine_floor = true);
  /// Runs one training step exactly as run() times it (for warm-up and the profiler).
  void step();
  /// The CUDA-graph capture probe (train/capture_probe.h) on this step: captures one
  /// micro-batch's forward and scaled backward (TrainStep::forward_backward: the loss is not
  /// read, as a host read cannot be captured) on the backend's stream. Run it after warm-up
  /// steps (plans built, the caching allocator filled); the captured work does not run, so the
  /// model is left mid-step (gradients unwritten): take no further step. ValueError unless the
  /// current device is cuda.
  CaptureProbeResult capture_probe();

  std::int64_t batch_size() const;
  /// The resolved precision mode's name.
  const std::string& precision() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// The batch size `mixprec bench` uses by default: 256 for mlp and seed-mlp, 128 for cnn and
/// resnet. ValueError on an unknown model.
std::int64_t default_batch_size(const std::string& model);

/// The seeds' decision matrix on a speed-up over fp32: < 1.1 "stay in fp32"; [1.1, 1.5)
/// "optional"; [1.5, 2.5] "use it"; > 2.5 "definitely use it". NaN counts as no speed-up.
const char* speedup_verdict(double speedup);

/// One line on why lower-precision GEMMs cannot be faster than fp32 ones on cpu (no native bf16
/// dot products: bf16 GEMMs run through fp32), or "" when they can.
std::string speedup_limit_reason(const CpuFeatures& cpu);

}  // namespace mixprec::train
