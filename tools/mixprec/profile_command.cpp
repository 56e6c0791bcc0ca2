// `mixprec profile`: whole training steps of a built-in model profiled op by op (the bench's
// steps), each op placed on this machine's roofline, plus the casts and the f32 time the
// autocast policy would let run in 16 bits.
#include <cstdio>

#include "commands.h"
#include "step_flags.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/train/machine_peaks_memory.h"
#include "mixprec/train/step_profile.h"
#include "mixprec/amp/precision.h"
#include "mixprec/models/zoo.h"
#include "mixprec/train/step_bench.h"

namespace mixprec::tools {
namespace {

constexpr const char* kOp = "profile";

struct ProfileFlags {
  std::string model;
  std::string precision = "fp32";
  int steps = 10;
  int warmup = 3;
  std::int64_t batch_size = 0;
  int threads = 0;
  std::uint64_t seed = 0;
  std::size_t top = 0;
  bool json = false;
  models::ModelOptions sizes;  ///< --width, --context, --layers, --heads, --checkpoint-activations
};

// Checks every flag before any model is built, naming the flag at fault.
void validate(const ProfileFlags& f) {
  validate_step_flags(kOp, f.model, f.steps, f.warmup, f.batch_size, f.threads);
  amp::parse_precision_mode(f.precision);
  validate_model_sizes(kOp, f.model, f.sizes);
}

}  // namespace

void add_profile_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Profile whole training steps of a built-in model op by op (synthetic inputs, no dataset): "
      "time, GFLOP/s, bytes moved and roofline verdict per op, dtype casts, and the f32 time "
      "that could run in 16 bits. On a GPU each op is timed in the device's queue (CUDA "
      "events, no synchronising around it), so the report also gives the GPU's busy share "
      "of the steps");
  auto f = std::make_shared<ProfileFlags>();
  auto batch = std::make_shared<std::int64_t>(0);
  auto threads = std::make_shared<int>(0);
  cmd->add_option("--model", f->model, "Model: " + models::model_names())->required();
  cmd->add_option("--precision", f->precision,
                  "Precision mode: fp32, bf16, fp16, pure-bf16, pure-bf16-sr (or auto)")
      ->capture_default_str();
  cmd->add_option("--steps", f->steps, "Profiled training steps")->capture_default_str();
  cmd->add_option("--warmup", f->warmup, "Unprofiled warm-up steps before them")
      ->capture_default_str();
  CLI::Option* batch_opt = cmd->add_option(
      "--batch-size", *batch, "Batch size (default 256 for mlp and seed-mlp, 128 for cnn and resnet)");
  CLI::Option* threads_opt =
      cmd->add_option("--threads", *threads, "Compute threads (default: the process default)");
  cmd->add_option("--seed", f->seed, "Seed of the weights and synthetic inputs")->capture_default_str();
  cmd->add_option("--top", f->top, "Print only the N most expensive ops (0 = all)")
      ->capture_default_str();
  add_model_size_flags(cmd, f->sizes);
  cmd->add_flag("--json", f->json, "Print JSON (keys documented in docs/diagnostics.md)");
  cmd->footer("Examples:\n"
              "  mixprec profile --model cnn --precision bf16 --steps 5 --threads 2\n"
              "  mixprec profile --model seed-mlp --precision bf16 --steps 5 --json\n"
              "  mixprec profile --model gpt-mini --layers 8 --width 512 --context 512 --steps 2\n"
              "Times are exclusive (an op called inside another op is folded into the outer one;\n"
              "casts are always their own rows). The peaks are measured at start-up with an f32\n"
              "GEMM and a large copy, and raised to the best this machine has shown under the same\n"
              "conditions, remembered in $MIXPREC_PEAKS_FILE (default\n"
              "$XDG_CACHE_HOME/mixprec/machine_peaks.json, else ~/.cache/mixprec/machine_peaks.json;\n"
              "off: this run's alone); an op whose FLOP/byte is below their ratio (the ridge) is\n"
              "memory-bound.");
  cmd->callback([f, batch, threads, batch_opt, threads_opt] {
    ProfileFlags flags = *f;
    models::model_spec(flags.model);  // unknown model: ValueError before anything else
    flags.batch_size = batch_opt->count() > 0 ? *batch : train::default_batch_size(flags.model);
    flags.threads = threads_opt->count() > 0 ? *threads : num_threads();
    validate(flags);
    if (threads_opt->count() > 0) set_num_threads(flags.threads);
    train::MachinePeaks peaks =
        train::measure_machine_peaks(train::peak_gemm_n(1024));
    // bf16 ops are floored at the bf16 GEMM rate (native bf16 dot products double it).
    if (flags.precision.find("bf16") != std::string::npos ||
        (flags.precision == "auto" && amp::choose_precision(cpu_features()).mode == amp::PrecisionMode::bf16)) {
      peaks.bf16_gflops =
          train::measure_machine_peaks(train::peak_gemm_n(1024), 1, 5, DType::bf16).gflops;
    }
    // The floor at the best this machine has shown, not at this run's sample alone.
    peaks = train::remember_best_peaks(peaks);
    const train::StepProfile p = train::profile_training_steps(
        flags.model, flags.precision, flags.batch_size, flags.steps, flags.warmup, peaks, flags.seed,
        flags.sizes);
    if (flags.json) {
      std::printf("%s\n", train::to_json(p).c_str());
    } else {
      std::printf("%s", train::format_step_profile(p, flags.top).c_str());
    }
  });
}

}  // namespace mixprec::tools
