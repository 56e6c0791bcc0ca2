#pragma once
// A training step's forward and backward as a captured graph (core/device_graph.h), replayed at
// every later micro-batch of the same shape: on a GPU, the hundreds of kernel launches of a
// transformer's step become one graph launch (the host glue of docs/cuda.md). TrainStep owns one
// when StepConfig::graphs is "on" (`--cuda-graphs on`).
//
// What it does per micro-batch, keyed by the batch's shapes and the loss scale (a scale change
// is a new key: the scaled backward's first product has the scale as its argument):
//   1. the first micro-batch of a key runs eagerly: it fills the caches a capture must find
//      filled (weight copies, plans, the loss gradient, position ids) and warms the allocator;
//   2. the second runs eagerly too, as a rehearsal (core/device_graph.h): a host transfer,
//      synchronisation or refusing op (dropout) in it rules the graph out before any capture;
//   3. the third is captured: its inputs copied into static buffers of the graph, the targets
//      into static device indices; the capture runs nothing, so the graph is replayed at once;
//      the gradients the backward assigned, in the graph's private pool, are kept with it;
//   4. every later one copies its inputs into those buffers, replays, and hands the kept
//      gradients back to the parameters (the optimizer's zero_grad let go of them).
// With --accum N, the first micro-batch of a step does this, and the N - 1 others, whose
// backward adds into the gradients, go the same way with a second graph that belongs to the
// first one (captured adding into its gradients): graphed only after a replayed first one.
// The optimizer half (unscale, norm, clip, update) stays eager: its scalars (learning rate, bias
// corrections, the scale's inverse) are host values in its kernels' arguments (docs/cuda.md).
//
// Where a graph cannot apply, the step runs eagerly and says why once: a configuration that
// rules it out (refusal at construction), or a capture that failed (an op refused it, as dropout
// does, or one read the host): that failure puts the step back (its gradients dropped, weight
// copies cleared) and runs the micro-batch eagerly, so no step is lost or wrong.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device_graph.h"
#include "mixprec/data/batch_source.h"
#include "mixprec/tensor/device_indices.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::train::detail {

class StepGraphs {
 public:
  /// What the step lends: its forward and scaled backward of one micro-batch (returning the
  /// unscaled loss, unread), and the undoing of a capture that failed half-way (its host
  /// state; the gradients are put back here).
  struct Hooks {
    std::function<Tensor(const data::Batch&)> forward_backward;
    std::function<void()> undo_failed_capture;
  };

  /// refusal: why this step can never be graphed ("" if it can); printed once by the first run.
  explicit StepGraphs(std::string refusal) : refusal_(std::move(refusal)) {}

  /// One micro-batch (see above); `micro` is its index in the optimizer step (0: the first,
  /// whose backward assigns the gradients; the others add into them). `key_extra` is every
  /// other host value the captured work depends on (the loss scale's bits); `params` the
  /// model's parameters, whose gradients a replay hands back. Sets *replayed when the graph ran
  /// instead of hooks.forward_backward.
  Tensor run(const data::Batch& batch, std::uint64_t key_extra, int micro,
             const std::vector<Tensor>& params, const Hooks& hooks, bool* replayed);

  /// "" while graphs apply; else why the micro-batches run eagerly.
  const std::string& refusal() const { return refusal_; }
  std::size_t captures() const { return captures_; }
  std::size_t replays() const { return replays_; }
  /// Graphs held at most (one per key; the least recently replayed goes).
  static constexpr std::size_t kMaxGraphs = 4;

 private:
  struct Key {
    std::vector<std::int64_t> shape;
    int dtype = 0;
    std::int64_t targets = 0;
    std::uint64_t extra = 0;
    auto operator<=>(const Key&) const = default;
  };
  struct Graph {
    std::unique_ptr<mixprec::detail::DeviceGraph> graph;
    Tensor inputs;            // the static inputs the graph reads
    DeviceIndices targets;    // and its static targets
    Tensor loss;              // the loss it writes
    std::vector<Tensor> grads;         // the gradients it leaves, per parameter (undefined: none)
    std::vector<double> grad_scales;   // the scale each was computed at
    std::uint64_t last_used = 0;
    // --accum > 1: the graph of the later micro-batches of a step whose first one is this
    // graph, captured adding into this graph's gradients (so it lives and dies with it), and
    // the eager later micro-batches seen so far.
    std::unique_ptr<Graph> later;
    int later_seen = 0;
  };

  // Where the micro-batch stands on the way to its graph: eager warm-up (seen 0), eager
  // rehearsal (seen 1), then captured into `made` (nullptr: a refusal, eager instead).
  Tensor advance(int& seen, const data::Batch& batch, const std::vector<Tensor>& params,
                 const Hooks& hooks, bool first, std::unique_ptr<Graph>* made);
  std::unique_ptr<Graph> capture(const data::Batch& batch, const std::vector<Tensor>& params,
                                 const Hooks& hooks, bool first);
  Tensor replay(Graph& g, const data::Batch& batch, const std::vector<Tensor>& params);
  void refuse(std::string why);
  void make_room();

  std::string refusal_;
  bool told_ = false;
  // One private pool for every graph of the step: they replay one at a time and their outputs
  // (loss, gradients) are consumed within the step, so a block one graph uses for temporaries
  // may hold another's; the step's graph memory is then about one step's, not one per key.
  std::shared_ptr<mixprec::detail::MemoryPool> pool_;
  std::map<Key, std::unique_ptr<Graph>> graphs_;  // first micro-batches, by key
  std::map<Key, int> warmed_;  // eager first micro-batches seen per key (0, 1, then captured)
  // This optimizer step's first micro-batch: its graph when it was replayed (null: eager, so
  // the later ones run eagerly too) and its key.
  Graph* step_first_ = nullptr;
  Key step_key_;
  std::size_t captures_ = 0, replays_ = 0;
  std::uint64_t clock_ = 0;
};

}  // namespace mixprec::train::detail
