#include "mixprec/dist/data_parallel.h"

#include <algorithm>
#include <cstring>

#include "kernels/elementwise.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"
#include "mixprec/dist/sharded_parameters.h"

namespace mixprec::dist {

ShardedBatches::ShardedBatches(std::shared_ptr<data::BatchSource> global, int rank, int size)
    : global_(std::move(global)), rank_(rank), size_(size) {
  MIXPREC_CHECK(global_ != nullptr && size >= 1 && rank >= 0 && rank < size, ValueError,
                "ShardedBatches", "needs a source and 0 <= rank < size, got rank " << rank << " of " << size);
}

std::int64_t ShardedBatches::batches_per_epoch() const { return global_->batches_per_epoch(); }

void ShardedBatches::start_epoch(std::int64_t epoch, std::int64_t first_batch) {
  global_->start_epoch(epoch, first_batch);
}

bool ShardedBatches::next(data::Batch& out) {
  data::Batch batch;
  if (!global_->next(batch)) return false;
  const std::int64_t rows = batch.inputs.size(0);
  MIXPREC_CHECK(rows % size_ == 0, ValueError, "data parallel",
                "batch " << batch.index << " has " << rows << " samples, which " << size_
                         << " ranks cannot share equally; give a --batch-size (and --limit-train) "
                            "divisible by the number of ranks");
  const std::int64_t share = rows / size_, begin = rank_ * share;
  const std::size_t per_row = batch.targets.size() / static_cast<std::size_t>(rows);
  out.inputs = batch.inputs.slice(0, begin, begin + share).contiguous();
  out.targets.assign(batch.targets.begin() + static_cast<std::ptrdiff_t>(begin * static_cast<std::int64_t>(per_row)),
                     batch.targets.begin() + static_cast<std::ptrdiff_t>((begin + share) * static_cast<std::int64_t>(per_row)));
  out.index = batch.index;
  return true;
}

GradientSync::GradientSync(const Communicator& comm, std::vector<Tensor> params, WireDType wire,
                           const ShardedParameters* shards, std::size_t bucket_bytes)
    : comm_(&comm), params_(std::move(params)), wire_(wire), shards_(shards) {
  for (const Tensor& p : params_) {
    offsets_.push_back(total_);
    total_ += static_cast<std::size_t>(p.numel());
  }
  MIXPREC_ASSERT(shards_ == nullptr || shards_->total() == total_);
  if (comm_->size() == 1) return;
  // Buckets from the last parameter backwards: contiguous ranges of the flat buffer.
  const std::size_t limit = std::max<std::size_t>(1, bucket_bytes / sizeof(float));
  bucket_of_.assign(params_.size(), 0);
  for (std::size_t i = params_.size(); i-- > 0;) {
    const auto n = static_cast<std::size_t>(params_[i].numel());
    if (buckets_.empty() || buckets_.back().range.count >= limit) buckets_.push_back(Bucket{{offsets_[i] + n, 0}, 0, 0, nullptr});
    Bucket& b = buckets_.back();
    b.range = Shard{offsets_[i], b.range.count + n};
    ++b.params;
    bucket_of_[i] = buckets_.size() - 1;
  }
  MIXPREC_CHECK(buckets_.size() <= 30000, ValueError, "data parallel",
                buckets_.size() << " gradient buckets exceed the 30000 tags available; use larger buckets");
  copied_.assign(params_.size(), false);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].requires_grad() && params_[i].is_leaf()) {
      runtime::set_post_accumulate_grad_hook(params_[i], [this, i] { on_gradient(i); });
    }
  }
}

GradientSync::~GradientSync() {
  for (const Tensor& p : params_) {
    if (p.requires_grad() && p.is_leaf() && p.impl().post_accumulate_grad_hook) {
      runtime::set_post_accumulate_grad_hook(p, {});
    }
  }
}

void GradientSync::arm() {
  if (comm_->size() == 1) return;
  armed_ = true;
  stale_ = false;
  sent_early_ = 0;
  flat_.resize(total_);  // no allocation after the first step
  std::fill(copied_.begin(), copied_.end(), false);
  for (Bucket& b : buckets_) {
    b.waiting = b.params;
    b.pending.reset();
  }
}

void GradientSync::on_gradient(std::size_t param) {
  if (!armed_) return;
  Bucket& b = buckets_[bucket_of_[param]];
  if (copied_[param]) {
    // A second accumulation in one pass (a parameter used both inside a recomputed block and
    // outside it): what was sent may be stale; average() agrees on a resend.
    stale_ = stale_ || b.pending != nullptr;
    copy_in(param);
    return;
  }
  copy_in(param);
  copied_[param] = true;
  if (--b.waiting == 0) {
    send(bucket_of_[param]);
    ++sent_early_;
  }
  for (Bucket& other : buckets_) {  // let earlier buckets' transfers advance meanwhile
    if (other.pending) other.pending->progress();
  }
}

