// The per-op profiler: off by default, exact FLOPs and bytes of GEMMs, no double counting of
// nested ops, backward nodes, casts under autocast, the "could run lower" rules, the per-thread
// sessions, and the whole-step report with its JSON. Timing is asserted only as lower bounds
// set by sleeps (an op's time is taken by the device clock, core/device_clock.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>

#include "runtime/op_scope.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/core/error.h"
#include "mixprec/runtime/profiler.h"
#include "mixprec/runtime/function.h"
#include "mixprec/train/step_profile.h"
#include "mixprec/nn/layers.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"

namespace mixprec::runtime {
namespace {

using train::MachinePeaks;
using train::measure_machine_peaks;
using train::roofline_verdict;
using train::floor_ms;
using train::StepProfile;
using train::profile_training_steps;
using train::format_step_profile;

// The row (op, phase, dtype), or nullptr.
const OpStats* find(const ProfileData& d, const std::string& op, Phase phase, DType dtype) {
  for (const OpStats& s : d.ops) {
    if (s.op == op && s.phase == phase && s.dtype == dtype) return &s;
  }
  return nullptr;
}

bool has_op(const ProfileData& d, const std::string& op) {
  for (const OpStats& s : d.ops) {
    if (s.op == op) return true;
  }
  return false;
}

const LowerPrecisionCandidate* find_lower(const ProfileData& d, const std::string& op, Phase phase) {
  for (const LowerPrecisionCandidate& c : d.could_run_lower) {
    if (c.op == op && c.phase == phase) return &c;
  }
  return nullptr;
}

TEST(Profiler, OffByDefaultAndRecordsNothingOutsideASession) {
  EXPECT_FALSE(profiling());
  EXPECT_EQ(detail::g_sessions.load(), 0);
  const Tensor a = Tensor::randn({8, 8}, 1), b = Tensor::randn({8, 8}, 2);
  const Tensor before = relu(matmul(a, b));  // runs with no session: nothing to record into
  Profile session;
  EXPECT_TRUE(profiling());
  EXPECT_EQ(detail::g_sessions.load(), 1);
  const ProfileData d = session.data();
  EXPECT_TRUE(d.ops.empty());
  EXPECT_TRUE(d.could_run_lower.empty());
  EXPECT_EQ(d.cast_count, 0u);
  EXPECT_EQ(d.recorded_ns, 0u);
}

TEST(Profiler, SessionEndsWithItsObject) {
  {
    Profile session;
    relu(Tensor::randn({4}, 1));
    EXPECT_EQ(session.data().ops.size(), 1u);
  }
  EXPECT_FALSE(profiling());
  EXPECT_EQ(detail::g_sessions.load(), 0);
}

TEST(Profiler, MatmulRecordsExactFlopsAndBytes) {
  const std::int64_t m = 3, n = 5, k = 7;
  const Tensor a = Tensor::randn({m, k}, 1), b = Tensor::randn({k, n}, 2);
  const Tensor a16 = a.to(DType::bf16), b16 = b.to(DType::bf16);
  Profile session;
  matmul(a, b);
  matmul(a16, b16);
  const ProfileData d = session.data();
  const OpStats* f32 = find(d, "matmul", Phase::forward, DType::f32);
  ASSERT_NE(f32, nullptr);
  EXPECT_EQ(f32->count, 1u);
  EXPECT_DOUBLE_EQ(f32->flops, 2.0 * m * n * k);
  EXPECT_DOUBLE_EQ(f32->bytes, 4.0 * (m * k + k * n + m * n));
  const OpStats* bf = find(d, "matmul", Phase::forward, DType::bf16);
  ASSERT_NE(bf, nullptr);
  EXPECT_DOUBLE_EQ(bf->flops, 2.0 * m * n * k);
  EXPECT_DOUBLE_EQ(bf->bytes, 2.0 * (m * k + k * n + m * n));
  EXPECT_EQ(d.ops.size(), 2u);
}

TEST(Profiler, ElementwiseOpsCountElementsAndBytes) {
  const Tensor x = Tensor::randn({6, 10}, 1), y = Tensor::randn({6, 10}, 2);
  Profile session;
  add(x, y);
  relu(x);
  const ProfileData d = session.data();
  const OpStats* a = find(d, "add", Phase::forward, DType::f32);
  ASSERT_NE(a, nullptr);
  EXPECT_DOUBLE_EQ(a->flops, 60.0);
  EXPECT_DOUBLE_EQ(a->bytes, 3.0 * 60 * 4);  // two inputs read, one output written
  const OpStats* r = find(d, "relu", Phase::forward, DType::f32);
  ASSERT_NE(r, nullptr);
  EXPECT_DOUBLE_EQ(r->flops, 60.0);
  EXPECT_DOUBLE_EQ(r->bytes, 2.0 * 60 * 4);
}

TEST(Profiler, NestedOpsAreFoldedIntoTheOutermost) {
  const std::int64_t m = 4, n = 3, k = 5;
  const Tensor c = Tensor::randn({m, n}, 1), a = Tensor::randn({m, k}, 2), b = Tensor::randn({k, n}, 3);
  const Tensor p = Tensor::randn({m, n}, 4), t = Tensor::randn({m, n}, 5);
  Profile session;
  addmm(c, a, b);
  mse_loss(p, t);
  const ProfileData d = session.data();
  // addmm = matmul + add: one row, with the work of both, and no rows of its own for them.
  const OpStats* addmm_row = find(d, "addmm", Phase::forward, DType::f32);
  ASSERT_NE(addmm_row, nullptr);
  EXPECT_EQ(addmm_row->count, 1u);
  EXPECT_DOUBLE_EQ(addmm_row->flops, 2.0 * m * n * k + m * n);
  EXPECT_DOUBLE_EQ(addmm_row->bytes, 4.0 * (m * k + k * n + m * n) + 4.0 * 3 * m * n);
  // mse_loss = sub, square, mean: one row.
  const OpStats* mse = find(d, "mse_loss", Phase::forward, DType::f32);
  ASSERT_NE(mse, nullptr);
  EXPECT_EQ(mse->count, 1u);
  EXPECT_DOUBLE_EQ(mse->flops, 3.0 * m * n);
  for (const char* inner : {"matmul", "add", "sub", "square", "mean"}) {
    EXPECT_FALSE(has_op(d, inner)) << inner << " was counted on its own as well";
  }
  EXPECT_EQ(d.ops.size(), 2u);
  std::uint64_t sum = 0;
  for (const OpStats& s : d.ops) sum += s.self_ns;
  EXPECT_EQ(d.recorded_ns, sum);
}

// A custom function's forward is one row named after it, the ops it calls folded in; its
// backward is its node's row.
TEST(Profiler, ACustomFunctionIsOneRowWithTheOpsItCallsFolded) {
  const std::int64_t m = 4, n = 3, k = 5;
  Tensor a = Tensor::randn({m, k}, 2);
  a.set_requires_grad(true);
  const Tensor b = Tensor::randn({k, n}, 3);
  const runtime::CustomFunction fn{
      "my_matmul_plus_one",
      [&](runtime::FunctionContext& ctx, const std::vector<Tensor>& in) {
        ctx.save_for_backward({in[1]});
        return matmul(in[0], in[1]) + Tensor::ones({m, n});
      },
      [](runtime::FunctionContext& ctx, const Tensor& dy) {
        return std::vector<Tensor>{matmul(dy, ctx.saved_tensors()[0].transpose(0, 1)), Tensor()};
      }};
  Profile session;
  sum(runtime::apply(fn, {a, b})).backward();
  const ProfileData d = session.data();
  const OpStats* row = find(d, "my_matmul_plus_one", Phase::forward, DType::f32);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->count, 1u);
  EXPECT_DOUBLE_EQ(row->flops, 2.0 * m * n * k + m * n);  // the matmul's and the add's work
  for (const char* inner : {"matmul", "add"}) {
    EXPECT_FALSE(has_op(d, inner)) << inner << " was counted on its own as well";
  }
  EXPECT_NE(find(d, "my_matmul_plus_one", Phase::backward, DType::f32), nullptr);
}

TEST(Profiler, ForwardAndBackwardOfATinyLinear) {
  nn::Linear layer(4, 3, true, /*seed=*/1);
  const Tensor x = Tensor::randn({2, 4}, 2);  // needs no gradient: dX is skipped
  Profile session;
  Tensor loss = sum(layer(x));
  loss.backward();
  const ProfileData d = session.data();
  const OpStats* fwd = find(d, "linear", Phase::forward, DType::f32);
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->count, 1u);
  EXPECT_DOUBLE_EQ(fwd->flops, 2.0 * 2 * 3 * 4 + 2 * 3);  // GEMM plus the bias adds
  const OpStats* bwd = find(d, "linear", Phase::backward, DType::f32);
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(bwd->count, 1u);
  EXPECT_DOUBLE_EQ(bwd->flops, 2.0 * 3 * 4 * 2 + 2 * 3);  // dW = dY^T X, db = column sums of dY
  ASSERT_NE(find(d, "sum", Phase::backward, DType::f32), nullptr);
  const OpStats* acc = find(d, "accumulate_grad", Phase::backward, DType::f32);
  ASSERT_NE(acc, nullptr);
  EXPECT_EQ(acc->count, 2u);  // weight and bias
  // The linear's fresh dW and db become the .grads as they are (adopted, not copied): no bytes.
  EXPECT_DOUBLE_EQ(acc->bytes, 0.0);
  // A second backward adds into the existing .grads: each gradient read, .grad read and written.
  session.clear();
  sum(layer(x)).backward();
  const ProfileData d2 = session.data();  // find() points into it: keep it alive
  const OpStats* acc2 = find(d2, "accumulate_grad", Phase::backward, DType::f32);
  ASSERT_NE(acc2, nullptr);
  EXPECT_GT(acc2->bytes, 0.0);
}

