#include "mixprec/dist/data_parallel.h"

#include <algorithm>
#include <cstring>

#include "mixprec/autograd/node.h"
#include "mixprec/core/error.h"
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
                           const ShardedParameters* shards)
    : comm_(&comm), params_(std::move(params)), wire_(wire), shards_(shards) {}

void GradientSync::average() {
  if (comm_->size() == 1) return;
  std::size_t total = 0;
  for (const Tensor& p : params_) total += static_cast<std::size_t>(p.numel());
  bucket_.resize(total);  // no allocation after the first step
  std::size_t offset = 0;
  for (const Tensor& p : params_) {
    const Tensor g = p.grad();
    const auto n = static_cast<std::size_t>(p.numel());
    if (g.defined()) {
      MIXPREC_CHECK(g.dtype() == DType::f32, ValueError, "data parallel",
                    "gradients are averaged in f32; a " << name(g.dtype())
                        << " gradient (16-bit parameters: --precision pure-bf16) is not supported "
                           "with several ranks yet");
      const Tensor c = g.contiguous();
      std::memcpy(bucket_.data() + offset, c.data_ptr(), n * sizeof(float));
    } else {
      std::fill_n(bucket_.data() + offset, n, 0.0f);
    }
    offset += n;
  }
  // The same rounding as a division of the sum by N for N a power of two; for other N one
  // rounding either way, and identical on every rank.
  const float inv = 1.0f / static_cast<float>(comm_->size());
  if (shards_ == nullptr) {
    comm_->allreduce_sum(bucket_.data(), bucket_.size(), wire_);
    offset = 0;
    for (const Tensor& p : params_) {
      const Tensor g = p.grad();
      const auto n = static_cast<std::size_t>(p.numel());
      if (g.defined()) {
        MIXPREC_ASSERT(g.is_contiguous());
        float* out = static_cast<float*>(g.data_ptr());
        const float* in = bucket_.data() + offset;
        for (std::size_t j = 0; j < n; ++j) out[j] = in[j] * inv;
        g.bump_version();
      }
      offset += n;
    }
    return;
  }
  MIXPREC_ASSERT(shards_->total() == total);
  comm_->reduce_scatter_sum(bucket_.data(), bucket_.size(), wire_);
  autograd::NoGradGuard no_grad;
  for (const ParameterPiece& piece : shards_->pieces()) {
    const Tensor& p = params_[piece.param];
    const Tensor g = p.grad();
    if (!g.defined()) {
      piece.view.set_grad(Tensor());
      continue;
    }
    MIXPREC_ASSERT(g.is_contiguous());
    float* out = static_cast<float*>(g.data_ptr()) + piece.begin;
    const float* in = bucket_.data() + piece.flat;
    for (std::size_t j = 0; j < piece.count; ++j) out[j] = in[j] * inv;
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
