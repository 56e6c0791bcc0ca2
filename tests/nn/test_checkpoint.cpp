// Activation checkpointing (nn::Checkpoint, GptConfig::checkpoint_activations): gradients, losses
// and dropout counters bit-identical to the unwrapped model in fp32, bf16 and fp16 with a
// GradScaler and accumulation; multi-input modules; the activation memory it saves, measured
// with the tracker; eval and no-grad passing straight through; state_dict keys unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>

#include "mixprec/runtime/autocast.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "mixprec/core/memory.h"
#include "mixprec/nn/checkpoint.h"
#include "mixprec/nn/gpt.h"
#include "mixprec/nn/transformer.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/reduce.h"
#include "mixprec/train/train_step.h"

namespace mixprec::nn {
namespace {

// The bits of a tensor's values widened to f32 (exact for every 16-bit dtype): == on these is
// bit identity, with -0 != +0 and NaN == NaN of the same payload.
std::vector<std::uint32_t> bits(const Tensor& t) {
  std::vector<std::uint32_t> out;
  for (float v : t.to(DType::f32).to_vector()) out.push_back(std::bit_cast<std::uint32_t>(v));
  return out;
}

GptConfig small_gpt(bool checkpointed) {
  return GptConfig{.vocab_size = 16, .context = 16, .d_model = 16, .n_heads = 2, .n_layers = 2,
                   .dropout = 0.1f, .seed = 5, .checkpoint_activations = checkpointed};
}

struct Tokens {
  std::vector<std::int64_t> inputs, targets;
};

Tokens tokens(int micro, std::int64_t batch, std::int64_t t) {
  Tokens out;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i < t; ++i) {
      out.inputs.push_back((3 * b + 5 * i + micro) % 16);
      out.targets.push_back((3 * b + 5 * i + micro + 1) % 16);
    }
  }
  return out;
}

// What a training run exposes to comparison: every gradient after unscaling, every loss, the
// dropout counters, the parameters at the end and the loss scale.
struct RunRecord {
  std::vector<std::map<std::string, std::vector<std::uint32_t>>> grads;  // per optimizer step
  std::vector<double> losses;
  std::vector<bool> applied;
  std::vector<std::uint64_t> counters;
  std::map<std::string, std::vector<std::uint32_t>> params;
  double scale = 0;
};

// Two optimizer steps of accum = 2 micro-batches through TrainStep (autocast, GradScaler for
// fp16), recording the unscaled gradients before each update.
RunRecord train_gpt(const char* precision, bool checkpointed) {
  GPT gpt(small_gpt(checkpointed));
  gpt.train();
  train::TrainStep step(gpt, train::StepConfig{.precision = precision, .optimizer = "adamw",
                                               .lr = 1e-2f, .accum = 2});
  const std::int64_t batch = 2, t = 8;
  RunRecord r;
  for (int s = 0; s < 2; ++s) {
    for (int micro = 0; micro < 2; ++micro) {
      const Tokens data = tokens(2 * s + micro, batch, t);
      r.losses.push_back(step.accumulate([&] {
        return cross_entropy(gpt.logits(data.inputs, batch, t).reshape({batch * t, 16}), data.targets);
      }));
    }
    step.unscale_and_clip();
    auto& grads = r.grads.emplace_back();
    for (const auto& [name, p] : gpt.named_parameters()) {
      EXPECT_TRUE(p.grad().defined()) << precision << " " << name;
      if (p.grad().defined()) grads[name] = bits(p.grad());
    }
    r.applied.push_back(step.apply());
  }
  r.counters = gpt.random_state();
  for (const auto& [name, p] : gpt.named_parameters()) r.params[name] = bits(p);
  r.scale = step.scaler().get_scale();
  return r;
}