TEST(Profiler, BackwardThatOnlyPassesGradientsOnDoesNoWork) {
  const Tensor a = Tensor::randn({4, 5}, 1).set_requires_grad();
  const Tensor b = Tensor::randn({4, 5}, 2).set_requires_grad();
  Profile session;
  Tensor s = sum(add(a, b).reshape({20}));
  s.backward();
  const ProfileData d = session.data();
  for (const char* node : {"add", "reshape"}) {  // dy handed on as is, or as a view
    const OpStats* row = find(d, node, Phase::backward, DType::f32);
    ASSERT_NE(row, nullptr) << node;
    EXPECT_EQ(row->flops, 0.0) << node;
    EXPECT_EQ(row->bytes, 0.0) << node;
  }
  const OpStats* sum_row = find(d, "sum", Phase::backward, DType::f32);  // writes dx
  ASSERT_NE(sum_row, nullptr);
  EXPECT_DOUBLE_EQ(sum_row->flops, 20.0);
  EXPECT_DOUBLE_EQ(sum_row->bytes, 4.0 * (1 + 20));
}

TEST(Profiler, AutocastBf16LinearIsRecordedInBf16AndItsCastsCounted) {
  nn::Linear layer(8, 4, true, /*seed=*/1);
  const Tensor x = Tensor::randn({5, 8}, 2);
  Profile session;
  {
    runtime::Autocast region(true, DType::bf16);
    layer(x);
  }
  const ProfileData d = session.data();
  ASSERT_NE(find(d, "linear", Phase::forward, DType::bf16), nullptr);
  EXPECT_EQ(find(d, "linear", Phase::forward, DType::f32), nullptr);
  const OpStats* casts = find(d, "cast", Phase::cast, DType::bf16);
  ASSERT_NE(casts, nullptr);
  EXPECT_EQ(casts->count, 3u);  // x, weight and bias
  EXPECT_EQ(d.cast_count, 3u);
  EXPECT_EQ(casts->bytes, (4.0 + 2.0) * (5 * 8 + 4 * 8 + 4));  // f32 read, bf16 written
  // bf16 GEMM: 2-byte operands.
  EXPECT_DOUBLE_EQ(find(d, "linear", Phase::forward, DType::bf16)->bytes,
                   2.0 * (5 * 8 + 4 * 8 + 5 * 4) + 2.0 * 4);
  EXPECT_TRUE(d.could_run_lower.empty());
}

