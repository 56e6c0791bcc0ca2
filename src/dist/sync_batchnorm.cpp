// Synchronised batch norm: the batch_norm op with its per-channel reductions combined across
// ranks. Forward: batch_norm_stats (local count, mean, m2 in double) -> one exchange -> Chan's
// combination in rank order -> batch_norm_forward with the global mean and variance. Backward:
// batch_norm_backward_reduce (local sums of dy and dy * (x - mean)) -> one exchange -> sums in
// rank order -> batch_norm_backward_elemt with the global sums and count.
//
// Why a gather of doubles rather than an f32 all-reduce of sums: the one-pass variance
// sum(x^2)/n - mean^2 cancels catastrophically in f32 when |mean| >> std (a channel with mean
// 1000 and std 1 loses every digit), and an f32 sum of per-rank means and m2 needs a second
// round (the m2 about the global mean needs the global mean first). Gathering every rank's
// (count, mean, m2) exactly (Communicator::allgather moves bits; f32 wire) and combining them
// locally is one round, and the combination (all terms >= 0) is as accurate as a single
// process's double accumulation. Each rank receives O(ranks x channels) values per layer rather
// than O(channels): a few kB for the small rank counts this CPU library targets
// (docs/distributed.md has the figures).
#include "mixprec/dist/sync_batchnorm.h"

#include <cstring>
#include <vector>

#include "diagnostics/op_scope.h"
#include "dist/sync_batchnorm_detail.h"
#include "kernels/norm.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/core/error.h"
#include "mixprec/ops/normalization.h"
#include "ops/norm_util.h"
#include "ops/op_util.h"

namespace mixprec::dist {

namespace detail {

void allgather_doubles(const Communicator& comm, const std::vector<double>& mine,
                       std::vector<double>& out, std::vector<float>& scratch) {
  const std::size_t k = mine.size();
  const auto ranks = static_cast<std::size_t>(comm.size());
  const std::size_t n = ranks * 2 * k;
  // Equal slots of 2k floats: exactly the shards allgather moves (shard_of(n, ranks, r)).
  MIXPREC_ASSERT(comm.my_shard(n).begin == static_cast<std::size_t>(comm.rank()) * 2 * k &&
                 comm.my_shard(n).count == 2 * k);
  scratch.assign(n, 0.0f);
  float* slot = scratch.data() + comm.my_shard(n).begin;
  for (std::size_t i = 0; i < k; ++i) {
    const SplitDouble s = split_double(mine[i]);
    slot[2 * i] = s.hi;
    slot[2 * i + 1] = s.lo;
  }
  comm.allgather(scratch.data(), n, WireDType::f32);
  out.resize(ranks * k);
  for (std::size_t j = 0; j < ranks * k; ++j) out[j] = join_double(scratch[2 * j], scratch[2 * j + 1]);
}

}  // namespace detail

namespace {

using ops::detail::data_or_null;
using ops::detail::ParamInfo;

class SyncBatchNormNode final : public autograd::Node {
 public:
  SyncBatchNormNode(const Communicator* comm, Tensor x, kernels::BatchNormDims dims,
                    std::vector<float> mean, std::vector<float> var, std::vector<float> weight,
                    ParamInfo w, ParamInfo b, float eps, double count)
      : comm_(comm), x_(std::move(x)), dims_(dims), mean_(std::move(mean)), var_(std::move(var)),
        weight_(std::move(weight)), w_(std::move(w)), b_(std::move(b)), eps_(eps), count_(count) {}
  const char* name() const override { return "sync_batch_norm"; }
  void release_saved() override { x_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const Tensor dy = dy_in.contiguous().to(x_.dtype());
    const auto c = static_cast<std::size_t>(dims_.c);
    std::vector<double> sum_dy(c), sum_dy_xmu(c);
    kernels::batch_norm_backward_reduce(x_.data_ptr(), x_.dtype(), dy.data_ptr(), dy.dtype(),
                                        dims_, mean_.data(), sum_dy.data(), sum_dy_xmu.data());
    // This rank's share of the parameter gradients, by batch_norm_backward's formulas.
    std::vector<float> dw(next[1].fn ? c : 0), db(next[2].fn ? c : 0);
    for (std::size_t i = 0; i < dw.size(); ++i) {
      dw[i] = static_cast<float>(sum_dy_xmu[i]) * kernels::norm_invstd(var_[i], eps_);
    }
    for (std::size_t i = 0; i < db.size(); ++i) db[i] = static_cast<float>(sum_dy[i]);
    Tensor dx;
    // Whether x needs a gradient is a property of the model, the same on every rank, so either
    // every rank meets in this exchange or none does.
    if (next[0].fn) {
      std::vector<double> mine(2 * c), all;
      for (std::size_t i = 0; i < c; ++i) {
        mine[2 * i] = sum_dy[i];
        mine[2 * i + 1] = sum_dy_xmu[i];
      }
      std::vector<float> scratch;
      detail::allgather_doubles(*comm_, mine, all, scratch);
      for (std::size_t i = 0; i < c; ++i) {
        double a = 0.0, b = 0.0;
        for (int r = 0; r < comm_->size(); ++r) {  // rank order: the same bits on every rank
          a += all[static_cast<std::size_t>(r) * 2 * c + 2 * i];
          b += all[static_cast<std::size_t>(r) * 2 * c + 2 * i + 1];
        }
        sum_dy[i] = a;
        sum_dy_xmu[i] = b;
      }
      dx = Tensor::empty(x_.shape(), x_.dtype());
      kernels::batch_norm_backward_elemt(x_.data_ptr(), x_.dtype(), dy.data_ptr(), dy.dtype(),
                                         dims_, mean_.data(), var_.data(), eps_,
                                         data_or_null(weight_), sum_dy.data(), sum_dy_xmu.data(),
                                         count_, dx.data_ptr(), x_.dtype());
    }
    return {dx, dw.empty() ? Tensor() : ops::detail::param_grad(dw, w_.shape, w_.dtype),
            db.empty() ? Tensor() : ops::detail::param_grad(db, b_.shape, b_.dtype)};
  }

