// ZeRO-1's pieces that need no second process: the layout of ShardedParameters (views that share
// their parameters' storage), the full-state translation (a sharded optimizer's gathered state
// equals an unsharded optimizer's, and loads back so the next steps agree bit for bit), the
// scaler's found-inf agreement hook, clip_grad_norm's partial-total hook, and TrainStep refusing
// --shard-optimizer in a single process. The multi-rank behaviour: tests/dist/zero.sh (mpirun).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/core/error.h"
#include "mixprec/dist/sharded_parameters.h"
#include "mixprec/dist/single_process.h"
#include "mixprec/models/zoo.h"
#include "mixprec/optim/adam.h"
#include "mixprec/optim/clip_grad.h"
#include "mixprec/train/train_step.h"

namespace mixprec {
namespace {

std::vector<Tensor> leaves(const std::vector<Shape>& shapes, std::uint64_t seed) {
  std::vector<Tensor> out;
  for (const Shape& s : shapes) {
    Tensor t = Tensor::randn(s, seed++);
    t.set_requires_grad(true);
    out.push_back(t);
  }
  return out;
}

void set_grads(const std::vector<Tensor>& params, std::uint64_t seed) {
  for (const Tensor& p : params) p.set_grad(Tensor::randn(p.shape(), seed++));
}

TEST(ShardedParameters, OneRankHoldsEveryParameterAsAViewOfItsStorage) {
  const dist::SingleProcess one;
  const std::vector<Tensor> params = leaves({{3, 4}, {5}, {2, 2, 2}}, 1);
  const dist::ShardedParameters shards(one, params);
  EXPECT_EQ(shards.total(), 12u + 5u + 8u);
  ASSERT_EQ(shards.pieces().size(), 3u);
  std::size_t flat = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const dist::ParameterPiece& piece = shards.pieces()[i];
    EXPECT_EQ(piece.param, i);
    EXPECT_EQ(piece.begin, 0u);
    EXPECT_EQ(piece.flat, flat);
    EXPECT_EQ(piece.count, static_cast<std::size_t>(params[i].numel()));
    EXPECT_TRUE(piece.view.requires_grad() && piece.view.is_leaf());
    EXPECT_EQ(piece.view.data_ptr(), params[i].data_ptr()) << "the view must alias the parameter";
    flat += piece.count;
  }
  // Writing through a view changes the parameter: the optimizer updates in place.
  static_cast<float*>(shards.pieces()[1].view.data_ptr())[4] = 42.0f;
  EXPECT_EQ(params[1].to_vector()[4], 42.0f);
}

TEST(ShardedParameters, RefusesSixteenBitParameters) {
  const dist::SingleProcess one;
  std::vector<Tensor> params = leaves({{4}}, 3);
  params.push_back(Tensor::randn({4}, 4, DType::bf16));
  params.back().set_requires_grad(true);
  EXPECT_THROW(dist::ShardedParameters(one, params), ValueError);
}

TEST(ShardedParameters, GatheredStateIsTheUnshardedOptimizersAndLoadsBack) {
  const dist::SingleProcess one;
  const std::vector<Shape> shapes{{6, 3}, {3}, {7}};
  const std::vector<Tensor> plain_params = leaves(shapes, 10);
  const std::vector<Tensor> sharded_params = leaves(shapes, 10);
  optim::AdamW plain(plain_params, optim::AdamWOptions{.lr = 1e-2f, .weight_decay = 0.1f});
  const dist::ShardedParameters shards(one, sharded_params);
  optim::AdamW sharded(shards.views(), optim::AdamWOptions{.lr = 1e-2f, .weight_decay = 0.1f});
  for (std::uint64_t step = 0; step < 3; ++step) {
    set_grads(plain_params, 100 + 10 * step);
    set_grads(sharded_params, 100 + 10 * step);
    for (const dist::ParameterPiece& piece : shards.pieces()) {
      piece.view.set_grad(sharded_params[piece.param].grad().reshape({piece.view.numel()}));
    }
    plain.step();
    sharded.step();
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ(plain_params[i].to_vector(), sharded_params[i].to_vector()) << "parameter " << i;
  }
  const optim::OptimizerState want = plain.state();
  const optim::OptimizerState got = shards.gather_state(sharded);
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (std::size_t k = 0; k < want.tensors.size(); ++k) {
    EXPECT_EQ(got.tensors[k].first, want.tensors[k].first);
    EXPECT_EQ(got.tensors[k].second.shape(), want.tensors[k].second.shape());
    EXPECT_EQ(got.tensors[k].second.to_vector(), want.tensors[k].second.to_vector()) << want.tensors[k].first;
  }
  std::vector<std::string> names;
  for (const auto& [name, t] : want.tensors) names.push_back(name);
  EXPECT_EQ(shards.full_tensor_names(sharded), names);
  for (const auto& [name, value] : want.scalars) {
    bool found = false;
    for (const auto& [n2, v2] : got.scalars) found = found || (n2 == name && v2 == value);
    EXPECT_TRUE(found) << "scalar " << name << " = " << value << " missing from the gathered state";
  }

  // A fresh sharded optimizer loads the unsharded state and continues bit for bit.
  std::vector<Tensor> resumed_params;
  for (const Tensor& p : plain_params) {
    resumed_params.push_back(Tensor::from_vector(p.to_vector(), p.shape()));
    resumed_params.back().set_requires_grad(true);
  }
  const dist::ShardedParameters resumed_shards(one, resumed_params);
  optim::AdamW resumed(resumed_shards.views(), optim::AdamWOptions{.lr = 1e-2f, .weight_decay = 0.1f});
  resumed_shards.load_state(resumed, want);
  set_grads(plain_params, 500);
  set_grads(resumed_params, 500);
  for (const dist::ParameterPiece& piece : resumed_shards.pieces()) {
    piece.view.set_grad(resumed_params[piece.param].grad().reshape({piece.view.numel()}));
  }
  plain.step();
  resumed.step();
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ(plain_params[i].to_vector(), resumed_params[i].to_vector()) << "parameter " << i;
  }