TEST(Profiler, F32GemmsOutsideAutocastCouldRunLower) {
  const Tensor a = Tensor::randn({4, 6}, 1).set_requires_grad();
  const Tensor b = Tensor::randn({6, 3}, 2);
  Profile session;
  Tensor y = matmul(a, b);
  sum(y).backward();
  const ProfileData d = session.data();
  const LowerPrecisionCandidate* fwd = find_lower(d, "matmul", Phase::forward);
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->count, 1u);
  EXPECT_NE(fwd->reason.find("lower_precision"), std::string::npos) << fwd->reason;
  ASSERT_NE(find_lower(d, "matmul", Phase::backward), nullptr);
  // sum is an fp32-policy op: f32 is where it belongs.
  EXPECT_EQ(find_lower(d, "sum", Phase::forward), nullptr);
}

TEST(Profiler, Bf16GemmsUnderAutocastAreNotListed) {
  const Tensor a = Tensor::randn({4, 6}, 1), b = Tensor::randn({6, 3}, 2);
  Profile session;
  {
    runtime::Autocast region(true, DType::bf16);
    matmul(a, b);
  }
  EXPECT_TRUE(session.data().could_run_lower.empty());
}

TEST(Profiler, PassThroughOpFedF32ByAnFp32PolicyOpCouldRunLower) {
  const Tensor x = Tensor::randn({4, 16}, 1).to(DType::bf16).set_requires_grad();
  Profile session;
  Tensor h;
  {
    runtime::Autocast region(true, DType::bf16);
    const Tensor s = softmax(x, -1);  // fp32 policy: f32 out
    h = relu(s);                      // pass-through: stays f32 though bf16 would do
    h = tanh(h);                      // fed f32 by a listed op: listed too
  }
  sum(h).backward();
  const ProfileData d = session.data();
  const LowerPrecisionCandidate* r = find_lower(d, "relu", Phase::forward);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->reason.find("softmax"), std::string::npos) << r->reason;
  const LowerPrecisionCandidate* t = find_lower(d, "tanh", Phase::forward);
  ASSERT_NE(t, nullptr);
  EXPECT_NE(t->reason.find("relu"), std::string::npos) << t->reason;
  EXPECT_NE(find_lower(d, "relu", Phase::backward), nullptr);
  EXPECT_EQ(find_lower(d, "softmax", Phase::forward), nullptr);
}