 private:
  const Communicator* comm_;
  Tensor x_;
  kernels::BatchNormDims dims_;
  std::vector<float> mean_, var_, weight_;
  ParamInfo w_, b_;
  float eps_;
  double count_;  // values per channel in the global batch
};

}  // namespace

Tensor sync_batch_norm(const Communicator& comm, const Tensor& x_arg, Tensor& running_mean,
                       Tensor& running_var, const Tensor& weight_arg, const Tensor& bias_arg,
                       float momentum, float eps) {
  if (comm.size() == 1) {
    return batch_norm(x_arg, running_mean, running_var, weight_arg, bias_arg, true, momentum, eps);
  }
  const char* op = "sync_batch_norm";
  diagnostics::detail::OpScope prof(amp::OpKind::batch_norm);
  const ops::detail::BatchNormInputs in =
      ops::detail::prepare_batch_norm(op, x_arg, running_mean, running_var, weight_arg, bias_arg, true, momentum, eps);
  const Tensor& x = in.x;
  const Tensor& weight = in.weight;
  const Tensor& bias = in.bias;
  const kernels::BatchNormDims d = in.d;
  const auto c = static_cast<std::size_t>(d.c);

  const Tensor xc = x.detach().contiguous();
  std::vector<double> local_mean(c), local_m2(c);
  kernels::batch_norm_stats(xc.data_ptr(), xc.dtype(), d, local_mean.data(), local_m2.data());
  // One slot per rank: [count, mean_0, m2_0, mean_1, m2_1, ...].
  std::vector<double> mine(1 + 2 * c), all;
  mine[0] = static_cast<double>(d.n * d.s);
  for (std::size_t i = 0; i < c; ++i) {
    mine[1 + 2 * i] = local_mean[i];
    mine[2 + 2 * i] = local_m2[i];
  }
  std::vector<float> scratch;
  detail::allgather_doubles(comm, mine, all, scratch);
  const std::size_t stride = mine.size();
  double count = 0.0;
  for (int r = 0; r < comm.size(); ++r) count += all[static_cast<std::size_t>(r) * stride];
  // Every rank has the same counts, so every rank throws here or none does.
  MIXPREC_CHECK(count > 1.0, ValueError, op,
                "Expected more than 1 value per channel when training, got "
                    << count << " over " << comm.size() << " ranks (this rank's input "
                    << to_string(x.shape()) << "); use a larger global batch or eval mode");
  std::vector<float> mean(c), var(c);
  for (std::size_t i = 0; i < c; ++i) {
    detail::Moments m;
    for (int r = 0; r < comm.size(); ++r) {  // rank order: the same bits on every rank
      const double* slot = all.data() + static_cast<std::size_t>(r) * stride;
      m = detail::combine(m, {slot[0], slot[1 + 2 * i], slot[2 + 2 * i]});
    }
    mean[i] = static_cast<float>(m.mean);
    var[i] = static_cast<float>(m.m2 / m.count);
  }

  const std::vector<float> w = ops::detail::f32_values(weight), b = ops::detail::f32_values(bias);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  // training = false: normalise with the given (global) statistics.
  kernels::batch_norm_forward(xc.data_ptr(), xc.dtype(), d, data_or_null(w), data_or_null(b), eps,
                              false, mean.data(), var.data(), y.data_ptr(), y.dtype());
  if (running_mean.defined()) {
    ops::detail::update_running(running_mean, mean, 1.0, momentum);
    ops::detail::update_running(running_var, var, count / (count - 1.0), momentum);
  }
  ops::detail::record<SyncBatchNormNode>(y, {&x, &weight, &bias}, &comm, xc, d, std::move(mean),
                                         std::move(var), w, ParamInfo::of(weight),
                                         ParamInfo::of(bias), eps, count);
  prof.done(y, {&x, &weight, &bias});
  return y;
}

}  // namespace mixprec::dist
