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
#include "mixprec/ops/sync_batchnorm.h"

#include <cstring>
#include <vector>

#include "runtime/op_scope.h"
#include "ops/sync_batchnorm_detail.h"
#include "kernels/norm.h"
#include "kernels/spec/norm_math.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"
#include "mixprec/ops/normalization.h"
#include "ops/norm_util.h"
#include "ops/op_util.h"

namespace mixprec::ops {

using runtime::Communicator;
using runtime::WireDType;

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

// The per-channel reductions the kernels write in double, where the data lives; they cross to
// the host for the exchange between ranks (MPI reads host buffers) and the combined values
// cross back: the documented transfer points of the synchronised batch norm.
std::shared_ptr<Storage> device_doubles(std::size_t n) {
  return std::make_shared<Storage>(n * sizeof(double), MemoryCategory::workspace);
}
std::vector<double> to_host(const Storage& s, std::size_t n) {
  std::vector<double> out(n);
  const TransferReason why("synchronised batch-norm statistics");
  download(out.data(), s.data(), n * sizeof(double), s.device());
  return out;
}
std::shared_ptr<Storage> to_device(const std::vector<double>& v) {
  auto s = device_doubles(v.size());
  const TransferReason why("synchronised batch-norm statistics");
  upload(s->data(), v.data(), v.size() * sizeof(double), s->device());
  return s;
}
Tensor f32_to_device(const std::vector<float>& v) {
  const TransferReason why("synchronised batch-norm statistics");
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())});
}
const double* doubles(const std::shared_ptr<Storage>& s) {
  return static_cast<const double*>(s->data());
}
double* doubles(Storage& s) { return static_cast<double*>(s.data()); }

class SyncBatchNormNode final : public runtime::Node {
 public:
  SyncBatchNormNode(const Communicator* comm, Tensor x, kernels::BatchNormDims dims, Tensor mean,
                    Tensor var, std::vector<float> var_host, Tensor weight, ParamInfo w,
                    ParamInfo b, float eps, double count)
      : comm_(comm), x_(std::move(x)), dims_(dims), mean_(std::move(mean)), var_(std::move(var)),
        var_host_(std::move(var_host)), weight_(std::move(weight)), w_(std::move(w)),
        b_(std::move(b)), eps_(eps), count_(count) {}
  const char* name() const override { return "sync_batch_norm"; }
  void release_saved() override { x_ = Tensor(); }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const Tensor dy = dy_in.contiguous().to(x_.dtype());
    const auto c = static_cast<std::size_t>(dims_.c);
    const auto sums_dy = device_doubles(c), sums_dy_xmu = device_doubles(c);
    kernels::batch_norm_backward_reduce(x_.data_ptr(), x_.dtype(), dy.data_ptr(), dy.dtype(),
                                        dims_, mean_.data<float>(), doubles(*sums_dy),
                                        doubles(*sums_dy_xmu));
    std::vector<double> sum_dy = to_host(*sums_dy, c), sum_dy_xmu = to_host(*sums_dy_xmu, c);
    // This rank's share of the parameter gradients, by batch_norm_backward's formulas.
    std::vector<float> dw(next[1].fn ? c : 0), db(next[2].fn ? c : 0);
    for (std::size_t i = 0; i < dw.size(); ++i) {
      dw[i] = static_cast<float>(sum_dy_xmu[i]) * kernels::norm_invstd(var_host_[i], eps_);
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
      const auto global_dy = to_device(sum_dy), global_dy_xmu = to_device(sum_dy_xmu);
      kernels::batch_norm_backward_elemt(x_.data_ptr(), x_.dtype(), dy.data_ptr(), dy.dtype(),
                                         dims_, mean_.data<float>(), var_.data<float>(), eps_,
                                         data_or_null(weight_), doubles(global_dy),
                                         doubles(global_dy_xmu), count_, dx.data_ptr(),
                                         x_.dtype());
    }
    return {dx, dw.empty() ? Tensor() : ops::detail::param_grad(dw, w_.shape, w_.dtype),
            db.empty() ? Tensor() : ops::detail::param_grad(db, b_.shape, b_.dtype)};
  }

 private:
  const Communicator* comm_;
  Tensor x_;
  kernels::BatchNormDims dims_;
  Tensor mean_, var_;            // f32 on the device (the global statistics)
  std::vector<float> var_host_;  // the global variance on the host, for dweight
  Tensor weight_;                // f32 copy on the device
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
  runtime::detail::OpScope prof(runtime::OpKind::batch_norm);
  const ops::detail::BatchNormInputs in =
      ops::detail::prepare_batch_norm(op, x_arg, running_mean, running_var, weight_arg, bias_arg, true, momentum, eps);
  const Tensor& x = in.x;
  const Tensor& weight = in.weight;
  const Tensor& bias = in.bias;
  const kernels::BatchNormDims d = in.d;
  const auto c = static_cast<std::size_t>(d.c);

  const Tensor xc = x.detach().contiguous();
  const auto means = device_doubles(c), m2s = device_doubles(c);
  kernels::batch_norm_stats(xc.data_ptr(), xc.dtype(), d, doubles(*means), doubles(*m2s));
  const std::vector<double> local_mean = to_host(*means, c), local_m2 = to_host(*m2s, c);
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

  const Tensor w = ops::detail::f32_copy(weight), b = ops::detail::f32_copy(bias);
  const Tensor mean_d = f32_to_device(mean), var_d = f32_to_device(var);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  // training = false: normalise with the given (global) statistics.
  kernels::batch_norm_forward(xc.data_ptr(), xc.dtype(), d, data_or_null(w), data_or_null(b), eps,
                              false, mean_d.data<float>(), var_d.data<float>(), y.data_ptr(),
                              y.dtype(), nullptr, false);
  if (running_mean.defined()) {
    ops::detail::update_running(running_mean, mean_d, 1.0, momentum);
    ops::detail::update_running(running_var, var_d, count / (count - 1.0), momentum);
  }
  ops::detail::record<SyncBatchNormNode>(y, {&x, &weight, &bias}, &comm, xc, d, mean_d, var_d,
                                         std::move(var), w, ParamInfo::of(weight),
                                         ParamInfo::of(bias), eps, count);
  prof.done(y, {&x, &weight, &bias});
  return y;
}

}  // namespace mixprec::ops
