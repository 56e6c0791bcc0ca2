#pragma once
/// The per-op profiler: while a runtime::Profile session lives on a thread, every public op,
/// every autograd node's backward, every dtype cast and every optimizer step run on that thread
/// is timed and costed (FLOPs, bytes moved) and aggregated by (op, phase, dtype). Off (no
/// session anywhere), an op pays one test of a global counter. What `mixprec profile` prints;
/// docs/diagnostics.md explains the accounting rules.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/core/dtype.h"

namespace mixprec::runtime {

/// Where in a training step a record was made. Casts are their own phase wherever they happen
/// (autocast's input casts in forward, the engine's gradient casts in backward).
enum class Phase : std::uint8_t {
  forward,    ///< an op called by user or model code
  backward,   ///< one autograd Node::backward run by the engine (ops it calls are folded in)
  optimizer,  ///< an optimizer step, a GradScaler unscale, a gradient clip
  cast,       ///< a dtype conversion (cast() / Tensor::to()), forward or backward
};
/// "forward", "backward", "optimizer", "cast".
const char* name(Phase phase);

/// One row of a profile: every record with the same op name, phase and dtype, summed.
struct OpStats {
  std::string op;              ///< runtime::OpKind name where one exists ("linear"), else the op's or
                               ///< node's own name ("global_avg_pool2d", "accumulate_grad", "Adam")
  Phase phase = Phase::forward;
  DType dtype = DType::f32;    ///< the dtype the op computed in (its output's; a cast's target)
  std::uint64_t count = 0;     ///< calls
  std::uint64_t self_ns = 0;   ///< exclusive wall time (steady_clock): minus nested recorded casts
  double flops = 0;            ///< 2*M*N*K for GEMMs and convolutions, element counts otherwise
  double bytes = 0;            ///< inputs read plus outputs written, at their dtype sizes
};

/// Time spent in f32 that the autocast policy would let run in 16 bits: the "what you would
/// gain" list. A forward op qualifies when (a) its policy is lower_precision and it computed in
/// f32, or (b) its policy is pass_through, it computed in f32, and an input came from an
/// fp32-policy op or from another qualifying op; a backward node qualifies when its forward did.
struct LowerPrecisionCandidate {
  std::string op;
  Phase phase = Phase::forward;
  DType dtype = DType::f32;
  std::string reason;          ///< e.g. "lower_precision op computed in f32 outside autocast"
  std::uint64_t count = 0;
  std::uint64_t self_ns = 0;
};

/// Everything a session recorded.
struct ProfileData {
  std::vector<OpStats> ops;    ///< sorted by self_ns, largest first
  std::vector<LowerPrecisionCandidate> could_run_lower;  ///< sorted by self_ns, largest first
  std::uint64_t cast_count = 0;  ///< calls of cast() that converted (phase cast, summed)
  std::uint64_t cast_ns = 0;     ///< their total time
  std::uint64_t recorded_ns = 0; ///< sum of self_ns over ops (no double counting)
};

/// RAII session: records on the constructing thread until destroyed. One session per thread at a
/// time (StateError otherwise); sessions on different threads are independent. Nested ops are
/// not double counted: an op called inside another op (or inside a node's backward) is folded
/// into the outermost one (its time, FLOPs and bytes count there), except casts, which always
/// get their own row and whose time is subtracted from the op that caused them.
class Profile {
 public:
  Profile();
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  /// A snapshot of what was recorded so far (the session keeps recording).
  ProfileData data() const;
  /// Forgets everything recorded so far (e.g. after warm-up steps).
  void clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// True while a Profile session records on this thread.
bool profiling() noexcept;

}  // namespace mixprec::runtime