void GradientSync::copy_in(std::size_t param) {
  const Tensor& p = params_[param];
  const Tensor g = p.grad();
  const auto n = static_cast<std::size_t>(p.numel());
  float* out = flat_.data() + offsets_[param];
  if (!g.defined()) {
    std::fill_n(out, n, 0.0f);
    return;
  }
  MIXPREC_CHECK(g.dtype() == DType::f32, ValueError, "data parallel",
                "gradients are averaged in f32; a " << name(g.dtype())
                    << " gradient (16-bit parameters: --precision pure-bf16) is not supported "
                       "with several ranks yet");
  const Tensor c = g.contiguous();
  const TransferReason why("gradient all-reduce");  // MPI reads host buffers
  download(out, c.data_ptr(), n * sizeof(float), c.device());
}

/// g[0, n) = in[0, n) * inv where g lives: the averaged sums cross back (one upload), then one
/// multiply by the broadcast f32 scalar inv rounds each element once, as on the host.
static void scale_into(const Tensor& g, std::size_t begin, const float* in, std::size_t n, float inv) {
  if (n == 0) return;
  float* out = g.data<float>() + begin;
  {
    const TransferReason why("gradient all-reduce");
    upload(out, in, n * sizeof(float), g.device());
  }
  const Tensor factor = Tensor::full({}, inv, DType::f32);
  const std::int64_t shape[] = {static_cast<std::int64_t>(n)};
  const std::int64_t unit[] = {1}, zero[] = {0};
  kernels::binary(kernels::BinaryOp::mul, shape, {out, DType::f32, unit},
                  {factor.data_ptr(), DType::f32, zero}, out, DType::f32);
}

void GradientSync::send(std::size_t bucket) {
  Bucket& b = buckets_[bucket];
  b.pending = comm_->start_reduce_scatter_sum(flat_.data(), total_, b.range, static_cast<int>(bucket) + 1, wire_);
}

void GradientSync::average() {
  if (comm_->size() == 1) return;
  if (!armed_) arm();
  armed_ = false;
  // Whatever backward did not send (not armed, parameters without a gradient, a bucket still
  // waiting): copied now, sent in bucket order, and every bucket finished in bucket order.
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!copied_[i]) copy_in(i);
  }
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    if (!buckets_[k].pending) send(k);
  }
  for (Bucket& b : buckets_) {
    b.pending->finish();
    b.pending.reset();
  }
  // A gradient that changed after its bucket left, on any rank: every rank reduces again from
  // the final gradients (the ranks agree first, so all or none do).
  if (comm_->allreduce_max(stale_ ? 1.0 : 0.0) != 0.0) {
    for (std::size_t i = 0; i < params_.size(); ++i) copy_in(i);
    comm_->reduce_scatter_sum(flat_.data(), total_, wire_);
  }
  // The same rounding as a division of the sum by N for N a power of two; for other N one
  // rounding either way, and identical on every rank.
  const float inv = 1.0f / static_cast<float>(comm_->size());
  if (shards_ == nullptr) {
    comm_->allgather(flat_.data(), total_, wire_);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Tensor g = params_[i].grad();
      if (!g.defined()) continue;
      MIXPREC_ASSERT(g.is_contiguous());
      scale_into(g, 0, flat_.data() + offsets_[i], static_cast<std::size_t>(params_[i].numel()),
                 inv);
      g.bump_version();
    }
    return;
  }
  runtime::NoGradGuard no_grad;
  for (const ParameterPiece& piece : shards_->pieces()) {
    const Tensor& p = params_[piece.param];
    const Tensor g = p.grad();
    if (!g.defined()) {
      piece.view.set_grad(Tensor());
      continue;
    }
    MIXPREC_ASSERT(g.is_contiguous());
    scale_into(g, piece.begin, flat_.data() + piece.flat, piece.count, inv);
    g.bump_version();
    const Tensor part = g.detach().reshape({g.numel()}).slice(
        0, static_cast<std::int64_t>(piece.begin), static_cast<std::int64_t>(piece.begin + piece.count));
    piece.view.set_grad(part);
    piece.view.set_grad_scale(p.grad_scale());
  }
}

double mean_over_ranks(const Communicator& comm, double value) {
  if (comm.size() == 1) return value;
  float v = static_cast<float>(value);
  comm.allreduce_sum(&v, 1);
  return static_cast<double>(v) / comm.size();
}

}  // namespace mixprec::dist
