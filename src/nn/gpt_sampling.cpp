// Sampling from a GPT. Everything after the logits is scalar double-precision code over one
// vocabulary row: at a few hundred ids it costs nothing next to the forward pass, and double
// keeps the probabilities of the tail meaningful at low temperatures.
#include "mixprec/nn/gpt_sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "mixprec/core/transfer.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "mixprec/core/random.h"

namespace mixprec::nn {
namespace {

constexpr const char* kOp = "sample";
constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// Puts the model in eval mode for the guard's life, then back to what it was.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& m) : module_(m), was_training_(m.is_training()) { m.eval(); }
  ~EvalModeGuard() { module_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

// The first id with the largest logit.
std::int64_t argmax(const std::vector<float>& logits) {
  return std::max_element(logits.begin(), logits.end()) - logits.begin();
}

// Draws from softmax(logits / temperature) restricted to the top_k largest logits.
std::int64_t draw(const std::vector<float>& logits, double temperature, std::int64_t top_k, double u) {
  const auto vocab = static_cast<std::int64_t>(logits.size());
  std::vector<std::int64_t> kept(static_cast<std::size_t>(vocab));
  std::iota(kept.begin(), kept.end(), std::int64_t{0});
  if (top_k > 0 && top_k < vocab) {
    const auto by_logit = [&](std::int64_t a, std::int64_t b) {
      const float la = logits[static_cast<std::size_t>(a)], lb = logits[static_cast<std::size_t>(b)];
      return la > lb || (la == lb && a < b);
    };
    std::nth_element(kept.begin(), kept.begin() + top_k - 1, kept.end(), by_logit);
    kept.resize(static_cast<std::size_t>(top_k));
    std::sort(kept.begin(), kept.end());  // cumulative sums in id order
  }
  double max_logit = -INFINITY;
  for (const std::int64_t id : kept) max_logit = std::max(max_logit, double{logits[static_cast<std::size_t>(id)]});
  std::vector<double> p(kept.size());
  double total = 0.0;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    p[i] = std::exp((double{logits[static_cast<std::size_t>(kept[i])]} - max_logit) / temperature);
    total += p[i];  // >= 1: the largest logit contributes exp(0)
  }
  const double target = u * total;
  double cumulative = 0.0;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    cumulative += p[i];
    if (cumulative > target) return kept[i];
  }
  // Rounding left the sum a hair below u * total: take the last id with any probability.
  for (std::size_t i = kept.size(); i-- > 0;) {
    if (p[i] > 0.0) return kept[i];
  }
  return kept.back();
}

}  // namespace

std::vector<std::int64_t> sample(GPT& model, const std::vector<std::int64_t>& prompt, const SamplingOptions& opts) {
  const std::int64_t vocab = model.config().vocab_size, context = model.config().context;
  MIXPREC_CHECK(!prompt.empty(), ValueError, kOp,
                "the prompt is empty; give at least one token to continue (e.g. a newline)");
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    MIXPREC_CHECK(
        prompt[i] >= 0 && prompt[i] < vocab, ValueError, kOp,
        "prompt token " << i << " is " << prompt[i] << ", outside the model's vocabulary [0, " << vocab << ")");
  }
  MIXPREC_CHECK(opts.tokens >= 0, ValueError, kOp, "tokens must be >= 0, got " << opts.tokens);
  MIXPREC_CHECK(opts.temperature >= 0.0f, ValueError, kOp,
                "temperature must be >= 0 (0: greedy), got " << opts.temperature);
  MIXPREC_CHECK(opts.top_k >= 0, ValueError, kOp, "top_k must be >= 0 (0: every token), got " << opts.top_k);

  EvalModeGuard eval(model);
  runtime::NoGradGuard no_grad;
  std::vector<std::int64_t> seq = prompt;
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(opts.tokens));
  for (std::int64_t i = 0; i < opts.tokens; ++i) {
    const std::int64_t t = std::min<std::int64_t>(static_cast<std::int64_t>(seq.size()), context);
    const std::vector<std::int64_t> window(seq.end() - t, seq.end());
    const TransferReason why("sampling logits");
    const std::vector<float> logits = model.logits(window, 1, t).slice(1, t - 1, t).to_vector();
    for (std::size_t j = 0; j < logits.size(); ++j) {
      MIXPREC_CHECK(std::isfinite(logits[j]), ValueError, kOp,
                    "the logit of token " << j << " is " << logits[j] << " at step " << i
                                          << "; the weights have diverged or overflowed the compute dtype (try "
                                             "sampling in f32, outside an autocast region)");
    }
    std::int64_t next = 0;
    if (opts.temperature == 0.0f) {
      next = argmax(logits);
    } else {
      const std::uint64_t bits = splitmix64(opts.seed * kGolden + static_cast<std::uint64_t>(i));
      const double u = static_cast<double>(bits >> 11) * 0x1p-53;
      next = draw(logits, opts.temperature, opts.top_k, u);
    }
    out.push_back(next);
    seq.push_back(next);
  }
  return out;
}

}  // namespace mixprec::nn