TEST(Profiler, PassThroughOpFedFreshF32IsNotListed) {
  const Tensor x = Tensor::randn({4, 16}, 1);
  Profile session;
  {
    runtime::Autocast region(true, DType::bf16);
    relu(x);  // a model input, not the output of an fp32-policy op
  }
  EXPECT_TRUE(session.data().could_run_lower.empty());
}

TEST(Profiler, SessionsArePerThread) {
  Profile session;
  std::thread other([] {
    EXPECT_FALSE(profiling());
    relu(Tensor::randn({16}, 1));
  });
  other.join();
  EXPECT_TRUE(session.data().ops.empty());
  EXPECT_THROW(Profile second, StateError);
}

TEST(Profiler, ClearForgetsRecords) {
  Profile session;
  relu(Tensor::randn({16}, 1));
  ASSERT_FALSE(session.data().ops.empty());
  session.clear();
  EXPECT_TRUE(session.data().ops.empty());
}

// A custom function whose forward sleeps `ms` (its backward passes dy on).
runtime::CustomFunction sleeping(const char* name, int ms) {
  return runtime::CustomFunction{
      name,
      [ms](runtime::FunctionContext&, const std::vector<Tensor>& in) {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        return in[0] + 1.0f;
      },
      [](runtime::FunctionContext&, const Tensor& dy) { return std::vector<Tensor>{dy}; }};
}

