// `mixprec generate`: samples bytes from a language-model checkpoint after a prompt, under the
// autocast state the model trained in (eval mode), deterministic for a seed.
#include <cstdio>
#include <string>

#include "commands.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/core/error.h"
#include "mixprec/nn/gpt.h"
#include "mixprec/nn/gpt_sampling.h"
#include "mixprec/train/checkpoint_model.h"

namespace mixprec::tools {

void add_generate_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "generate", "Sample text from a language-model checkpoint (gpt-mini) after a prompt");
  struct Args {
    std::string checkpoint, prompt = "\n";
    std::int64_t tokens = 200, top_k = 0;
    float temperature = 0.8f;
    std::uint64_t seed = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--checkpoint", a->checkpoint,
                  "A checkpoint directory, or a directory of checkpoints (the newest complete one)")
      ->required();
  cmd->add_option("--prompt", a->prompt, "Text to continue (bytes; default a newline)");
  cmd->add_option("--tokens", a->tokens, "Bytes to generate")->capture_default_str();
  cmd->add_option("--temperature", a->temperature,
                  "Softmax temperature: below 1 sharper, above 1 more random, 0 = always the most "
                  "likely byte")
      ->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "Sample among the k most likely bytes only (0 = all)")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of the sampling: the same seed gives the same text")
      ->capture_default_str();
  cmd->footer("Example:\n"
              "  mixprec train --model gpt-mini --max-steps 2000 --checkpoint-dir gpt\n"
              "  mixprec generate --checkpoint gpt --prompt 'The ' --tokens 300 --top-k 40 --seed 1");
  cmd->callback([a] {
    MIXPREC_CHECK(!a->prompt.empty(), ValueError, "generate",
                  "--prompt is empty; give at least one character to continue");
    MIXPREC_CHECK(a->tokens >= 0 && a->tokens <= 1000000, ValueError, "generate",
                  "--tokens must be in [0, 1000000], got " << a->tokens);
    MIXPREC_CHECK(a->temperature >= 0.0f && a->temperature <= 100.0f, ValueError, "generate",
                  "--temperature must be in [0, 100], got " << a->temperature);
    MIXPREC_CHECK(a->top_k >= 0, ValueError, "generate", "--top-k must be >= 0, got " << a->top_k);
    const train::CheckpointModel m = train::load_checkpoint_model(a->checkpoint, "language-model");
    auto* gpt = dynamic_cast<nn::GPT*>(m.model.get());
    MIXPREC_CHECK(gpt != nullptr, ValueError, "generate",
                  "model " << m.spec.name << " in '" << m.path << "' is not a GPT; generate samples GPTs only");
    std::vector<std::int64_t> prompt;
    for (const unsigned char c : a->prompt) {
      MIXPREC_CHECK(c < gpt->config().vocab_size, ValueError, "generate",
                    "--prompt has byte " << static_cast<int>(c) << ", outside this model's vocabulary of "
                                         << gpt->config().vocab_size);
      prompt.push_back(c);
    }
    nn::SamplingOptions o;
    o.tokens = a->tokens;
    o.temperature = a->temperature;
    o.top_k = a->top_k;
    o.seed = a->seed;
    runtime::Autocast region(m.autocast, m.compute);
    const std::vector<std::int64_t> out = nn::sample(*gpt, prompt, o);
    std::string text = a->prompt;
    for (const std::int64_t t : out) text.push_back(static_cast<char>(t));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  });
}

}  // namespace mixprec::tools