  // A state of another model is refused before anything changes.
  optim::OptimizerState wrong = want;
  wrong.tensors.pop_back();
  EXPECT_THROW(resumed_shards.load_state(resumed, wrong), StateError);
}

TEST(GradScaler, CombineAcrossProcessesMakesEveryRankSkipTogether) {
  amp::GradScaler scaler(amp::GradScalerOptions{.init_scale = 1024.0});
  std::vector<Tensor> params = leaves({{4}}, 7);
  optim::Adam adam(params, optim::AdamOptions{.lr = 0.1f});
  const std::vector<float> before = params[0].to_vector();
  params[0].set_grad(Tensor::full({4}, 1024.0f));
  params[0].set_grad_scale(1024.0);
  EXPECT_THROW(scaler.combine_across_processes(adam, [](bool f, float a) { return std::make_pair(f, a); }),
               StateError);
  scaler.unscale(adam);
  EXPECT_FALSE(scaler.found_inf(adam).value());
  // Another rank found an Inf in its share: this one must skip too.
  scaler.combine_across_processes(adam, [](bool found, float amax) {
    EXPECT_FALSE(found);
    return std::make_pair(true, amax);
  });
  EXPECT_FALSE(scaler.step(adam));
  scaler.update();
  EXPECT_EQ(params[0].to_vector(), before);
  EXPECT_EQ(scaler.get_scale(), 512.0);
}

TEST(ClipGradNorm, CombineGivesTheGlobalNormAndClipsByIt) {
  std::vector<Tensor> params = leaves({{2}}, 9);
  params[0].set_grad(Tensor::from_vector({3.0f, 4.0f}, {2}));
  // The other ranks' shares hold 3 times the squares of this one: the global norm is 10.
  const float norm = optim::clip_grad_norm(params, 5.0f, 2.0f, false, [](double squares) {
    EXPECT_EQ(squares, 25.0);
    return 4.0 * squares;
  });
  EXPECT_FLOAT_EQ(norm, 10.0f);
  const std::vector<float> g = params[0].grad().to_vector();
  EXPECT_NEAR(g[0], 1.5f, 1e-5f);
  EXPECT_NEAR(g[1], 2.0f, 1e-5f);
}

TEST(TrainStep, ShardOptimizerInASingleProcessIsRefusedNamingMpirun) {
  auto model = models::make_model("mlp", models::ModelOptions{});
  train::StepConfig config;
  config.precision = "fp32";
  config.shard_optimizer = true;
  const dist::SingleProcess one;
  for (const dist::Communicator* comm : {static_cast<const dist::Communicator*>(nullptr),
                                         static_cast<const dist::Communicator*>(&one)}) {
    try {
      train::TrainStep step(*model, config, comm);
      ADD_FAILURE() << "--shard-optimizer accepted in one process";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("mpirun"), std::string::npos) << e.what();
    }
  }
  config.shard_optimizer = false;
  config.wire_dtype = "int8";
  EXPECT_THROW(train::TrainStep(*model, config), ValueError);
}

}  // namespace
}  // namespace mixprec
