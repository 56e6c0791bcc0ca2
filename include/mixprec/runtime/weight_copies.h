#pragma once
/// The 16-bit copies of f32 parameters that autocast makes, kept from one step to the next so
/// that the optimizer can write them in its update pass (OptimArrays::copy) instead of autocast
/// reading every f32 weight again to cast it at the next forward.
///
/// A copy is current while its parameter's version (storage version counter) is the one it was
/// made or written at: any other in-place change to the parameter (a checkpoint load, an EMA
/// swap, a user's edit) bumps the version, and autocast casts afresh. Thread-safe; an entry dies
/// with its parameter (checked on every publish), or with its store.
///
/// train::TrainStep owns the store of its model's copies and lends it (UseWeightCopies) to the
/// autocast regions and the optimizer step it runs. Code that runs autocast and an optimizer
/// without a TrainStep shares WeightCopies::process_default().
#include <memory>

#include "mixprec/tensor/tensor.h"

namespace mixprec::runtime {

class WeightCopies {
 public:
  WeightCopies();
  ~WeightCopies();
  WeightCopies(const WeightCopies&) = delete;
  WeightCopies& operator=(const WeightCopies&) = delete;

  /// The current copy of param in dtype, or an undefined tensor.
  Tensor current(const Tensor& param, DType dtype);
  /// Records copy (param cast to copy.dtype(), at param's current version).
  void publish(const Tensor& param, const Tensor& copy);
  /// The copy the optimizer may overwrite in place with param's next value: only when the store
  /// is its sole owner (a copy still saved by an autograd graph or held by a caller is never
  /// changed under it). Undefined otherwise.
  Tensor writable(const Tensor& param);
  /// After the optimizer wrote writable(param) and bumped param's version: the copy is current
  /// at the new version.
  void mark_current(const Tensor& param);
  /// Forgets every copy (frees their memory).
  void clear();

  /// The store used where nobody lends one (never destroyed: tensors may be released after
  /// main returns).
  static WeightCopies& process_default();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Lends `copies` to this thread's autocast regions and optimizer steps while it lives; nests.
class UseWeightCopies {
 public:
  explicit UseWeightCopies(WeightCopies& copies) noexcept;
  ~UseWeightCopies();
  UseWeightCopies(const UseWeightCopies&) = delete;
  UseWeightCopies& operator=(const UseWeightCopies&) = delete;

 private:
  WeightCopies* previous_;
};

/// The store in use on this thread: the innermost UseWeightCopies's, else the process default.
WeightCopies& weight_copies();

}  // namespace mixprec::runtime
