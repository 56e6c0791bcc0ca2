#pragma once
/// MIXPREC_VERBOSE=1 logs, for each op call, which implementation ran and why faster ones were
/// skipped (like oneDNN's verbose mode). Off by default; the check costs one relaxed load.
#include <string_view>

namespace mixprec {

/// True when verbose logging is on (MIXPREC_VERBOSE=1 in the environment, or set_verbose(true)).
bool verbose_enabled() noexcept;
/// Turns verbose logging on or off for this process.
void set_verbose(bool on) noexcept;
/// Writes one line "mixprec: <op> <dtype>: ran <impl>[; skipped: <skipped>]" to stderr.
void verbose_log(std::string_view op, std::string_view dtype, std::string_view impl,
                 std::string_view skipped = {});

}  // namespace mixprec
