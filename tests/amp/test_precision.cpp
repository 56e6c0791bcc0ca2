#include <gtest/gtest.h>

#include "mixprec/amp/precision.h"
#include "mixprec/mixprec.h"
#include "mixprec/optim/adam.h"

namespace mixprec::amp {
namespace {

TEST(PrecisionMode, ParsesEveryNameAndRejectsOthers) {
  for (const char* n : {"fp32", "bf16", "fp16", "pure-bf16", "pure-bf16-sr", "auto", "auto-layer",
                        "fp8", "fp8-delayed"}) {
    EXPECT_STREQ(name(parse_precision_mode(n)), n);
  }
  EXPECT_TRUE(is_fp8(PrecisionMode::fp8) && is_fp8(PrecisionMode::fp8_delayed));
  EXPECT_FALSE(is_fp8(PrecisionMode::bf16));
  // the fp8 recipes compute in bf16 around their fp8 GEMMs
  EXPECT_EQ(PrecisionPolicy::for_mode(PrecisionMode::fp8).dtypes,
            (DTypes{DType::f32, DType::bf16, DType::f32}));
  try {
    parse_precision_mode("fp9");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("use one of fp32, bf16"), std::string::npos) << e.what();
  }
}

TEST(PrecisionPolicy, StringFormRoundTripsAndRejectsNonsense) {
  const PrecisionPolicy p = PrecisionPolicy::parse("p=f32,c=bf16,o=f32");
  EXPECT_EQ(p.dtypes, (DTypes{DType::f32, DType::bf16, DType::f32}));
  EXPECT_EQ(p.to_string(), "p=f32,c=bf16,o=f32");
  EXPECT_EQ(PrecisionPolicy::parse("c=fp16").dtypes, (DTypes{DType::f32, DType::f16, DType::f32}));
  EXPECT_THROW(PrecisionPolicy::parse("p=f32,p=bf16"), ValueError);
  EXPECT_THROW(PrecisionPolicy::parse("x=f32"), ValueError);
  EXPECT_THROW(PrecisionPolicy::parse("p=f64"), ValueError);
  EXPECT_THROW(PrecisionPolicy::parse("garbage"), ValueError);
}

TEST(PrecisionPolicy, ModesMapToDtypes) {
  EXPECT_EQ(PrecisionPolicy::for_mode(PrecisionMode::fp32).to_string(), "p=f32,c=f32,o=f32");
  EXPECT_EQ(PrecisionPolicy::for_mode(PrecisionMode::bf16).to_string(), "p=f32,c=bf16,o=f32");
  EXPECT_EQ(PrecisionPolicy::for_mode(PrecisionMode::fp16).to_string(), "p=f32,c=f16,o=f32");
  const PrecisionPolicy pure = PrecisionPolicy::for_mode(PrecisionMode::pure_bf16);
  EXPECT_EQ(pure.to_string(), "p=bf16,c=bf16,o=f32");
  EXPECT_EQ(pure.resolve("features.1", "LayerNorm").param, DType::f32);  // norms kept in f32
  EXPECT_EQ(pure.resolve("features.0", "Linear").param, DType::bf16);
  EXPECT_TRUE(PrecisionPolicy::for_mode(PrecisionMode::pure_bf16, false).overrides.empty());
}

TEST(PrecisionPolicy, MostSpecificOverrideWins) {
  PrecisionPolicy p = PrecisionPolicy::parse("p=bf16,c=bf16,o=f32");
  p.overrides["head"] = {DType::f32, DType::f32, DType::f32};
  p.overrides["head.1"] = {DType::f16, DType::f16, DType::f32};
  p.overrides["type:Linear"] = {DType::f32, DType::bf16, DType::f32};
  EXPECT_EQ(p.resolve("head.0", "ReLU").param, DType::f32);
  EXPECT_EQ(p.resolve("head.1", "Linear").param, DType::f16);   // path beats type
  EXPECT_EQ(p.resolve("header", "ReLU").param, DType::bf16);    // "head" is not a prefix of "header"
  EXPECT_EQ(p.resolve("body.0", "Linear").param, DType::f32);   // type override
}

TEST(PrecisionPolicy, ApplyRetypesParametersInPlaceAndKeepsOverriddenModulesInF32) {
  auto model = nn::sequential({std::make_shared<nn::Linear>(4, 8, true, 1), std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(8, 2, true, 2)});
  const std::vector<float> before = model->parameters()[0].to_vector();
  PrecisionPolicy p = PrecisionPolicy::for_mode(PrecisionMode::pure_bf16);
  p.overrides["2"] = {DType::f32, DType::f32, DType::f32};
  apply_parameter_dtypes(*model, p);
  const auto params = model->named_parameters();
  EXPECT_EQ(params[0].second.dtype(), DType::bf16);
  EXPECT_EQ(params[2].second.dtype(), DType::f32);
  const std::vector<float> after = params[0].second.to_vector();
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], static_cast<float>(bfloat16(before[i])));
  // The module computes: layer 0 in bf16 under autocast, layer 2 forced to f32.
  const Tensor x = Tensor::randn({3, 4}, 5);
  Tensor y;
  {
    Autocast region;
    y = model->forward(x);
  }
  EXPECT_EQ(y.dtype(), DType::f32);
  optim::Adam opt(model->parameters());  // bf16 parameters get f32 masters
  EXPECT_EQ(opt.master(0).dtype(), DType::f32);
  sum(y).backward();
  EXPECT_EQ(params[0].second.grad().dtype(), DType::bf16);
  EXPECT_NO_THROW(opt.step());
}