TEST(Checkpoint, GptGradientsAreBitIdenticalInEveryPrecisionWithAccumulation) {
  for (const char* precision : {"fp32", "bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    const RunRecord plain = train_gpt(precision, false), ckpt = train_gpt(precision, true);
    EXPECT_EQ(ckpt.losses, plain.losses);
    EXPECT_EQ(ckpt.applied, plain.applied);
    EXPECT_EQ(plain.applied, (std::vector<bool>{true, true}));  // real updates, not skipped steps
    ASSERT_EQ(ckpt.grads.size(), plain.grads.size());
    for (std::size_t s = 0; s < plain.grads.size(); ++s) {
      ASSERT_EQ(ckpt.grads[s].size(), plain.grads[s].size());
      for (const auto& [name, g] : plain.grads[s]) {
        EXPECT_TRUE(ckpt.grads[s].at(name) == g) << "step " << s << ": gradient of " << name;
      }
    }
    for (const auto& [name, p] : plain.params) EXPECT_TRUE(ckpt.params.at(name) == p) << name;
    EXPECT_EQ(ckpt.scale, plain.scale);
    // The masks are the same draws: every Dropout and attention counter ends where the
    // unwrapped model's does (4 forwards: GPT's dropout + 2 x (attention, 2 dropouts) each).
    EXPECT_EQ(ckpt.counters, plain.counters);
    EXPECT_EQ(plain.counters, std::vector<std::uint64_t>(7, 4));
  }
}

// A module with several inputs: cross-attention with a mask, queries from a leaf and keys and
// values from one non-leaf tensor (passed twice), self-attention given {x, x, x}; in fp32 and
// bf16 autocast, forward in the region and backward after it, as TrainStep does.
TEST(Checkpoint, MultiInputModuleGradientsAreBitIdentical) {
  const Tensor r = Tensor::randn({2, 5, 8}, 21);
  Tensor mask = Tensor::zeros({1, 1, 5, 6});
  static_cast<float*>(mask.data_ptr())[3] = -1e9f;
  for (bool autocast : {false, true}) {
    SCOPED_TRACE(autocast ? "bf16 autocast" : "fp32");
    struct Result {
      std::vector<std::uint32_t> out, dq, dkv, dx;
      std::map<std::string, std::vector<std::uint32_t>> dparams;
      std::uint64_t calls;
    };
    auto run = [&](bool checkpointed) {
      auto mha = std::make_shared<MultiHeadAttention>(8, 2, false, 0.2f, true, 4);
      std::shared_ptr<Module> m = checkpointed ? std::shared_ptr<Module>(checkpoint(mha)) : mha;
      m->train();
      Tensor q = Tensor::randn({2, 5, 8}, 22), kv_src = Tensor::randn({2, 6, 8}, 23);
      Tensor x = Tensor::randn({2, 5, 8}, 24);
      for (Tensor* t : {&q, &kv_src, &x}) t->set_requires_grad(true);
      Tensor cross, self;
      {
        runtime::Autocast region(autocast, DType::bf16);
        const Tensor kv = tanh(kv_src);  // a non-leaf input: its producer gets the gradient
        cross = (*m)({q, kv, kv, mask});
        self = (*m)({x, x, x});
      }
      if (checkpointed) {
        EXPECT_STREQ(cross.grad_fn()->name(), "checkpoint");  // one node, nothing below it
      }
      sum(mul(add(cross, self), r)).backward();
      Result res{bits(cross), bits(q.grad()), bits(kv_src.grad()), bits(x.grad()), {}, mha->calls()};
      for (const auto& [name, p] : m->named_parameters()) res.dparams[name] = bits(p.grad());
      return res;
    };
    const Result plain = run(false), ckpt = run(true);
    EXPECT_TRUE(ckpt.out == plain.out);
    EXPECT_TRUE(ckpt.dq == plain.dq);
    EXPECT_TRUE(ckpt.dkv == plain.dkv);
    EXPECT_TRUE(ckpt.dx == plain.dx);
    EXPECT_EQ(ckpt.calls, plain.calls);
    EXPECT_EQ(plain.calls, 2u);
    ASSERT_EQ(ckpt.dparams.size(), plain.dparams.size());
    for (const auto& [name, g] : plain.dparams) EXPECT_TRUE(ckpt.dparams.at(name) == g) << name;
  }
}

// fp16 with a GradScaler written out by hand: the recomputed block's parameters receive
// gradients tagged with the loss scale, so unscale divides them like every other gradient.
TEST(Checkpoint, ScaledGradientsCarryTheLossScaleThroughTheRecompute) {
  auto block = std::make_shared<TransformerBlock>(8, 2, true, 0.1f, 3);
  Checkpoint ckpt(block);
  ckpt.train();
  Tensor x = Tensor::randn({1, 4, 8}, 30);
  x.set_requires_grad(true);
  amp::GradScaler scaler(amp::GradScalerOptions{.init_scale = 1024.0, .enabled = true});
  Tensor loss;
  {
    runtime::Autocast region(true, DType::f16);
    loss = sum(ckpt(x));
  }
  scaler.scale(loss).backward();
  for (const auto& [name, p] : ckpt.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad_scale(), 1024.0) << name;
  }
  EXPECT_EQ(x.grad_scale(), 1024.0);
}

