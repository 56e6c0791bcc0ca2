#pragma once
// The command line of the standalone timing tools (attention_step, gemm_rate): `--name value`
// pairs, positive counts (a flag may also allow 0), strings, and a `--json` switch; anything
// else prints the tool's usage and exits with status 2. And the median of a run's timings.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

namespace mixprec::bench {

struct CountFlag {
  const char* name;  ///< e.g. "--iters"
  long* value;
  bool zero_ok = false;  ///< --warmup may be 0; every other count is positive
};
struct TextFlag {
  const char* name;
  std::string* value;
};

/// What a tool prints when its arguments are wrong: its name and its usage line.
struct ToolUsage {
  const char* tool;
  const char* usage;
  [[noreturn]] void fail(const std::string& why) const {
    std::fprintf(stderr, "%s: %s\nusage: %s\n", tool, why.c_str(), usage);
    std::exit(2);
  }
};

/// Reads argv into the flags; `--json` sets *json; -h/--help prints the usage (exit 2).
inline void parse_flags(int argc, char** argv, const ToolUsage& usage,
                        std::initializer_list<TextFlag> texts,
                        std::initializer_list<CountFlag> counts, bool* json) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      *json = true;
      continue;
    }
    if (a == "-h" || a == "--help") usage.fail("timing tool");
    if (i + 1 >= argc) usage.fail("missing value after " + a);
    const char* v = argv[++i];
    bool known = false;
    for (const TextFlag& f : texts) {
      if (a == f.name) *f.value = v, known = true;
    }
    for (const CountFlag& f : counts) {
      if (a != f.name) continue;
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (end == v || *end != '\0' || n < 0 || (n == 0 && !f.zero_ok)) {
        usage.fail("expected a " + std::string(f.zero_ok ? "non-negative" : "positive") +
                   " integer after " + a + ", got '" + v + "'");
      }
      *f.value = n, known = true;
    }
    if (!known) usage.fail("unknown option " + a);
  }
}

/// The median of a run's timings (the upper middle one of an even count); 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace mixprec::bench
