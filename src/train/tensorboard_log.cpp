// The Trainer's TensorBoard output: see tensorboard_log.h for the tags.
#include "train/tensorboard_log.h"

#include <cmath>

#include "mixprec/core/transfer.h"

namespace mixprec::train::detail {
namespace {

constexpr double kLog2Lo = -150, kLog2Hi = 20;
constexpr double kFp16SmallestSubnormal = 5.9604644775390625e-08;  // 2^-24

const char* kRanges =
    "| format | largest | smallest normal | smallest subnormal |\n"
    "|---|---|---|---|\n"
    "| fp16 | 65504 (log2 15.999) | 2^-14 | 2^-24 |\n"
    "| bf16 | 3.39e38 (log2 128) | 2^-126 | 2^-133 |\n"
    "| fp32 | 3.40e38 (log2 128) | 2^-126 | 2^-149 |\n\n"
    "On the log2 axes of grad_log2/* and weight_log2/*: mass left of -24 is lost in fp16 "
    "(left of -14 it keeps fewer than 10 bits), mass right of 16 overflows it; bf16 keeps "
    "fp32's range with 8 bits of precision. fp16_underflow/* is the fraction of nonzero gradient "
    "elements that the current loss scale still leaves below 2^-24.";

std::vector<double> log2_abs(const Tensor& t, double scale, double* underflow) {
  const TransferReason why("tensorboard histograms");
  const std::vector<float> v = t.to(DType::f32).to_vector();
  std::vector<double> out;
  out.reserve(v.size());
  std::size_t nonzero = 0, below = 0;
  for (const float x : v) {
    if (x == 0.0f || !std::isfinite(x)) continue;
    ++nonzero;
    const double a = std::fabs(static_cast<double>(x));
    below += a * scale < kFp16SmallestSubnormal;
    out.push_back(std::log2(a));
  }
  if (underflow != nullptr) *underflow = nonzero > 0 ? static_cast<double>(below) / static_cast<double>(nonzero) : 0.0;
  return out;
}

}  // namespace

TensorBoardLog::TensorBoardLog(const std::string& dir, std::vector<std::string> paths,
                               std::vector<Tensor> params, std::int64_t histogram_every)
    : writer_(dir), paths_(std::move(paths)), params_(std::move(params)), histogram_every_(histogram_every) {
  writer_.add_text("precision_ranges", kRanges, 0);
  writer_.flush();
}

bool TensorBoardLog::histograms_due(std::int64_t step) const {
  return histogram_every_ > 0 && step % histogram_every_ == 0;
}

void TensorBoardLog::histograms(std::int64_t step, double loss_scale, bool gradients) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::string& path = paths_[i];
    const std::vector<double> w = log2_abs(params_[i], 1.0, nullptr);
    writer_.add_histogram("weight_log2/" + path, io::Histogram::of(w, kLog2Lo, kLog2Hi, 1.0), step);
    const Tensor g = params_[i].grad();
    if (!gradients || !g.defined()) continue;
    double underflow = 0;
    const std::vector<double> lg = log2_abs(g, loss_scale, &underflow);
    writer_.add_histogram("grad_log2/" + path, io::Histogram::of(lg, kLog2Lo, kLog2Hi, 1.0), step);
    writer_.add_scalar("fp16_underflow/" + path, underflow, step);
  }
}

void TensorBoardLog::fp8(std::int64_t step, const std::vector<nn::Fp8LayerReport>& layers) {
  for (const nn::Fp8LayerReport& layer : layers) {
    for (const nn::Fp8RoleReport& r : layer.roles) {
      const std::string tag = "fp8/" + layer.path + "/" + r.role + "/";
      writer_.add_scalar(tag + "amax", r.amax, step);
      writer_.add_scalar(tag + "amax_history", r.history_amax, step);
      writer_.add_scalar(tag + "scale", r.scale, step);
      if (!r.observed) continue;
      writer_.add_scalar(tag + "saturated", r.saturated, step);
      writer_.add_scalar(tag + "flushed", r.flushed, step);
    }
  }
}

void TensorBoardLog::step(std::int64_t step, double loss, double lr, double loss_scale, double grad_norm,
                          bool skipped) {
  writer_.add_scalar("train/loss", loss, step);
  writer_.add_scalar("train/lr", lr, step);
  writer_.add_scalar("train/loss_scale", loss_scale, step);
  writer_.add_scalar("train/grad_norm", grad_norm, step);
  writer_.add_scalar("train/skipped", skipped ? 1.0 : 0.0, step);
}

void TensorBoardLog::epoch(int epoch, const nlohmann::json& line) {
  for (const auto& [key, value] : line.items()) {
    if (value.is_number()) writer_.add_scalar("epoch/" + key, value.get<double>(), epoch);
  }
  if (line.contains("peak_memory_bytes")) {
    for (const auto& [category, bytes] : line.at("peak_memory_bytes").items()) {
      if (bytes.is_number()) writer_.add_scalar("memory/" + category, bytes.get<double>(), epoch);
    }
  }
  writer_.flush();
}

}  // namespace mixprec::train::detail