TEST(Profiler, AnOpsTimeIsSettledOnceWhenDataIsRead) {
  const Tensor x = Tensor::randn({8}, 1);
  Profile session;
  runtime::apply(sleeping("nap", 3), {x});
  const ProfileData d = session.data();
  const OpStats* row = find(d, "nap", Phase::forward, DType::f32);
  ASSERT_NE(row, nullptr);
  EXPECT_GE(row->self_ns, 3'000'000u);
  EXPECT_EQ(d.recorded_ns, std::accumulate(d.ops.begin(), d.ops.end(), std::uint64_t{0},
                                           [](std::uint64_t a, const OpStats& s) { return a + s.self_ns; }));
  // Reading again adds nothing; a second call adds its own time once.
  const ProfileData reread = session.data();
  ASSERT_NE(find(reread, "nap", Phase::forward, DType::f32), nullptr);
  EXPECT_EQ(find(reread, "nap", Phase::forward, DType::f32)->self_ns, row->self_ns);
  runtime::apply(sleeping("nap", 3), {x});
  const ProfileData later = session.data();
  const OpStats* again = find(later, "nap", Phase::forward, DType::f32);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->count, 2u);
  EXPECT_GE(again->self_ns, row->self_ns + 3'000'000u);
  EXPECT_LT(again->self_ns, 2 * row->self_ns + 100'000'000u) << "counted more than once";
}

TEST(Profiler, ACastsTimeIsItsOwnNotItsCallers) {
  // The cast inside the op has its own row; the op's self time excludes the cast's, so the two
  // rows' times add up to at most the outer interval.
  const Tensor x = Tensor::randn({1 << 16}, 1);
  const runtime::CustomFunction outer{
      "outer",
      [](runtime::FunctionContext&, const std::vector<Tensor>& in) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        return cast(in[0], DType::bf16);
      },
      [](runtime::FunctionContext&, const Tensor& dy) { return std::vector<Tensor>{dy}; }};
  Profile session;
  const auto t0 = std::chrono::steady_clock::now();
  runtime::apply(outer, {x});
  const auto wall = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  const ProfileData d = session.data();
  const OpStats* op = find(d, "outer", Phase::forward, DType::bf16);
  const OpStats* c = find(d, "cast", Phase::cast, DType::bf16);
  ASSERT_NE(op, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_GE(op->self_ns, 2'000'000u);
  EXPECT_GT(c->self_ns, 0u);
  EXPECT_LE(op->self_ns + c->self_ns, wall);
}

TEST(Profiler, ManyOpsSettleInBatchesAndKeepEveryCount) {
  // More recorded scopes than the recorder keeps unsettled (64k): the batch settled at a
  // top-level op's start loses no count and no time.
  const Tensor x = Tensor::randn({4}, 1);
  Profile session;
  runtime::apply(sleeping("first_nap", 2), {x});
  const std::size_t n = (std::size_t{1} << 16) + 100;
  for (std::size_t i = 0; i < n; ++i) relu(x);
  const ProfileData d = session.data();
  const OpStats* r = find(d, "relu", Phase::forward, DType::f32);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->count, n);
  EXPECT_GE(find(d, "first_nap", Phase::forward, DType::f32)->self_ns, 2'000'000u);
}

TEST(Profiler, ScopeLeftByAnExceptionRecordsNothing) {
  const Tensor a = Tensor::randn({2, 3}, 1), b = Tensor::randn({4, 5}, 2);
  Profile session;
  EXPECT_THROW(matmul(a, b), ShapeError);
  relu(a);  // the scope stack is intact: this op is recorded as an outermost op
  const ProfileData d = session.data();
  EXPECT_FALSE(has_op(d, "matmul"));
  const OpStats* r = find(d, "relu", Phase::forward, DType::f32);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->count, 1u);
}

TEST(RooflineVerdict, AgainstTheRidgePoint) {
  MachinePeaks peaks;
  peaks.gflops = 100;
  peaks.gbytes_per_s = 10;  // ridge 10 FLOP/byte
  EXPECT_DOUBLE_EQ(peaks.ridge(), 10.0);
  EXPECT_STREQ(roofline_verdict(1000, 10, peaks), "compute-bound");
  EXPECT_STREQ(roofline_verdict(100, 10, peaks), "compute-bound");  // on the ridge
  EXPECT_STREQ(roofline_verdict(99, 10, peaks), "memory-bound");
  EXPECT_STREQ(roofline_verdict(0, 10, peaks), "n/a");
  EXPECT_STREQ(roofline_verdict(10, 0, peaks), "n/a");
  EXPECT_STREQ(roofline_verdict(10, 10, MachinePeaks{}), "n/a");
}

