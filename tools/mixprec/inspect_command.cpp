// `mixprec inspect`: trains a built-in model for a few steps in one precision and reports, per
// layer, what fp16, bf16 and fp8 would do to its activations, gradients and updates, with a
// verdict, alignment warnings and a memory estimate (text, --json, --svg).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/error.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/train/inspect.h"
#include "mixprec/models/zoo.h"

namespace mixprec::tools {
namespace {

constexpr const char* kOp = "inspect";

struct InspectFlags {
  train::InspectOptions options;
  int threads = 0;
  bool json = false;
  std::string svg;
};

// The SVG is written after training; a path that cannot be written is refused before it.
void check_svg_path(const std::string& path) {
  namespace fs = std::filesystem;
  MIXPREC_CHECK(!path.empty(), ValueError, kOp, "--svg needs a file name, e.g. --svg layers.svg");
  const fs::path p(path);
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  MIXPREC_CHECK(fs::is_directory(dir, ec), ValueError, kOp,
                "--svg: cannot write '" << path << "': '" << dir.string()
                                        << (fs::exists(dir, ec) ? "' is not a directory"
                                                                : "' does not exist")
                                        << "; give a path in an existing, writable directory");
  MIXPREC_CHECK(::access(dir.c_str(), W_OK) == 0, ValueError, kOp,
                "--svg: cannot write '" << path << "': directory '" << dir.string()
                                        << "' is not writable");
  MIXPREC_CHECK(!fs::is_directory(p, ec), ValueError, kOp,
                "--svg: '" << path << "' is a directory; give a file name such as "
                           << (p / "layers.svg").string());
}

void validate(const InspectFlags& f) {
  models::model_spec(f.options.model);  // ValueError listing the models
  amp::parse_precision_mode(f.options.precision);
  MIXPREC_CHECK(f.options.steps >= 1 && f.options.steps <= 10000, ValueError, kOp,
                "--steps must be in [1, 10000], got " << f.options.steps);
  MIXPREC_CHECK(f.options.batch_size >= 1 && f.options.batch_size <= 65536, ValueError, kOp,
                "--batch-size must be in [1, 65536], got " << f.options.batch_size);
  MIXPREC_CHECK(f.threads >= 0 && f.threads <= 1024, ValueError, kOp,
                "--threads must be in [1, 1024] (0 = the process default), got " << f.threads);
  if (!f.svg.empty()) check_svg_path(f.svg);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Per-layer mixed-precision readiness: train a built-in model for a few steps and report, "
      "for every layer, what fp16, bf16 and fp8 would do to its activations, gradients and "
      "weight updates, with a verdict, alignment warnings and bytes per parameter");
  auto f = std::make_shared<InspectFlags>();
  train::InspectOptions& o = f->options;
  cmd->add_option("--model", o.model, "Model: " + models::model_names())->required();
  cmd->add_option("--precision", o.precision,
                  "Mode to train in: fp32 (shows the values before any rounding), bf16, fp16 (with "
                  "a GradScaler), pure-bf16, pure-bf16-sr, auto, or fp8 / fp8-delayed (the default "
                  "recipe; adds each fp8 layer's amax, scale and saturated/flushed fractions per "
                  "role)")
      ->capture_default_str();
  cmd->add_option("--steps", o.steps, "Optimizer steps to record (Adam, lr 1e-3)")->capture_default_str();
  cmd->add_option("--batch-size", o.batch_size, "Samples per step")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the weights, the data order and synthetic data")
      ->capture_default_str();
  cmd->add_option("--data-dir", o.data_dir,
                  "Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist); only "
                  "steps x batch-size training samples are read");
  cmd->add_option("--threads", f->threads, "Compute threads (0 = the process default)")
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "Print the report as JSON (keys in docs/diagnostics.md)");
  cmd->add_option("--svg", f->svg, "Also write a per-layer picture to this SVG file (atomically)");
  cmd->footer(
      "Verdicts: 'safe in fp16', 'needs loss scaling', 'bf16 fine', 'keep in fp32'; the rule and "
      "every column are explained in docs/diagnostics.md.\n"
      "Examples:\n"
      "  mixprec inspect --model cnn --precision fp32 --steps 5\n"
      "  mixprec inspect --model mlp --precision bf16 --steps 2 --json\n"
      "  mixprec inspect --model resnet --precision fp16 --steps 3 --svg layers.svg");
  cmd->callback([f] {
    const InspectFlags flags = *f;
    validate(flags);
    if (flags.threads > 0) set_num_threads(flags.threads);
    const train::InspectReport report = train::inspect_builtin(flags.options);
    if (!flags.svg.empty()) train::write_inspect_svg(report, flags.svg);
    if (flags.json) {
      std::printf("%s\n", train::to_json(report).c_str());
    } else {
      std::printf("%s", train::to_text(report).c_str());
      if (!flags.svg.empty()) std::printf("picture written to %s\n", flags.svg.c_str());
    }
  });
}

}  // namespace mixprec::tools