// Backward run inside the autocast region that ran the forward: the region's cache holds the
// casts the no-grad forward made (no node), and must not hand them to the recompute.
TEST(Checkpoint, BackwardInsideTheAutocastRegionStillReachesTheWeights) {
  auto run = [](bool checkpointed) {
    auto block = std::make_shared<TransformerBlock>(8, 2, true, 0.0f, 6);
    std::shared_ptr<Module> m = checkpointed ? std::shared_ptr<Module>(checkpoint(block)) : block;
    const Tensor x = Tensor::randn({1, 4, 8}, 31);
    runtime::Autocast region(true, DType::bf16);
    sum((*m)(x)).backward();
    std::map<std::string, std::vector<std::uint32_t>> grads;
    for (const auto& [name, p] : m->named_parameters()) {
      EXPECT_TRUE(p.grad().defined()) << name;
      if (p.grad().defined()) grads[name] = bits(p.grad());
    }
    return grads;
  };
  EXPECT_TRUE(run(true) == run(false));
}

// Peak of the activation category over forward + backward of a GPT (context 256, 4 layers):
// checkpointing keeps one [B, T, d] input per block plus one block's activations at a time.
std::size_t activation_peak(bool checkpointed) {
  GptConfig c{.vocab_size = 16, .context = 256, .d_model = 32, .n_heads = 2, .n_layers = 4,
              .dropout = 0.1f, .seed = 2, .checkpoint_activations = checkpointed};
  GPT gpt(c);
  gpt.train();
  const Tokens data = tokens(0, 1, 256);
  const std::size_t before = memory_stats().current_of(MemoryCategory::activation);
  reset_peak_memory();
  cross_entropy(gpt.logits(data.inputs, 1, 256).reshape({256, 16}), data.targets).backward();
  return memory_stats().peak_of(MemoryCategory::activation) - before;
}

TEST(Checkpoint, GptActivationPeakIsAFractionOfTheUnwrappedOne) {
  const std::size_t plain = activation_peak(false), ckpt = activation_peak(true);
  const double ratio = static_cast<double>(plain) / static_cast<double>(ckpt);
  std::printf("[ checkpoint ] GPT context 256, 4 layers, d_model 32: activation peak %.1f KiB "
              "unwrapped, %.1f KiB checkpointed (%.2fx)\n",
              static_cast<double>(plain) / 1024.0, static_cast<double>(ckpt) / 1024.0, ratio);
  RecordProperty("activation_peak_plain_bytes", static_cast<int>(plain));
  RecordProperty("activation_peak_checkpoint_bytes", static_cast<int>(ckpt));
  EXPECT_GE(ratio, 2.0);
}

