// The mixprec command-line tool: one executable, one subcommand per file.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "commands.h"
#include "mixprec/dist/agreement.h"
#include "mixprec/dist/world.h"

int main(int argc, char** argv) {
  CLI::App app{"mixprec: mixed-precision neural-network training (bf16/f16 with fp32 master weights)"};
  app.require_subcommand(1);
  // A flag given twice takes its last value (as in most tools: later arguments override earlier
  // ones, e.g. a script's defaults followed by the user's).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  mixprec::tools::add_train_command(app);
  mixprec::tools::add_eval_command(app);
  mixprec::tools::add_predict_command(app);
  mixprec::tools::add_generate_command(app);
  mixprec::tools::add_parity_command(app);
  mixprec::tools::add_bench_command(app);
  mixprec::tools::add_profile_command(app);
  mixprec::tools::add_ops_command(app);
  mixprec::tools::add_formats_command(app);
  mixprec::tools::add_env_command(app);
  mixprec::tools::add_inspect_command(app);
  for (const char* name : {"train", "eval", "predict", "generate", "parity", "bench", "profile",
                           "inspect"}) {
    mixprec::tools::add_device_flag(app.get_subcommand(name));
    mixprec::tools::add_matmul_precision_flag(app.get_subcommand(name));
    mixprec::tools::add_attention_precision_flag(app.get_subcommand(name));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const mixprec::dist::AgreedError& e) {
    // Every rank of an mpirun job threw this together: they leave (and finalise MPI) together.
    std::fprintf(stderr, "mixprec: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixprec: %s\n", e.what());
    std::fflush(stderr);
    // Under mpirun this rank may have failed alone while the others wait for it in a
    // collective: end the job now rather than after the exit timeout.
    mixprec::dist::abort_job_if_distributed(1);
    return 1;
  }
  return 0;
}
