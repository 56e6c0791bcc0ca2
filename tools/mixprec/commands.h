#pragma once
// Registration functions of the subcommands; each lives in its own file.
#include <CLI/CLI.hpp>

namespace mixprec::tools {

/// `mixprec ops`: prints the autocast policy table.
void add_ops_command(CLI::App& app);

}  // namespace mixprec::tools