TEST(Checkpoint, EvalAndNoGradRunTheChildAsItIs) {
  auto block = std::make_shared<TransformerBlock>(8, 2, true, 0.3f, 8);
  Checkpoint ckpt(block);
  const Tensor x = Tensor::randn({2, 4, 8}, 40);
  // Eval: the child's forward, its own graph (no checkpoint node), the same values.
  ckpt.eval();
  const Tensor y = ckpt(x);
  EXPECT_STRNE(y.grad_fn()->name(), "checkpoint");
  EXPECT_EQ(bits(y), bits((*block)(x)));
  EXPECT_EQ(block->random_state(), std::vector<std::uint64_t>(3, 0));  // no masks in eval
  // Training without grad: no node at all, the same masks as the unwrapped block draws.
  ckpt.train();
  Tensor a, b;
  {
    runtime::NoGradGuard no_grad;
    a = ckpt(x);
    block->set_random_state({0, 0, 0});
    b = (*block)(x);
  }
  EXPECT_FALSE(a.requires_grad());
  EXPECT_EQ(a.grad_fn(), nullptr);
  EXPECT_EQ(bits(a), bits(b));
  EXPECT_EQ(block->random_state(), std::vector<std::uint64_t>(3, 1));
  // GPT in eval: identical logits with and without checkpointing.
  GPT plain(small_gpt(false)), wrapped(small_gpt(true));
  plain.eval();
  wrapped.eval();
  const Tokens data = tokens(1, 2, 8);
  EXPECT_EQ(bits(wrapped.logits(data.inputs, 2, 8)), bits(plain.logits(data.inputs, 2, 8)));
  EXPECT_TRUE(wrapped.config().checkpoint_activations);
  EXPECT_FALSE(plain.config().checkpoint_activations);
}

TEST(Checkpoint, StateDictKeysAndPathsAreThoseOfTheUnwrappedModel) {
  GPT plain(small_gpt(false)), wrapped(small_gpt(true));
  std::vector<std::string> a, b;
  for (const auto& [name, t] : plain.named_parameters()) a.push_back(name);
  for (const auto& [name, t] : wrapped.named_parameters()) b.push_back(name);
  EXPECT_EQ(a, b);  // same order too: optimizer state lines up
  std::vector<std::string> ka, kb;
  for (const auto& [name, t] : plain.state_dict()) ka.push_back(name);
  for (const auto& [name, t] : wrapped.state_dict()) kb.push_back(name);
  EXPECT_EQ(ka, kb);
  EXPECT_NE(std::find(ka.begin(), ka.end(), "blocks.1.attn.qkv_proj.weight"), ka.end());
  // Files interchange: a strict load either way.
  wrapped.load_state_dict(plain.state_dict(), /*strict=*/true);
  plain.load_state_dict(wrapped.state_dict(), /*strict=*/true);
  // The wrapped block reports the path of the block it replaces.
  const auto& child = std::static_pointer_cast<Checkpoint>(wrapped.children()[3].second)->child();
  EXPECT_EQ(child->type_name(), "TransformerBlock");
  EXPECT_EQ(child->path(), "blocks.0");
  EXPECT_EQ(child->children()[0].second->path(), "blocks.0.ln1");
  EXPECT_EQ(join_path("", "a"), "a");
  EXPECT_EQ(join_path("a", ""), "a");
  EXPECT_EQ(join_path("a", "b"), "a.b");
}

TEST(Checkpoint, RandomStateRoundTripsAndRejectsAnotherTree) {
  TransformerBlock block(8, 2, true, 0.1f, 1);
  block.train();
  const Tensor x = Tensor::randn({1, 3, 8}, 50);
  const std::vector<std::uint64_t> start = block.random_state();
  const std::vector<std::uint32_t> first = bits(block(x));
  EXPECT_NE(block.random_state(), start);
  EXPECT_NE(bits(block(x)), first);  // new masks
  block.set_random_state(start);
  EXPECT_EQ(bits(block(x)), first);  // replayed
  EXPECT_THROW(block.set_random_state({1, 2}), ValueError);
  EXPECT_EQ(block.random_state(), std::vector<std::uint64_t>(3, 1));  // unchanged by the throw
}

TEST(Checkpoint, RefusesToReplayAForwardItCannotReproduce) {
  auto block = std::make_shared<TransformerBlock>(8, 2, true, 0.1f, 2);
  Checkpoint ckpt(block);
  ckpt.train();
  Tensor x = Tensor::randn({1, 3, 8}, 60);
  x.set_requires_grad(true);
  {
    Tensor h = mul(x, x);  // a non-leaf input, later changed in place
    const Tensor y = ckpt(h);
    h.bump_version();
    EXPECT_THROW(sum(y).backward(), StateError);
  }
  {
    const Tensor y = ckpt(x);
    ckpt.eval();
    EXPECT_THROW(sum(y).backward(), StateError);
    ckpt.train();
  }
  EXPECT_THROW(Checkpoint(nullptr), ValueError);
}

}  // namespace
}  // namespace mixprec::nn
