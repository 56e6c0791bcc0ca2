#pragma once
/// ZeRO stage 1 (DeepSpeed's optimizer-state partitioning) over a Communicator: the model's
/// parameters, laid end to end in one flat f32 space, are cut into one contiguous share per rank
/// (Communicator::shard). Each rank's optimizer sees only the pieces of parameters inside its
/// share, as 1-D views into the parameters' own storage, so its moments (and masters) cover
/// 1/N of the model; it updates them in place, and an all-gather hands every rank the others'
/// updated pieces. Checkpoints hold the full, unsharded state: gather_state() assembles it and
/// load_state() cuts this rank's pieces out of it, so a sharded run resumes unsharded, on
/// another number of ranks, or the other way round.
#include <cstddef>
#include <string>
#include <vector>

#include "mixprec/tensor/tensor.h"
#include "mixprec/dist/communicator.h"
#include "mixprec/optim/optimizer.h"

namespace mixprec::dist {

/// The part of parameter `param` that lies in this rank's share: its elements
/// [begin, begin + count) in flat (row-major) order, which sit at flat offset `flat` of the
/// whole flat space; `view` is a 1-D leaf tensor that requires grad and shares the parameter's
/// storage (the optimizer updates the parameter through it).
struct ParameterPiece {
  std::size_t param = 0;
  std::size_t begin = 0;
  std::size_t count = 0;
  std::size_t flat = 0;
  Tensor view;
};

class ShardedParameters {
 public:
  /// Lays params (f32, contiguous, as Module::parameters() gives them) end to end and takes
  /// this rank's pieces. ValueError for a 16-bit parameter (pure-bf16 modes keep 16-bit weights,
  /// which this first version does not shard) or fewer elements than ranks.
  ShardedParameters(const Communicator& comm, std::vector<Tensor> params);

  const Communicator& comm() const { return *comm_; }
  const std::vector<Tensor>& params() const { return params_; }
  /// Elements of all parameters together (the flat space).
  std::size_t total() const { return total_; }
  /// Flat offset of parameter i's first element.
  std::size_t offset(std::size_t i) const { return offsets_.at(i); }
  /// This rank's share of the flat space.
  Shard share() const { return comm_->my_shard(total_); }
  /// This rank's pieces, in parameter order; together they tile share().
  const std::vector<ParameterPiece>& pieces() const { return pieces_; }
  /// The pieces' views: what this rank's optimizer is built over.
  std::vector<Tensor> views() const;
  /// groups (built over params()) restricted to this rank's pieces, same order and options, so
  /// group indices agree on every rank (a group may be empty here).
  std::vector<optim::ParamGroup> local_groups(const std::vector<optim::ParamGroup>& groups) const;

  /// Every rank sends its updated pieces to all others (an f32 all-gather over the flat space,
  /// so the values are exact), then every parameter's version is bumped (16-bit weight copies
  /// and autocast's cast cache see the change). `flat` is the caller's workspace of total().
  void gather_parameters(std::vector<float>& flat) const;

  /// The state that an optimizer of the same kind over all of params() would have: every
  /// "param.<k>.<buffer>" tensor of `local` (an optimizer over views()) assembled into
  /// "param.<i>.<buffer>" shaped like parameter i (an all-gather per buffer), every
  /// "param.<k>.<scalar>" into "param.<i>.<scalar>" (a max-reduction per parameter), the other
  /// scalars as they are. Collective: every rank must call it (e.g. before rank 0 writes a
  /// checkpoint).
  optim::OptimizerState gather_state(const optim::Optimizer& local) const;
  /// The names of the tensors gather_state() returns, without communicating.
  std::vector<std::string> full_tensor_names(const optim::Optimizer& local) const;
  /// The reverse of gather_state: cuts this rank's pieces out of a full state (as saved by an
  /// unsharded run or by gather_state on any number of ranks) and loads them into `local`.
  /// StateError (from Optimizer::load_state, or here for a missing or ill-sized entry) before
  /// anything changes.
  void load_state(optim::Optimizer& local, const optim::OptimizerState& full) const;

 private:
  const Communicator* comm_;
  std::vector<Tensor> params_;
  std::vector<std::size_t> offsets_;
  std::size_t total_ = 0;
  std::vector<ParameterPiece> pieces_;
};

}  // namespace mixprec::dist
