// StepBenchmark: FLOP counting by walking the module tree, the result and its JSON keys, the
// decision-matrix verdict and the validation of bad arguments. No timing is asserted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>

#include "env_scope.h"
#include "io/io_test_util.h"
#include "mixprec/core/error.h"
#include "mixprec/models/zoo.h"
#include "mixprec/train/machine_peaks_memory.h"
#include "mixprec/train/step_bench.h"

namespace mixprec::train {
namespace {

TEST(StepBenchFlops, MlpMatchesHandFormula) {
  const std::int64_t b = 32;
  auto model = models::make_model("mlp", 0);
  const std::vector<LayerCost> layers = count_layer_flops(*model, {b, 784});
  ASSERT_EQ(layers.size(), 3u);
  const double forward = 2.0 * b * (784.0 * 256 + 256.0 * 128 + 128.0 * 10);
  double sum = 0;
  for (const LayerCost& l : layers) {
    EXPECT_EQ(l.type, "Linear");
    EXPECT_TRUE(l.bias);
    sum += l.forward_flops;
  }
  EXPECT_DOUBLE_EQ(sum, forward);
  EXPECT_DOUBLE_EQ(training_step_flops(layers), 3.0 * forward);
  EXPECT_EQ(layers[0].path, "layers.0");
  EXPECT_EQ(layers[2].path, "layers.4");
  EXPECT_EQ(layers[1].input_shape, (Shape{b, 256}));
  EXPECT_EQ(layers[1].output_shape, (Shape{b, 128}));
  EXPECT_TRUE(model->is_training());  // the walk restores the mode it found
}

TEST(StepBenchFlops, CnnConvolutionShapesAndFlops) {
  const std::int64_t b = 4;
  auto model = models::make_model("cnn", 0);
  const std::vector<LayerCost> layers = count_layer_flops(*model, {b, 1, 28, 28});
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[0].type, "Conv2d");
  EXPECT_EQ(layers[0].output_shape, (Shape{b, 32, 28, 28}));
  EXPECT_DOUBLE_EQ(layers[0].forward_flops, 2.0 * b * 32 * 1 * 9 * 28 * 28);
  EXPECT_EQ(layers[1].input_shape, (Shape{b, 32, 14, 14}));  // after the first max pool
  EXPECT_DOUBLE_EQ(layers[1].forward_flops, 2.0 * b * 64 * 32 * 9 * 14 * 14);
  EXPECT_EQ(layers[2].type, "Linear");
  EXPECT_EQ(layers[2].input_shape, (Shape{b, 3136}));
  EXPECT_DOUBLE_EQ(layers[2].forward_flops, 2.0 * b * 3136 * 128);
}

TEST(StepBenchFlops, ResnetShortcutReadsTheBlockInput) {
  auto model = models::make_model("resnet", 0);
  const std::vector<LayerCost> layers = count_layer_flops(*model, {2, 1, 28, 28});
  // stem, block 1 (2 convs), blocks 2 and 3 (2 convs + 1x1 shortcut each), the final Linear.
  ASSERT_EQ(layers.size(), 10u);
  const LayerCost& shortcut = layers[5];
  EXPECT_EQ(shortcut.path, "features.4.shortcut.0");
  EXPECT_EQ(shortcut.input_shape, (Shape{2, 16, 28, 28}));
  EXPECT_EQ(shortcut.output_shape, (Shape{2, 32, 14, 14}));
  EXPECT_DOUBLE_EQ(shortcut.forward_flops, 2.0 * 2 * 32 * 16 * 1 * 14 * 14);
  EXPECT_EQ(layers.back().input_shape, (Shape{2, 64}));
}

TEST(StepBenchRun, MlpResultIsCompleteAndConsistent) {
  StepBenchmark bench("mlp", "fp32", 8);
  const StepBenchResult r = bench.run(2, 1);
  EXPECT_EQ(r.batch_size, 8);
  EXPECT_GE(r.threads, 1);
  EXPECT_GE(r.step_ms.min, 0.0);
  EXPECT_LE(r.step_ms.min, r.step_ms.median);
  EXPECT_LE(r.step_ms.median, r.step_ms.max);
  // A step creates at least its activations and gradients: counting must see them.
  EXPECT_GT(r.tensor_allocations_per_step, 0.0);
  ASSERT_TRUE(r.gemm_ms.has_value());
  EXPECT_GE(*r.gemm_ms, 0.0);
  EXPECT_GE(r.optimizer_ms, 0.0);
  EXPECT_EQ(r.gemm_dtype, "f32");
  EXPECT_DOUBLE_EQ(r.flops_per_step, 3.0 * 2.0 * 8 * (784.0 * 256 + 256.0 * 128 + 128.0 * 10));
  const std::size_t param_bytes = 4 * static_cast<std::size_t>(models::make_model("mlp", 0)->parameter_count());
  EXPECT_GE(r.memory.peak_of(MemoryCategory::parameter), param_bytes);
  EXPECT_GE(r.memory.peak_of(MemoryCategory::optimizer_state), 2 * param_bytes);  // Adam m and v

  const nlohmann::json j = nlohmann::json::parse(to_json(r));
  for (const char* key : {"model", "precision", "batch_size", "threads", "step_ms", "gemm_ms",
                          "optimizer_ms", "gflops", "peak_bytes", "allocations_per_step",
                          "cpu_flags"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* key : {"median", "min", "max"}) EXPECT_TRUE(j["step_ms"].contains(key)) << key;
  for (const char* key : {"parameter", "gradient", "optimizer_state", "activation", "workspace", "total"}) {
    EXPECT_TRUE(j["peak_bytes"].contains(key)) << key;
  }
  EXPECT_EQ(j["model"], "mlp");
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_TRUE(j["gemm_ms"].is_number());

  // The GEMMs autograd really runs (no input gradient for the first layer) and Adam's traffic
  // (gradient read; parameter, m and v read and written: 28 bytes per f32 parameter).
  const double params = static_cast<double>(models::make_model("mlp", 0)->parameter_count());
  const double forward = 2.0 * 8 * (784.0 * 256 + 256.0 * 128 + 128.0 * 10);
  EXPECT_DOUBLE_EQ(r.gemm_flops_per_step, 3.0 * forward - 2.0 * 8 * 784.0 * 256);
  EXPECT_DOUBLE_EQ(r.optimizer_bytes, 28.0 * params);
  EXPECT_GT(r.gemm_peak_gflops, 0.0);
  EXPECT_GT(r.copy_gbps, 0.0);
  // The machine floor: every op of a profiled step at its roofline, so at least those GEMMs at
  // the GEMM peak plus Adam's bytes at the copy rate (the other ops add their own floors).
  EXPECT_GE(r.hw_floor_ms, 0.99 * (r.gemm_flops_per_step / r.gemm_peak_gflops / 1e6 +
                                   r.optimizer_bytes / r.copy_gbps / 1e6));
  EXPECT_DOUBLE_EQ(r.hw_floor_ratio, r.step_ms.median / r.hw_floor_ms);
  EXPECT_GT(r.max_rss_bytes, 0u);
  for (const char* key : {"hw_floor_ms", "hw_floor_ratio", "gemm_peak_gflops", "copy_gbps",
                          "gemm_peak_gflops_measured", "copy_gbps_measured", "max_rss_bytes"}) {
    EXPECT_TRUE(j[key].is_number()) << key;
  }
  // The test binary runs with MIXPREC_PEAKS_FILE=off (hermetic_peaks_file.cpp): this run's peaks.
  EXPECT_EQ(r.peaks_file, "");
  EXPECT_TRUE(j["peaks_file"].is_null());
  EXPECT_EQ(r.gemm_peak_gflops, r.gemm_peak_gflops_measured);
  EXPECT_EQ(r.copy_gbps, r.copy_gbps_measured);
}

// The machine floor is at the best peaks remembered on this machine, and the result keeps this
// run's samples beside them.
TEST(StepBenchRun, TheMachineFloorIsAtTheBestRememberedPeaks) {
  io::test::TempDir dir;
  const std::string file = dir / "peaks.json";
  const mixprec::testing::EnvScope use("MIXPREC_PEAKS_FILE", file);
  // Far above any real machine, under the sizes bench measures (docs/performance.md: a 2048^3
  // f32 GEMM, a 64 MiB copy).
  MachinePeaks remembered;
  remembered.gemm_n = 2048;
  remembered.gflops = 1e9;
  remembered.copy_bytes = std::int64_t{64} << 20;
  remembered.gbytes_per_s = 1e9;
  remember_best_peaks(remembered);

  StepBenchmark bench("mlp", "fp32", 8);
  const StepBenchResult r = bench.run(1, 0);
  EXPECT_EQ(r.gemm_peak_gflops, 1e9);
  EXPECT_EQ(r.copy_gbps, 1e9);
  EXPECT_GT(r.gemm_peak_gflops_measured, 0.0);
  EXPECT_LT(r.gemm_peak_gflops_measured, 1e9);
  EXPECT_GT(r.copy_gbps_measured, 0.0);
  EXPECT_LT(r.copy_gbps_measured, 1e9);
  EXPECT_EQ(r.peaks_file, file);
  // Every op at those rates: a floor of almost nothing (at this run's rates it is ~0.1 ms).
  EXPECT_LT(r.hw_floor_ms, 1e-3);
  const nlohmann::json j = nlohmann::json::parse(to_json(r));
  EXPECT_EQ(j["copy_gbps"], 1e9);
  EXPECT_EQ(j["gemm_peak_gflops"], 1e9);
  EXPECT_EQ(j["copy_gbps_measured"], r.copy_gbps_measured);
  EXPECT_EQ(j["gemm_peak_gflops_measured"], r.gemm_peak_gflops_measured);
  EXPECT_EQ(j["peaks_file"], file);
}

// The benchmark's steps are TrainStep's: a config given to it changes what the step does (here
// SGD instead of Adam: no moment buffers, so no optimizer state at all).
TEST(StepBenchRun, TheStepConfigReachesTheStep) {
  StepBenchmark sgd("mlp", StepConfig{.precision = "fp32", .optimizer = "sgd", .lr = 0.1f}, 8);
  const StepBenchResult r = sgd.run(1, 0, false);
  const double params = static_cast<double>(models::make_model("mlp", 0)->parameter_count());
  // SGD with momentum: gradient read, parameter and momentum buffer read and written.
  EXPECT_DOUBLE_EQ(r.optimizer_bytes, 20.0 * params);
  // Without the machine floor (run(..., false)), its fields are null in the JSON.
  EXPECT_EQ(r.hw_floor_ms, 0.0);
  EXPECT_TRUE(nlohmann::json::parse(to_json(r))["hw_floor_ms"].is_null());
  EXPECT_THROW(StepBenchmark("mlp", StepConfig{.loss_scaling = "static"}, 8), ValueError);
}

// With the caching allocator on, steps after the first reuse the blocks the first one freed:
// no storage comes from the system allocator in steady state, in any mode.
TEST(StepBenchRun, SteadyStateStepsMakeNoSystemAllocations) {
  const std::size_t previous = set_cache_limit(std::size_t{1} << 30);
  for (const char* precision : {"fp32", "bf16", "fp16", "pure-bf16-sr"}) {
    for (const char* model : {"mlp", "cnn"}) {
      StepBenchmark bench(model, precision, 8);
      const StepBenchResult r = bench.run(3, 2, false);
      EXPECT_EQ(r.allocations_per_step, 0.0) << model << " " << precision;
      EXPECT_GT(r.tensor_allocations_per_step, 0.0) << model << " " << precision;
    }
  }
  set_cache_limit(previous);
}

TEST(StepBenchRun, SeedMlpWidthSetsTheHiddenWidth) {
  StepBenchmark bench("seed-mlp", "fp32", 4, 0, 64);
  const StepBenchResult r = bench.run(1, 0, false);
  ASSERT_EQ(r.layers.size(), 3u);
  EXPECT_EQ(r.layers[0].output_shape, (Shape{4, 64}));
  EXPECT_EQ(r.layers[1].input_shape, (Shape{4, 64}));
  EXPECT_DOUBLE_EQ(r.flops_per_step, 3.0 * 2.0 * 4 * (1024.0 * 64 + 64.0 * 64 + 64.0 * 10));
}

TEST(StepBenchRun, ConvModelHasNoGemmFloorAndSaysWhy) {
  StepBenchmark bench("cnn", "bf16", 2);
  const StepBenchResult r = bench.run(1, 0, false);
  EXPECT_FALSE(r.gemm_ms.has_value());
  EXPECT_FALSE(r.gemm_note.empty());
  const nlohmann::json j = nlohmann::json::parse(to_json(r));
  EXPECT_TRUE(j["gemm_ms"].is_null());
  EXPECT_TRUE(j["floor_ratio"].is_null());
}

TEST(StepBenchRun, Fp16RunsWithTheScalerAndF16Gemms) {
  StepBenchmark bench("mlp", "fp16", 4);
  const StepBenchResult r = bench.run(2, 1, false);
  EXPECT_EQ(r.precision, "fp16");
  EXPECT_EQ(r.gemm_dtype, "f16");
  EXPECT_GT(r.tensor_allocations_per_step, 0.0);
}

TEST(StepBenchVerdict, DecisionMatrixThresholds) {
  EXPECT_STREQ(speedup_verdict(1.05), "stay in fp32");
  EXPECT_STREQ(speedup_verdict(1.3), "optional");
  EXPECT_STREQ(speedup_verdict(2.0), "use it");
  EXPECT_STREQ(speedup_verdict(3.0), "definitely use it");
  // Boundaries: 1.1 and 1.5 open the next band, 2.5 is still "use it".
  EXPECT_STREQ(speedup_verdict(1.1), "optional");
  EXPECT_STREQ(speedup_verdict(1.5), "use it");
  EXPECT_STREQ(speedup_verdict(2.5), "use it");
  EXPECT_STREQ(speedup_verdict(0.5), "stay in fp32");
  EXPECT_STREQ(speedup_verdict(std::nan("")), "stay in fp32");
}

TEST(StepBenchVerdict, LimitReasonOnlyWithoutNativeBf16) {
  CpuFeatures cpu;
  cpu.avx512f = true;
  EXPECT_NE(speedup_limit_reason(cpu).find("AVX512_BF16"), std::string::npos);
  cpu.avx512_bf16 = true;
  EXPECT_EQ(speedup_limit_reason(cpu), "");
  cpu.avx512_bf16 = false;
  cpu.amx_bf16 = true;
  EXPECT_EQ(speedup_limit_reason(cpu), "");
}

TEST(StepBenchTiming, SummaryMedianMinMax) {
  const TimingStats odd = summarize_times({3.0, 1.0, 2.0});
  EXPECT_DOUBLE_EQ(odd.median, 2.0);
  EXPECT_DOUBLE_EQ(odd.min, 1.0);
  EXPECT_DOUBLE_EQ(odd.max, 3.0);
  EXPECT_DOUBLE_EQ(summarize_times({4.0, 1.0, 2.0, 3.0}).median, 2.5);
  EXPECT_THROW(summarize_times({}), ValueError);
}

TEST(StepBenchErrors, BadArgumentsAreValueErrors) {
  EXPECT_THROW(StepBenchmark("transformer", "fp32"), ValueError);
  EXPECT_THROW(StepBenchmark("mlp", "fp9"), ValueError);
  EXPECT_THROW(StepBenchmark("mlp", "fp32", -1), ValueError);
  EXPECT_THROW(StepBenchmark("mlp", "fp32", 1 << 20), ValueError);
  EXPECT_THROW(StepBenchmark("mlp", "fp32", 8, 0, 512), ValueError);       // width: seed-mlp only
  EXPECT_THROW(StepBenchmark("seed-mlp", "fp32", 8, 0, 1 << 20), ValueError);
  EXPECT_THROW(default_batch_size("nope"), ValueError);
  StepBenchmark bench("mlp", "fp32", 2);
  EXPECT_THROW(bench.run(0), ValueError);
  EXPECT_THROW(bench.run(1, -1), ValueError);
  auto model = models::make_model("mlp", 0);
  EXPECT_THROW(count_layer_flops(*model, {}), ValueError);
  EXPECT_THROW(count_layer_flops(*model, {0, 784}), ValueError);
  EXPECT_EQ(default_batch_size("seed-mlp"), 256);
  EXPECT_EQ(default_batch_size("resnet"), 128);
  EXPECT_EQ(bench.batch_size(), 2);
}

TEST(StepBenchRun, LanguageModelTimesTokensAndCountsItsLinears) {
  models::ModelOptions o;
  o.context = 16;
  o.layers = 2;
  o.heads = 2;
  o.width = 16;
  StepBenchmark bench("gpt-mini", StepConfig{.precision = "bf16", .scheduler = "none"}, 2, o);
  const StepBenchResult r = bench.run(2, 1, /*machine_floor=*/false);
  EXPECT_EQ(r.tokens_per_sample, 16);
  EXPECT_DOUBLE_EQ(r.tokens_per_second, r.samples_per_second * 16);
  // Per block: the fused q|k|v projection, the output projection and the MLP's two Linears,
  // each on 2 x 16 tokens.
  ASSERT_EQ(r.layers.size(), 8u);
  const auto layer = [&](const std::string& path) {
    for (const LayerCost& l : r.layers) {
      if (l.path == path) return l;
    }
    ADD_FAILURE() << "no layer " << path;
    return LayerCost{};
  };
  const LayerCost qkv = layer("blocks.0.attn.qkv_proj");  // width -> 3 width, one GEMM
  EXPECT_EQ(qkv.input_shape, (Shape{2, 16, 16}));
  EXPECT_EQ(qkv.output_shape, (Shape{2, 16, 48}));
  EXPECT_DOUBLE_EQ(qkv.forward_flops, 2.0 * 32 * 16 * 48);
  const LayerCost fc = layer("blocks.1.fc");  // width -> 4 width
  EXPECT_EQ(fc.output_shape, (Shape{2, 16, 64}));
  EXPECT_DOUBLE_EQ(fc.forward_flops, 2.0 * 32 * 16 * 64);
}

}  // namespace
}  // namespace mixprec::train
