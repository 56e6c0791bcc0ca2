// The conformance cases of the optimizer and loss-scaler kernels: SGD and Adam updates (every
// write mode, gradient dtype and 16-bit weight copy), their multi-tensor batches, and unscale
// with and without non-finite values, single and batched (conformance_cases.h says how cases run).
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "conformance/conformance_cases.h"
#include "conformance/conformance_util.h"
#include "kernels/backend.h"
#include "kernels/kernel_test_util.h"

namespace mixprec::kernels::conformance {
namespace {

using ktest::Buffer;
using ktest::HostArray;
using ktest::random_buffer;

// ---- optimizers and the scaler ----

/// Runs one SGD or Adam update on n parameters of dtype t with write mode `write` and returns
/// the parameter, master and state afterwards (all bit-exact by the spec); copy_dtype bf16/f16
/// (f32 parameters only) also writes the 16-bit weight copy, f32 none.
Outs run_optim(const Backend& b, DType t, bool adam, int write, DType grad_dtype,
               DType copy_dtype = DType::f32) {
  const std::int64_t n = 40007;
  Buffer param = random_buffer(t, n, -1.0f, 1.0f, 45);
  Buffer master = random_buffer(DType::f32, n, -1.0f, 1.0f, 46);
  if (write == kWriteMaster) {  // the master rounds to the parameter
    for (std::int64_t i = 0; i < n; ++i) param.set(i, master.get(i));
  }
  const Buffer grad = random_buffer(grad_dtype, n, -0.1f, 0.1f, 47);
  Buffer s0 = random_buffer(DType::f32, n, -0.01f, 0.01f, 48);
  Buffer s1 = random_buffer(DType::f32, n, 0.0f, 0.01f, 49);
  OptimArrays a{};
  a.param = param.data();
  a.master = write == kWriteMaster ? static_cast<float*>(master.data()) : nullptr;
  a.grad = grad.data();
  a.state0 = static_cast<float*>(s0.data());
  a.state1 = adam ? static_cast<float*>(s1.data()) : nullptr;
  a.param_dtype = t;
  a.grad_dtype = grad_dtype;
  a.write = write;
  Buffer copy = random_buffer(copy_dtype, n, -1.0f, 1.0f, 50);
  if (copy_dtype != DType::f32) {
    a.copy = copy.data();
    a.copy_dtype = copy_dtype;
  }
  if (adam) {
    AdamScalars s{};
    s.beta1 = 0.9f, s.one_minus_beta1 = 0.1f, s.beta2 = 0.999f, s.one_minus_beta2 = 0.001f;
    s.eps = 1e-8f, s.l2_weight_decay = 0.01f, s.decay = 1.0f, s.step_size = 1e-3f;
    s.inv_sqrt_bias_correction2 = 1.5f;
    b.adam_update(a, s, static_cast<std::size_t>(n), 99);
  } else {
    SgdScalars s{};
    s.lr = 0.05f, s.momentum = 0.9f, s.one_minus_dampening = 1.0f, s.weight_decay = 1e-4f;
    s.nesterov = 1, s.first_step = 0;
    b.sgd_update(a, s, static_cast<std::size_t>(n), 99);
  }
  Outs o{exact("param", std::move(param)), exact("state0", std::move(s0))};
  if (adam) o.push_back(exact("state1", std::move(s1)));
  if (write == kWriteMaster) o.push_back(exact("master", std::move(master)));
  if (copy_dtype != DType::f32) o.push_back(exact("copy", std::move(copy)));
  return o;
}

/// One multi-tensor update over runs of every write mode and gradient dtype valid for parameter
/// dtype t (with and without a 16-bit weight copy, with and without a gradient multiplier, and
/// sizes from 0 to beyond one block), each run with its own scalars and RNG stream: the
/// parameter, master and state of every run afterwards (bit-exact by the spec, each run as the
/// single-tensor entry would update it).
Outs run_optim_batch(const Backend& b, DType t, bool adam) {
  struct RunBuffers {
    Buffer param, master, grad, s0, s1, copy;
    int write;
  };
  const std::vector<int> writes = t == DType::f32 ? std::vector<int>{kWriteInPlace}
                                                  : std::vector<int>{kWriteMaster, kWriteStochastic};
  const std::int64_t sizes[] = {5000, 1, 0, 2049, 40007, 300};
  Buffer multiplier(DType::f32, 1);
  multiplier.set(0, 0.3f);
  std::vector<RunBuffers> buffers;
  int k = 0;
  for (int w : writes) {
    for (DType g : {DType::f32, t}) {
      for (int variant = 0; variant < 3; ++variant, ++k) {
        const std::int64_t n = sizes[k % 6];
        const auto seed = static_cast<std::uint32_t>(60 + 10 * k);
        RunBuffers r{random_buffer(t, n, -1.0f, 1.0f, seed),
                     random_buffer(DType::f32, n, -1.0f, 1.0f, seed + 1),
                     random_buffer(g, n, -0.1f, 0.1f, seed + 2),
                     random_buffer(DType::f32, n, -0.01f, 0.01f, seed + 3),
                     random_buffer(DType::f32, n, 0.0f, 0.01f, seed + 4),
                     random_buffer(DType::bf16, n, -1.0f, 1.0f, seed + 5),
                     w};
        if (w == kWriteMaster) {
          for (std::int64_t i = 0; i < n; ++i) r.param.set(i, r.master.get(i));
        }
        buffers.push_back(std::move(r));
      }
    }
  }
  const auto fill = [&](auto& batch, auto make_scalars) {
    batch.size = 0;
    int idx = 0;
    for (RunBuffers& r : buffers) {
      auto& run = batch.runs[batch.size++];
      OptimArrays& a = run.arrays;
      a.param = r.param.data();
      a.master = r.write == kWriteMaster ? static_cast<float*>(r.master.data()) : nullptr;
      a.grad = r.grad.data();
      a.state0 = static_cast<float*>(r.s0.data());
      a.state1 = adam ? static_cast<float*>(r.s1.data()) : nullptr;
      a.param_dtype = t;
      a.grad_dtype = r.grad.dtype();
      a.write = r.write;
      if (t == DType::f32 && idx % 3 == 1) {
        a.copy = r.copy.data();
        a.copy_dtype = DType::bf16;
      }
      if (idx % 3 == 2) a.grad_multiplier = static_cast<const float*>(multiplier.data());
      run.scalars = make_scalars(idx);
      run.count = static_cast<std::uint64_t>(r.param.size());
      run.rng_stream = 500 + static_cast<std::uint64_t>(idx);
      ++idx;
    }
  };
  if (adam) {
    auto batch = std::make_unique<AdamBatch>();
    fill(*batch, [](int idx) {
      AdamScalars s{};
      s.beta1 = 0.9f, s.one_minus_beta1 = 0.1f, s.beta2 = 0.999f, s.one_minus_beta2 = 0.001f;
      s.eps = 1e-8f, s.l2_weight_decay = idx % 2 == 0 ? 0.01f : 0.0f;
      s.decay = idx % 2 == 0 ? 1.0f : 0.999f, s.step_size = 1e-3f * static_cast<float>(idx + 1);
      s.inv_sqrt_bias_correction2 = 1.5f;
      return s;
    });
    b.adam_update_batch(*batch);
  } else {
    auto batch = std::make_unique<SgdBatch>();
    fill(*batch, [](int idx) {
      SgdScalars s{};
      s.lr = 0.01f * static_cast<float>(idx + 1), s.momentum = 0.9f, s.one_minus_dampening = 1.0f;
      s.weight_decay = 1e-4f, s.nesterov = idx % 2, s.first_step = idx % 3 == 0 ? 1 : 0;
      return s;
    });
    b.sgd_update_batch(*batch);
  }
  Outs o;
  for (std::size_t r = 0; r < buffers.size(); ++r) {
    const std::string run = "run " + std::to_string(r) + " ";
    o.push_back(exact(run + "param", std::move(buffers[r].param)));
    o.push_back(exact(run + "state0", std::move(buffers[r].s0)));
    if (adam) o.push_back(exact(run + "state1", std::move(buffers[r].s1)));
    if (buffers[r].write == kWriteMaster) o.push_back(exact(run + "master", std::move(buffers[r].master)));
    if (t == DType::f32 && r % 3 == 1) o.push_back(exact(run + "copy", std::move(buffers[r].copy)));
  }
  return o;
}

Outs run_unscale(const Backend& b, DType t, bool with_non_finite) {
  const std::int64_t n = 70001;
  Buffer g = random_buffer(t, n, -1000.0f, 1000.0f, 50);
  if (with_non_finite) g.set(n - 3, INFINITY);
  Buffer verdict(DType::f32, 2);  // found_inf, amax
  verdict.set(0, 0.0f);
  verdict.set(1, 0.0f);
  auto* found = static_cast<float*>(verdict.data());
  b.unscale(g.data(), t, static_cast<std::size_t>(n), 1.0f / 1024.0f, found,
            found + 1);
  return {exact("grad", std::move(g)), exact("found_inf, amax", std::move(verdict))};
}

/// One multi-tensor unscale over gradients of dtype t and f32, of several sizes (one empty),
/// with amax, with and without an Inf in one of them: every gradient, the flag and amax.
Outs run_unscale_batch(const Backend& b, DType t, bool with_non_finite) {
  const std::int64_t sizes[] = {70001, 0, 5, 4097, 300};
  std::vector<Buffer> grads;
  for (std::size_t k = 0; k < std::size(sizes); ++k) {
    const DType dtype = k % 2 == 0 ? t : DType::f32;
    grads.push_back(random_buffer(dtype, sizes[k], -1000.0f, 1000.0f, static_cast<std::uint32_t>(80 + k)));
  }
  if (with_non_finite) grads[3].set(100, -INFINITY);
  Buffer verdict(DType::f32, 2);  // found_inf, amax
  verdict.set(0, 0.0f);
  verdict.set(1, 0.0f);
  auto* found = static_cast<float*>(verdict.data());
  UnscaleBatch batch{};
  batch.inv = 1.0f / 1024.0f;
  batch.found_inf = found;
  batch.amax = found + 1;
  for (Buffer& g : grads) {
    batch.runs[batch.size++] = {g.data(), g.dtype(),
                                static_cast<std::uint64_t>(g.size())};
  }
  b.unscale_batch(batch);
  Outs o;
  for (std::size_t k = 0; k < grads.size(); ++k) {
    o.push_back(exact("grad " + std::to_string(k), std::move(grads[k])));
  }
  o.push_back(exact("found_inf, amax", std::move(verdict)));
  return o;
}

}  // namespace

void add_optim_cases(std::vector<Case>& c) {
  const auto F = all_float();
  for (bool adam : {false, true}) {
    c.push_back({adam ? "adam_update" : "sgd_update", F, [adam](const Backend& b, DType t) {
                   Outs o;
                   const std::vector<int> writes =
                       t == DType::f32 ? std::vector<int>{kWriteInPlace}
                                       : std::vector<int>{kWriteMaster, kWriteStochastic};
                   for (int w : writes) {
                     for (DType g : {DType::f32, t}) {
                       for (Out& x : run_optim(b, t, adam, w, g)) o.push_back(std::move(x));
                     }
                   }
                   if (t == DType::f32) {  // the 16-bit weight copy written in the same pass
                     for (DType copy : {DType::bf16, DType::f16}) {
                       for (Out& x : run_optim(b, t, adam, kWriteInPlace, t, copy)) o.push_back(std::move(x));
                     }
                   }
                   return o;
                 }});
  }
  for (bool adam : {false, true}) {
    c.push_back({adam ? "adam_update_batch" : "sgd_update_batch", F,
                 [adam](const Backend& b, DType t) { return run_optim_batch(b, t, adam); }});
  }
  c.push_back({"unscale_batch", F, [](const Backend& b, DType t) {
                 Outs o = run_unscale_batch(b, t, false);
                 for (Out& x : run_unscale_batch(b, t, true)) o.push_back(std::move(x));
                 return o;
               }});
  c.push_back({"unscale", F, [](const Backend& b, DType t) {
                 Outs o = run_unscale(b, t, false);
                 for (Out& x : run_unscale(b, t, true)) o.push_back(std::move(x));
                 return o;
               }});
}

}  // namespace mixprec::kernels::conformance
