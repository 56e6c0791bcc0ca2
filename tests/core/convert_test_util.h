#pragma once
/// Helpers shared by the conversion tests: the paths a bulk conversion can take (the cpu
/// backend at each Highway target this CPU runs, and the ref backend), and a guard that selects
/// one and restores the previous ISA cap and backend when it ends, even if a test fails.
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "mixprec/core/cpu_features.h"

namespace mixprec::test {

/// One way to run the public conversions: the cpu backend capped at `isa`, or the reference.
struct ConvertPath {
  bool ref = false;
  Isa isa = Isa::scalar;  // cpu backend only
  std::string label;      // "cpu:AVX2", "ref"
};

/// Restores the ISA cap and the backend a test found when it ends.
class PathGuard {
 public:
  PathGuard() : saved_isa_(max_isa()), saved_backend_(kernels::backend().name) {}
  ~PathGuard() {
    set_max_isa(saved_isa_);
    kernels::set_backend(saved_backend_);
  }
  PathGuard(const PathGuard&) = delete;
  PathGuard& operator=(const PathGuard&) = delete;
  /// Makes the public conversions run `path` until the next select() or the guard's end.
  void select(const ConvertPath& path) {
    kernels::set_backend(path.ref ? "ref" : "cpu");
    set_max_isa(path.ref ? saved_isa_ : path.isa);
  }

 private:
  Isa saved_isa_;
  std::string saved_backend_;
};

/// The cpu backend at every distinct Highway target reachable by capping the ISA (every level
/// of supported_isas(), best first, down to the portable scalar target; levels that run the
/// same target, such as avx512 and avx512_bf16, appear once), then the ref backend.
inline std::vector<ConvertPath> convert_paths() {
  std::vector<ConvertPath> paths;
  const Isa saved = max_isa();
  const std::vector<Isa> levels = supported_isas();
  for (auto it = levels.rbegin(); it != levels.rend(); ++it) {
    set_max_isa(*it);
    const std::string label = std::string("cpu:") + simd_target();
    bool seen = false;
    for (const ConvertPath& p : paths) seen = seen || p.label == label;
    if (!seen) paths.push_back({false, *it, label});
  }
  set_max_isa(saved);
  paths.push_back({true, Isa::scalar, "ref"});
  return paths;
}

}  // namespace mixprec::test
