#pragma once
/// Automatic mixed precision: inside an Autocast region, ops cast their inputs according to the
/// policy table (op_policy.h): GEMMs run in bf16 (or f16), range-sensitive ops in f32.
/// The region is thread-local and nests; casts of fp32 parameters are cached for the life of the
/// outermost region and recomputed if the parameter changes.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "mixprec/runtime/op_policy.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::runtime {

/// RAII region: `Autocast ac;` turns autocast on with bf16 for this thread until destroyed;
/// `Autocast off(false);` inside a region turns it off for a nested scope.
class Autocast {
 public:
  /// lower must be bf16 or f16 (DTypeError otherwise).
  explicit Autocast(bool enabled = true, DType lower = DType::bf16);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool prev_enabled_;
  DType prev_dtype_;
};

/// True inside an enabled Autocast region on this thread.
bool autocast_enabled() noexcept;
/// The lower-precision dtype of the current region (bf16 by default).
DType autocast_dtype() noexcept;

/// Counters of the casts autocast performed on this thread (for tests and profiling).
struct CastStats {
  std::uint64_t casts = 0;       ///< casts actually computed
  std::uint64_t cache_hits = 0;  ///< parameter casts served from the region's cache
};
CastStats cast_stats() noexcept;
void reset_cast_stats() noexcept;

/// The inputs of `op` as autocast wants them (undefined inputs stay undefined). Outside a region,
/// returns the inputs unchanged. Ops call this first; users rarely need it.
std::vector<Tensor> autocast_inputs(OpKind op, std::initializer_list<const Tensor*> inputs);

/// Same for ops with a variable number of inputs (cat, stack).
std::vector<Tensor> autocast_inputs(OpKind op, const std::vector<Tensor>& inputs);

/// Runs fn with autocast disabled and its floating inputs cast to dtype (like PyTorch's
/// custom_fwd(cast_inputs=...)): for user ops that must run in one precision. Backward follows
/// the dtypes recorded in forward, so the gradients come back in the callers' dtypes.
Tensor run_with_inputs_cast(DType dtype, const std::vector<Tensor>& inputs,
                            const std::function<Tensor(const std::vector<Tensor>&)>& fn);

}  // namespace mixprec::runtime