TEST(StepProfile, MlpStepsGiveATableAndStableJson) {
  const MachinePeaks peaks = measure_machine_peaks(64, 1, 1);
  EXPECT_GT(peaks.gflops, 0.0);
  EXPECT_GT(peaks.gbytes_per_s, 0.0);
  const StepProfile p = profile_training_steps("mlp", "bf16", 16, 2, 1, peaks);
  EXPECT_EQ(p.steps, 2);
  EXPECT_EQ(p.precision, "bf16");
  const OpStats* fwd = find(p.data, "linear", Phase::forward, DType::bf16);
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->count, 6u);  // 3 layers x 2 steps
  // Forward GEMMs (plus bias adds) of 784-256-128-10 at batch 16, twice.
  EXPECT_DOUBLE_EQ(fwd->flops, 2.0 * (2.0 * 16 * (784.0 * 256 + 256.0 * 128 + 128.0 * 10) +
                                      16.0 * (256 + 128 + 10)));
  ASSERT_NE(find(p.data, "linear", Phase::backward, DType::bf16), nullptr);
  const OpStats* adam = find(p.data, "Adam", Phase::optimizer, DType::f32);
  ASSERT_NE(adam, nullptr);
  EXPECT_EQ(adam->count, 2u);
  EXPECT_DOUBLE_EQ(adam->flops, 2.0 * (784.0 * 256 + 256 + 256.0 * 128 + 128 + 128.0 * 10 + 10));
  EXPECT_GT(p.data.cast_count, 0u);

  const std::string text = format_step_profile(p);
  EXPECT_NE(text.find("GFLOP/s"), std::string::npos);
  EXPECT_NE(text.find("ridge"), std::string::npos);
  EXPECT_NE(text.find("linear"), std::string::npos);
  EXPECT_NE(text.find("could run lower"), std::string::npos);
  EXPECT_NE(text.find("casts:"), std::string::npos);

  const nlohmann::json j = nlohmann::json::parse(to_json(p));
  for (const char* key : {"model", "precision", "batch_size", "threads", "steps", "warmup",
                          "machine", "wall_ms", "recorded_ms", "unattributed_ms", "ops", "casts",
                          "could_run_lower", "could_run_lower_ms"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* key : {"peak_gflops", "peak_gbytes_per_s", "ridge_flop_per_byte"}) {
    EXPECT_TRUE(j["machine"].contains(key)) << key;
  }
  ASSERT_EQ(j["ops"].size(), p.data.ops.size());
  for (const char* key : {"op", "phase", "dtype", "count", "total_ms", "share_pct", "flops",
                          "bytes", "gflops", "intensity", "verdict", "roof_pct"}) {
    EXPECT_TRUE(j["ops"][0].contains(key)) << key;
  }
  for (const nlohmann::json& op : j["ops"]) {  // roof% = attained over min(compute, bandwidth roof)
    if (op["roof_pct"].is_null()) continue;
    // The compute roof is the GEMM peak of the op's dtype, as the floor's.
    const double peak = op["dtype"] == "bf16" && peaks.bf16_gflops > 0 ? peaks.bf16_gflops : peaks.gflops;
    const double roof = std::min(peak, op["intensity"].get<double>() * peaks.gbytes_per_s);
    EXPECT_NEAR(op["roof_pct"].get<double>(), 100.0 * op["gflops"].get<double>() / roof,
                1e-9 * op["roof_pct"].get<double>() + 1e-12);
  }
  EXPECT_EQ(j["casts"]["count"].get<std::uint64_t>(), p.data.cast_count);
  EXPECT_EQ(j["model"], "mlp");
}

TEST(StepProfile, Fp32MlpListsItsGemmsAsCouldRunLower) {
  MachinePeaks peaks;
  peaks.gflops = 1;
  peaks.gbytes_per_s = 1;
  const StepProfile p = profile_training_steps("mlp", "fp32", 8, 1, 0, peaks);
  EXPECT_NE(find_lower(p.data, "linear", Phase::forward), nullptr);
  EXPECT_NE(find_lower(p.data, "linear", Phase::backward), nullptr);
  // relu follows an f32 linear that could have run in bf16.
  const LowerPrecisionCandidate* r = find_lower(p.data, "relu", Phase::forward);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->reason.find("linear"), std::string::npos) << r->reason;
  EXPECT_EQ(p.data.cast_count, 0u);
}

