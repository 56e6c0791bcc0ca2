#include "mixprec/dist/data_parallel.h"

#include <algorithm>
#include <cstring>

#include "mixprec/core/error.h"

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

void average_gradients(const Communicator& comm, const std::vector<Tensor>& params,
                       std::vector<float>& bucket) {
  if (comm.size() == 1) return;
  std::size_t total = 0;
  for (const Tensor& p : params) total += static_cast<std::size_t>(p.numel());
  bucket.resize(total);  // no allocation after the first step
  std::size_t offset = 0;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    const auto n = static_cast<std::size_t>(p.numel());
    if (g.defined()) {
      MIXPREC_CHECK(g.dtype() == DType::f32, ValueError, "data parallel",
                    "gradients are averaged in f32; a " << name(g.dtype())
                        << " gradient (16-bit parameters: --precision pure-bf16) is not supported "
                           "with several ranks yet");
      const Tensor c = g.contiguous();
      std::memcpy(bucket.data() + offset, c.data_ptr(), n * sizeof(float));
    } else {
      std::fill_n(bucket.data() + offset, n, 0.0f);
    }
    offset += n;
  }
  comm.allreduce_sum(bucket.data(), bucket.size());
  const float inv = 1.0f / static_cast<float>(comm.size());
  for (float& x : bucket) x *= inv;
  offset = 0;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    const auto n = static_cast<std::size_t>(p.numel());
    if (g.defined()) {
      MIXPREC_ASSERT(g.is_contiguous());
      std::memcpy(g.data_ptr(), bucket.data() + offset, n * sizeof(float));
    }
    offset += n;
  }
}

double mean_over_ranks(const Communicator& comm, double value) {
  if (comm.size() == 1) return value;
  float v = static_cast<float>(value);
  comm.allreduce_sum(&v, 1);
  return static_cast<double>(v) / comm.size();
}

}  // namespace mixprec::dist
