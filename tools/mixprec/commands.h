#pragma once
// Registration functions of the subcommands; each lives in its own file.
#include <CLI/CLI.hpp>

namespace mixprec::tools {

/// `mixprec ops`: prints the autocast policy table.
void add_ops_command(CLI::App& app);
/// `mixprec train`: trains a built-in model with checkpoints and a JSONL log.
void add_train_command(CLI::App& app);
/// `mixprec eval`: evaluates a checkpoint.
void add_eval_command(CLI::App& app);
/// `mixprec predict`: predictions for the rows of a CSV file from a table-trained checkpoint.
void add_predict_command(CLI::App& app);
/// `mixprec generate`: samples text from a language-model checkpoint.
void add_generate_command(CLI::App& app);
/// `mixprec parity`: one model under several precisions, side by side, with a verdict.
void add_parity_command(CLI::App& app);
/// `mixprec bench`: times whole training steps of a built-in model, or compares precisions.
void add_bench_command(CLI::App& app);
/// `mixprec profile`: per-op profile of training steps on this machine's roofline.
void add_profile_command(CLI::App& app);
/// `mixprec formats`: floating-point formats, representation error per decade, accumulation error.
void add_formats_command(CLI::App& app);
/// `mixprec env`: this machine's mixed-precision features and the recommended precision.
void add_env_command(CLI::App& app);
/// `mixprec inspect`: per-layer mixed-precision readiness of a built-in model.
void add_inspect_command(CLI::App& app);

/// --device cpu|devsim|cuda[:N] on a command that computes: selected while the arguments are
/// parsed (mixprec::set_device), so a device that cannot run fails with one line before the
/// command writes anything.
void add_device_flag(CLI::App* cmd);
/// Adds --matmul-precision (highest|high|medium: runtime::set_matmul_precision) to a command.
void add_matmul_precision_flag(CLI::App* cmd);
/// Adds --attention-precision (default|highest: runtime::set_attention_precision) to a command.
void add_attention_precision_flag(CLI::App* cmd);

}  // namespace mixprec::tools
