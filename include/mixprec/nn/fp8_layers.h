#pragma once
/// Which Linear layers of a model run in fp8, and their scaling state (docs/fp8.md, "Recipes").
/// Fp8Layers picks the layers by the default policy (every nn::Linear except the model's first
/// and last, in registration order: the layers that see raw inputs and produce the outputs are
/// the most sensitive; attention's own products are not Linears and stay 16-bit) and owns one
/// Fp8LinearState per layer, keyed by the layer's path. Inside an Fp8Scope those Linears call
/// fp8_linear(); elsewhere every Linear is the plain one (evaluation may run either way).
/// The states are held here, not in the layers, as Transformer Engine's fp8_autocast holds the
/// recipe outside its modules: a model object does not change when a run turns fp8 on.
#include <map>
#include <string>
#include <vector>

#include "mixprec/runtime/fp8_recipe.h"
#include "mixprec/ops/fp8_linear.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::nn {

class Module;
class Linear;

/// One cast role of an fp8 layer as it stands after the last step (Fp8Layers::report).
struct Fp8RoleReport {
  std::string role;           ///< "input", "weight" or "grad"
  double amax = 0;            ///< max |x| the last cast measured (NaN/Inf if it met them)
  double history_amax = 0;    ///< the largest entry of the amax history, what the scale is chosen from
  double scale = 1;           ///< the scale the next cast uses (x_fp8 = sat(x * scale))
  bool observed = false;      ///< the two fractions were counted (a cast ran with observe on)
  double saturated = 0;       ///< fraction of the elements with |x * scale| > the format's max
  double flushed = 0;         ///< fraction of the nonzero elements the cast rounded to zero
};

/// An fp8 layer's roles, input, weight, grad in that order.
struct Fp8LayerReport {
  std::string path;
  std::vector<Fp8RoleReport> roles;
};

class Fp8Layers {
 public:
  /// Selects model's fp8 Linears and creates their states on the current device. The default
  /// policy is every Linear but the first and the last; `overrides` (module path -> true: run
  /// in fp8, false: keep the plain Linear) changes it layer by layer (the fp8 entries of a
  /// layer policy file). ValueError (one line) for a bad recipe, for an override naming a path
  /// that is not a Linear of the model (naming `source` and listing the Linears), when no layer
  /// is left in fp8, or, without overrides, when the model has fewer than three Linears.
  Fp8Layers(Module& model, const runtime::Fp8Recipe& recipe,
            const std::map<std::string, bool>& overrides = {},
            const std::string& source = "the fp8 layer policy");
  Fp8Layers(const Fp8Layers&) = delete;
  Fp8Layers& operator=(const Fp8Layers&) = delete;

  const runtime::Fp8Recipe& recipe() const { return recipe_; }
  /// The fp8 layers' paths, in registration order.
  std::vector<std::string> paths() const;
  /// The state of the layer at path (ValueError naming it if it is not an fp8 layer).
  Fp8LinearState& state(const std::string& path);
  /// The state of this layer, or null if it does not run in fp8.
  Fp8LinearState* find(const Linear& layer);
  /// The device f32 [1] flag every layer raises when an amax is NaN or Inf.
  const Tensor& found_inf() const { return found_inf_; }
  /// Reads the flag (one counted download) and clears it; true if it was set.
  bool take_found_inf();
  /// Every state tensor by "<path>.fp8_<role>_<history|scale|amax>": what a checkpoint stores.
  std::map<std::string, Tensor> state_tensors() const;
  /// Turns the saturated/flushed counting of every layer's casts on or off (on clears the last
  /// observations). A counting step downloads each cast's operands: for inspect and logging
  /// steps, not every step.
  void set_observe(bool on);
  bool observing() const { return observe_; }
  /// Every layer's roles: amax, history max, scale (counted downloads) and the fractions of the
  /// last observed casts.
  std::vector<Fp8LayerReport> report() const;

 private:
  struct Entry {
    const Linear* layer;
    std::string path;
    Fp8LinearState state;
  };
  runtime::Fp8Recipe recipe_;
  Tensor found_inf_;
  std::vector<Entry> entries_;
  bool observe_ = false;
};

/// Makes `layers`' Linears run fp8_linear() on this thread for the scope's lifetime (nested
/// scopes restore the outer one).
class Fp8Scope {
 public:
  explicit Fp8Scope(Fp8Layers& layers);
  ~Fp8Scope();
  Fp8Scope(const Fp8Scope&) = delete;
  Fp8Scope& operator=(const Fp8Scope&) = delete;

 private:
  Fp8Layers* saved_;
};

/// The state of `layer` under the active Fp8Scope, or null (no scope, or not an fp8 layer).
Fp8LinearState* active_fp8_state(const Linear& layer);

}  // namespace mixprec::nn