TEST(StepProfile, ProfilesTheTransformerSizesItIsGiven) {
  MachinePeaks peaks;
  peaks.gflops = 1;
  peaks.gbytes_per_s = 1;
  const auto linear_flops = [&](std::int64_t layers) {
    models::ModelOptions sizes;
    sizes.layers = layers;
    sizes.width = 32;
    sizes.heads = 2;
    sizes.context = 16;
    const StepProfile p = profile_training_steps("gpt-mini", "fp32", 2, 1, 0, peaks, 0, sizes);
    double flops = 0;
    for (const OpStats& row : p.data.ops) {
      // The blocks' MLPs run their two linears as one op (gelu_mlp).
      if (row.op == "linear" || row.op == "gelu_mlp") flops += row.flops;
    }
    return flops;
  };
  const double one = linear_flops(1), three = linear_flops(3);
  ASSERT_GT(one, 0.0);
  // Each block adds the same linear layers (the head is shared): 3 blocks cost more than 2x one.
  EXPECT_GT(three, 2.0 * one);
  EXPECT_LT(three, 3.0 * one);
}

TEST(StepProfile, AnOpsFloorIsItsSlowerRooflineLimitAtTheGemmPeakOfItsDtype) {
  MachinePeaks peaks;
  peaks.gflops = 100;        // f32 GEMMs
  peaks.gbytes_per_s = 10;
  OpStats gemm;
  gemm.dtype = DType::f32;
  gemm.flops = 1e9;          // 10 ms at 100 GFLOP/s
  gemm.bytes = 1e7;          // 1 ms at 10 GB/s
  EXPECT_DOUBLE_EQ(floor_ms(gemm, peaks), 10.0);
  OpStats pass = gemm;
  pass.flops = 1e6;          // 0.01 ms of arithmetic
  pass.bytes = 1e8;          // 10 ms of memory traffic
  EXPECT_DOUBLE_EQ(floor_ms(pass, peaks), 10.0);
  gemm.dtype = DType::bf16;
  EXPECT_DOUBLE_EQ(floor_ms(gemm, peaks), 10.0);  // no bf16 peak measured: the f32 one
  peaks.bf16_gflops = 200;
  EXPECT_DOUBLE_EQ(floor_ms(gemm, peaks), 5.0);
}

TEST(StepProfile, NamesTheOpsAboveTheFloor) {
  MachinePeaks peaks;
  peaks.gflops = 1e6;  // an unreachable machine: every op is far above its floor
  peaks.gbytes_per_s = 1e6;
  const StepProfile p = profile_training_steps("mlp", "fp32", 8, 1, 0, peaks);
  const std::string text = format_step_profile(p, 0);
  EXPECT_NE(text.find("floor: "), std::string::npos) << text;
  // The largest excess comes first: on this machine every op is above its floor by its own time.
  const std::size_t at = text.find("Above it most:\n  ");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NE(text.find("above it", at), std::string::npos) << text;
  const auto j = nlohmann::json::parse(to_json(p));
  EXPECT_GT(j["floor_ms"].get<double>(), 0.0);
  EXPECT_LT(j["floor_ms"].get<double>(), j["wall_ms"].get<double>());
}

TEST(StepProfile, BadArgumentsThrow) {
  const MachinePeaks peaks;
  EXPECT_THROW(profile_training_steps("vgg", "bf16", 0, 2, 0, peaks), ValueError);
  EXPECT_THROW(profile_training_steps("mlp", "fp9", 0, 2, 0, peaks), ValueError);
  EXPECT_THROW(profile_training_steps("mlp", "bf16", 0, 0, 0, peaks), ValueError);
  EXPECT_THROW(profile_training_steps("mlp", "bf16", 0, 1, -1, peaks), ValueError);
  EXPECT_THROW(measure_machine_peaks(8), ValueError);
  EXPECT_FALSE(profiling());  // no session left behind
}

}  // namespace
}  // namespace mixprec::runtime
