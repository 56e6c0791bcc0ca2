// The CPU model name from /proc/cpuinfo (Linux's own answer; cpuid's brand string would miss
// arm64). Read once: the file is long on many-core machines and its answer does not change.
#include "mixprec/core/cpu_model.h"

#include <fstream>

namespace mixprec {
namespace {

std::string read_cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(colon + 1);
    const std::size_t first = name.find_first_not_of(" \t");
    return first == std::string::npos ? "unknown" : name.substr(first);
  }
  return "unknown (no 'model name' in /proc/cpuinfo)";
}

}  // namespace

std::string cpu_model_name() {
  static const std::string name = read_cpu_model_name();
  return name;
}

}  // namespace mixprec
