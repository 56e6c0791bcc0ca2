#pragma once
/// Text generation from a GPT: temperature and top-k sampling, one token at a time, with a
/// seeded RNG so the same seed gives the same text.
///
///   SamplingOptions opts;
///   opts.top_k = 40;
///   runtime::Autocast region;  // optional: sampling runs in whatever precision the caller set
///   const std::vector<std::int64_t> out = sample(gpt, prompt_bytes, opts);
#include <cstdint>
#include <vector>

#include "mixprec/nn/gpt.h"

namespace mixprec::nn {

/// How sample() picks tokens.
struct SamplingOptions {
  /// Tokens to generate (>= 0).
  std::int64_t tokens = 200;
  /// Divides the logits before the softmax (>= 0): below 1 sharpens, above 1 flattens; 0 picks
  /// the most likely token every time (greedy, no randomness).
  float temperature = 0.8f;
  /// Sample among the k most likely tokens only (>= 0; ties go to the lower token id); 0, or a
  /// k at least the vocabulary size, keeps every token.
  std::int64_t top_k = 0;
  /// Seed of the draws: the same model, prompt, options and seed give the same tokens.
  std::uint64_t seed = 0;
};

/// Generates opts.tokens tokens after `prompt` and returns them (without the prompt). For each
/// new token the model sees the last config().context tokens of prompt + generated so far
/// (cropped from the left when longer; no KV cache: the window is recomputed), and the logits
/// of its last position are divided by the temperature, cut to the top k, and turned into
/// probabilities by a softmax in double. Token i is then the first id (in id order, among
/// those kept) whose cumulative probability exceeds u_i, one uniform draw per token:
///   u_i = (splitmix64(seed * 0x9E3779B97F4A7C15 + i) >> 11) * 2^-53   (core/random.h).
/// Runs in eval mode with gradient recording off and restores the model's training flag
/// (train(flag) on the whole model) afterwards, even on error; runs under the caller's autocast
/// state without opening a region. ValueError for an empty prompt, a prompt token outside
/// [0, vocab_size), tokens < 0, temperature < 0 or NaN, top_k < 0, or logits that are not
/// finite (naming the step: the weights have diverged or overflowed the compute dtype).
std::vector<std::int64_t> sample(GPT& model, const std::vector<std::int64_t>& prompt, const SamplingOptions& opts);

}  // namespace mixprec::nn
