// `mixprec bench`: times whole training steps of a built-in model in one precision (with the
// GEMM-only and optimizer-only floors, FLOP rate, memory and allocations), or compares several
// precisions and gives the seeds' decision-matrix verdict on the best speed-up.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "step_flags.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/error.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/models/zoo.h"
#include "mixprec/train/machine_peaks_memory.h"
#include "mixprec/train/step_bench.h"
#include "train_options.h"

namespace mixprec::tools {
namespace {

constexpr const char* kOp = "bench";

struct BenchFlags {
  std::string model;
  std::string precision = "fp32";
  std::string compare;
  int steps = 10;
  int warmup = 3;
  std::int64_t batch_size = 0;
  int threads = 0;
  std::uint64_t seed = 0;
  models::ModelOptions sizes;  ///< --width, --context, --layers, --heads, --checkpoint-activations
  bool json = false;
  bool capture_probe = false;  ///< --cuda-capture-probe
  train::StepConfig step{.precision = "fp32", .scheduler = "none"};  // precision/seed set below
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    MIXPREC_CHECK(!item.empty(), ValueError, kOp,
                  "--compare has an empty entry in '" << text << "'; give e.g. fp32,bf16,fp16");
    out.push_back(item);
  }
  return out;
}

// Checks every flag before any model is built, naming the flag at fault.
void validate(const BenchFlags& f, bool precision_given) {
  validate_step_flags(kOp, f.model, f.steps, f.warmup, f.batch_size, f.threads);
  train::StepConfig step = f.step;
  // The precision is checked on its own below; --compute and --policy with it.
  step.precision = step.compute.empty() && step.layer_policy.empty() ? "fp32" : "auto-layer";
  step.validate(kOp);
  validate_model_sizes(kOp, f.model, f.sizes);
  MIXPREC_CHECK(f.compare.empty() || !precision_given, ValueError, kOp,
                "give either --precision (one run) or --compare (several), not both");
  if (f.compare.empty()) {
    amp::parse_precision_mode(f.precision);
  } else {
    const std::vector<std::string> modes = split_list(f.compare);
    MIXPREC_CHECK(modes.size() >= 2, ValueError, kOp,
                  "--compare needs at least two precisions, e.g. fp32,bf16; got '" << f.compare << "'");
    for (const std::string& m : modes) amp::parse_precision_mode(m);
  }
  if (f.capture_probe) {
    MIXPREC_CHECK(f.compare.empty() && !f.json, ValueError, kOp,
                  "--cuda-capture-probe prints one line for one precision; drop "
                      << (f.compare.empty() ? "--json" : "--compare"));
    // Before any model is built: a build without CUDA, or --device cpu/devsim.
    const std::string why = train::capture_probe_refusal();
    MIXPREC_CHECK(why.empty(), ValueError, kOp, why);
  }
}

// --cuda-capture-probe: the warm-up steps, then the probe's one line; exit 1 if the step could
// not be captured (after the capture was ended and the stream left clean).
void run_capture_probe(const BenchFlags& f, const train::StepConfig& step) {
  train::StepBenchmark bench(f.model, step, f.batch_size, f.sizes);
  for (int i = 0; i < f.warmup; ++i) bench.step();
  const train::CaptureProbeResult r = bench.capture_probe();
  std::printf("%s\n", r.line.c_str());
  std::fflush(stdout);
  if (!r.captured) throw CLI::RuntimeError(1);
}

std::string fmt_ms(const std::optional<double>& ms) {
  if (!ms) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", *ms);
  return buf;
}

void print_result(const train::StepBenchResult& r) {
  std::printf("bench: %s, precision %s, batch %lld, %d threads, %d timed steps after %d warm-up\n",
              r.model.c_str(), r.precision.c_str(), static_cast<long long>(r.batch_size), r.threads,
              r.steps, r.warmup);
  std::printf("step time     median %.2f ms (min %.2f, max %.2f)   %.0f samples/s",
              r.step_ms.median, r.step_ms.min, r.step_ms.max, r.samples_per_second);
  if (r.tokens_per_sample > 0) {
    std::printf("   %.0f tokens/s (context %lld)", r.tokens_per_second,
                static_cast<long long>(r.tokens_per_sample));
  }
  std::printf("\n");
  std::printf("compute       %.3f GFLOP/step (3x forward of Linear/Conv2d) -> %.1f GFLOP/s\n",
              r.flops_per_step / 1e9, r.gflops);
  std::printf("GEMMs alone   %s (%s)%s%s\n", fmt_ms(r.gemm_ms).c_str(), r.gemm_dtype.c_str(),
              r.gemm_note.empty() ? "" : ": ", r.gemm_note.c_str());
  std::printf("optimizer     %.2f ms (the optimizer step alone)\n", r.optimizer_ms);
  if (r.floor_ratio) {
    std::printf("floor ratio   %.2f (step / (GEMMs + optimizer); 1.0 = nothing but the floor)\n",
                *r.floor_ratio);
  }
  std::printf("machine floor %.2f ms: %.2f GFLOP of GEMMs at the %s GEMM peak + %s of optimizer "
              "traffic at the copy bandwidth -> step / floor %.2f\n",
              r.hw_floor_ms, r.gemm_flops_per_step / 1e9, r.gemm_dtype.c_str(),
              format_mib(static_cast<std::size_t>(r.optimizer_bytes)).c_str(), r.hw_floor_ratio);
  std::printf("gemm peak     %s %s\n", r.gemm_dtype.c_str(),
              train::describe_peak(r.gemm_peak_gflops, r.gemm_peak_gflops_measured, "GFLOP/s",
                                   r.peaks_file)
                  .c_str());
  std::printf("copy          %s\n",
              train::describe_peak(r.copy_gbps, r.copy_gbps_measured, "GB/s", r.peaks_file).c_str());
  std::printf("peak memory   total %s:", format_mib(r.memory.total_peak).c_str());
  for (std::size_t c = 0; c < kMemoryCategoryCount; ++c) {
    std::printf(" %s %s%s", name(static_cast<MemoryCategory>(c)), format_mib(r.memory.peak[c]).c_str(),
                c + 1 < kMemoryCategoryCount ? "," : "\n");
  }
  std::printf("process RSS   %s at its peak (getrusage)\n", format_mib(r.max_rss_bytes).c_str());
  std::printf("allocations   %.1f per step from the system (%.1f tensors per step, served by the "
              "cache; %s cached)\n",
              r.allocations_per_step, r.tensor_allocations_per_step,
              format_mib(r.memory.cached_bytes).c_str());
  std::printf("cpu           %s (max isa %s); %s\n", r.cpu_flags.c_str(), r.max_isa.c_str(),
              r.onednn.c_str());
  if (!r.warnings.empty()) std::printf("%s", r.warnings.c_str());
}

void run_compare(const BenchFlags& f) {
  std::vector<train::StepBenchResult> results;
  for (const std::string& mode : split_list(f.compare)) {
    if (!f.json) {
      std::printf("[%s] running %d warm-up + %d timed steps...\n", mode.c_str(), f.warmup, f.steps);
      std::fflush(stdout);
    }
    train::StepConfig step = f.step;
    step.precision = mode;
    train::StepBenchmark bench(f.model, step, f.batch_size, f.sizes);
    results.push_back(bench.run(f.steps, f.warmup));
  }
  const train::StepBenchResult& ref = results.front();
  std::size_t best = 0;
  double best_speedup = 0;
  std::vector<double> speedups, memory_ratios;
  for (std::size_t i = 0; i < results.size(); ++i) {
    speedups.push_back(ref.step_ms.median / results[i].step_ms.median);
    memory_ratios.push_back(static_cast<double>(results[i].memory.total_peak) /
                            static_cast<double>(std::max<std::size_t>(ref.memory.total_peak, 1)));
    if (i > 0 && speedups[i] > best_speedup) {
      best_speedup = speedups[i];
      best = i;
    }
  }
  const char* verdict = train::speedup_verdict(best_speedup);
  const std::string limit = train::speedup_limit_reason(cpu_features());
  if (f.json) {
    nlohmann::json j{{"model", ref.model}, {"batch_size", ref.batch_size}, {"threads", ref.threads},
                     {"reference", ref.precision}, {"best", results[best].precision},
                     {"best_speedup", best_speedup}, {"verdict", verdict},
                     {"speedup_limit", limit.empty() ? nlohmann::json(nullptr) : nlohmann::json(limit)}};
    for (std::size_t i = 0; i < results.size(); ++i) {
      nlohmann::json r = nlohmann::json::parse(train::to_json(results[i], -1));
      r["speedup"] = speedups[i];
      r["memory_ratio"] = memory_ratios[i];
      j["results"].push_back(r);
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("\nbench --compare: model %s, batch %lld, %d threads, %d timed steps, reference %s\n",
              ref.model.c_str(), static_cast<long long>(ref.batch_size), ref.threads, f.steps,
              ref.precision.c_str());
  std::printf("%-13s %14s %9s %10s %13s %11s\n", "precision", "median step", "speedup", "GFLOP/s",
              "peak memory", "mem ratio");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const train::StepBenchResult& r = results[i];
    std::printf("%-13s %11.2f ms %8.2fx %10.1f %13s %10.2fx\n", r.precision.c_str(),
                r.step_ms.median, speedups[i], r.gflops, format_mib(r.memory.total_peak).c_str(),
                memory_ratios[i]);
  }
  std::printf("verdict: %s (best: %s at %.2fx vs %s; <1.1x stay in fp32, 1.1-1.5x optional, "
              "1.5-2.5x use it, >2.5x definitely use it)\n",
              verdict, results[best].precision.c_str(), best_speedup, ref.precision.c_str());
  if (!limit.empty()) std::printf("note: %s\n", limit.c_str());
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Time whole training steps of a built-in model on synthetic inputs (no dataset needed): "
      "step time, GFLOP/s, GEMM-only and optimizer-only floors, peak memory, allocations");
  auto f = std::make_shared<BenchFlags>();
  auto batch = std::make_shared<std::int64_t>(0);
  auto threads = std::make_shared<int>(0);
  cmd->add_option("--model", f->model, "Model: " + models::model_names())->required();
  CLI::Option* precision_opt =
      cmd->add_option("--precision", f->precision,
                      "Precision mode: fp32, bf16, fp16, pure-bf16, pure-bf16-sr, auto, auto-layer, fp8 or "
                      "fp8-delayed")
          ->capture_default_str();
  cmd->add_option("--compare", f->compare,
                  "Comma-separated precisions to compare against the first, e.g. fp32,bf16,fp16");
  cmd->add_option("--steps", f->steps, "Timed training steps")->capture_default_str();
  cmd->add_option("--warmup", f->warmup, "Untimed warm-up steps before them")->capture_default_str();
  CLI::Option* batch_opt = cmd->add_option(
      "--batch-size", *batch,
      "Batch size (default 256 for mlp and seed-mlp, 128 for cnn and resnet, 16 windows for gpt-mini)");
  CLI::Option* threads_opt =
      cmd->add_option("--threads", *threads, "Compute threads (default: the process default)");
  cmd->add_option("--seed", f->seed, "Seed of the weights and synthetic inputs")->capture_default_str();
  add_model_size_flags(cmd, f->sizes);
  cmd->add_flag("--json", f->json, "Print JSON instead of text");
  cmd->add_flag("--cuda-capture-probe", f->capture_probe,
                "Diagnostic, GPU only (--device cuda): after the warm-up steps, capture one step's "
                "forward and backward (not the loss read) as a CUDA graph, print one line (the "
                "graph's node count and the capture time, or the first call that broke the capture, "
                "its CUDA error and the op running) and exit, 1 if it failed; no step is timed");
  add_step_config_flags(cmd, f->step);
  cmd->footer("Each step is the training step of `mixprec train` (train/train_step.h) with the\n"
              "step flags above; inputs are synthetic.\n"
              "The machine floor puts each op at the best GEMM peak and copy bandwidth this\n"
              "machine has shown under the same conditions, remembered in $MIXPREC_PEAKS_FILE\n"
              "(default $XDG_CACHE_HOME/mixprec/machine_peaks.json, else\n"
              "~/.cache/mixprec/machine_peaks.json); MIXPREC_PEAKS_FILE=off uses this run's alone.\n"
              "Examples:\n"
              "  mixprec bench --model seed-mlp --precision bf16 --steps 10 --json\n"
              "  mixprec bench --model seed-mlp --precision fp16 --loss-scaling predictive --clip 1\n"
              "  mixprec bench --model cnn --compare fp32,bf16,fp16 --steps 10\n"
              "  mixprec bench --model gpt-mini --context 512 --checkpoint-activations\n"
              "  mixprec bench --model gpt-mini --precision bf16 --device cuda --cuda-capture-probe");
  cmd->callback([f, batch, threads, precision_opt, batch_opt, threads_opt] {
    BenchFlags flags = *f;
    models::model_spec(flags.model);  // unknown model: ValueError before anything else
    flags.batch_size = batch_opt->count() > 0 ? *batch : train::default_batch_size(flags.model);
    flags.threads = threads_opt->count() > 0 ? *threads : num_threads();
    flags.step.seed = flags.seed;
    validate(flags, precision_opt->count() > 0);
    if (threads_opt->count() > 0) set_num_threads(flags.threads);
    if (!flags.compare.empty()) {
      run_compare(flags);
      return;
    }
    train::StepConfig step = flags.step;
    step.precision = flags.precision;
    if (flags.capture_probe) {
      run_capture_probe(flags, step);
      return;
    }
    train::StepBenchmark bench(flags.model, step, flags.batch_size, flags.sizes);
    const train::StepBenchResult r = bench.run(flags.steps, flags.warmup);
    if (flags.json) {
      std::printf("%s\n", train::to_json(r).c_str());
    } else {
      print_result(r);
    }
  });
}

}  // namespace mixprec::tools