TEST(PrecisionChoice, AutoPicksBf16OnlyWithNativeBf16DotProducts) {
  CpuFeatures none;
  EXPECT_EQ(choose_precision(none).mode, PrecisionMode::fp32);
  EXPECT_NE(choose_precision(none).reason.find("no native bf16"), std::string::npos);
  CpuFeatures zen5;
  zen5.avx512f = zen5.avx512_bf16 = true;
  EXPECT_EQ(choose_precision(zen5).mode, PrecisionMode::bf16);
  EXPECT_NE(choose_precision(zen5).reason.find("AVX512_BF16"), std::string::npos);
  CpuFeatures amx;
  amx.amx_bf16 = true;
  EXPECT_EQ(choose_precision(amx).mode, PrecisionMode::bf16);
}

TEST(PrecisionChoice, AutoOnAGpuFollowsTheTensorCoresOfItsGeneration) {
  const auto on = [](int major, int minor) {
    GpuInfo g = tensor_core_types(major, minor);
    g.name = "test GPU";
    return choose_precision(g);
  };
  EXPECT_EQ(on(9, 0).mode, PrecisionMode::bf16);  // Hopper
  EXPECT_EQ(on(8, 0).mode, PrecisionMode::bf16);  // Ampere
  EXPECT_NE(on(8, 0).reason.find("compute capability 8.0"), std::string::npos) << on(8, 0).reason;
  EXPECT_EQ(on(7, 5).mode, PrecisionMode::fp16);  // Turing: fp16 Tensor Cores only
  EXPECT_EQ(on(7, 0).mode, PrecisionMode::fp16);  // Volta
  EXPECT_NE(on(7, 0).reason.find("GradScaler"), std::string::npos);
  EXPECT_EQ(on(6, 1).mode, PrecisionMode::fp32);  // Pascal
}

TEST(PrecisionChoice, Fp8RecipesNeedFp8TensorCores) {
  const auto refusal = [](int major, int minor) {
    GpuInfo g = tensor_core_types(major, minor);
    g.name = "test GPU";
    return fp8_refusal(g);
  };
  EXPECT_EQ(refusal(9, 0), "");  // Hopper
  EXPECT_EQ(refusal(8, 9), "");  // Ada
  const std::string ampere = refusal(8, 0);
  EXPECT_NE(ampere.find("test GPU (compute capability 8.0) has no fp8 Tensor Cores"), std::string::npos)
      << ampere;
  EXPECT_NE(ampere.find("train in bf16"), std::string::npos) << ampere;
  EXPECT_NE(ampere.find("--device cpu"), std::string::npos) << ampere;
  EXPECT_NE(refusal(7, 5).find("fp16 on this GPU"), std::string::npos) << refusal(7, 5);
}

TEST(PrecisionChoice, Fp16WithoutScalerWarnsLoudly) {
  const CpuFeatures cpu;
  EXPECT_NE(precision_warnings(PrecisionMode::fp16, false, cpu).find("WARNING: fp16 without a GradScaler"),
            std::string::npos);
  EXPECT_EQ(precision_warnings(PrecisionMode::fp16, true, cpu).find("WARNING"), std::string::npos);
  EXPECT_NE(precision_warnings(PrecisionMode::bf16, false, cpu).find("no native bf16"), std::string::npos);
  CpuFeatures zen5;
  zen5.avx512_bf16 = true;
  EXPECT_EQ(precision_warnings(PrecisionMode::bf16, false, zen5), "");
}

}  // namespace
}  // namespace mixprec::amp
