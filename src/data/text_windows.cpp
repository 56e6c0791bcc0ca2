// TextWindows: a batch is a pure function of (text, options, epoch, batch index), computed on
// demand, so resuming at first_batch needs no replay and a Python peer can recompute any batch.
#include <algorithm>
#include <cstring>

#include "mixprec/core/transfer.h"
#include "mixprec/core/error.h"
#include "mixprec/core/random.h"
#include "data/epoch_order.h"
#include "mixprec/data/text_corpus.h"

namespace mixprec::data {
namespace {

constexpr const char* kOp = "TextWindows";
constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

}  // namespace

std::int64_t text_window_start(std::uint64_t seed, std::int64_t epoch, std::int64_t batch, std::int64_t row,
                               std::int64_t batch_size, std::int64_t batches_per_epoch, std::int64_t n,
                               std::int64_t context) {
  MIXPREC_CHECK(n > context && context >= 1, ValueError, "text_window_start",
                "a window of context " << context << " needs at least " << context + 1 << " bytes of text, got " << n);
  // Unsigned throughout: the formula is defined modulo 2^64, like the Python reference.
  const auto c = (static_cast<std::uint64_t>(epoch) * static_cast<std::uint64_t>(batches_per_epoch) +
                  static_cast<std::uint64_t>(batch)) *
                     static_cast<std::uint64_t>(batch_size) +
                 static_cast<std::uint64_t>(row);
  return static_cast<std::int64_t>(splitmix64(seed * kGolden + c) % static_cast<std::uint64_t>(n - context));
}

struct TextWindows::State {
  std::vector<std::uint8_t> text;
  TextWindowsOptions opts;
  std::int64_t n = 0, batches = 0, windows = 0;  // windows: eval mode, in the whole epoch
  std::int64_t epoch = -1;                       // -1: start_epoch not called yet
  std::int64_t cursor = 0;

  std::int64_t start_of(std::int64_t b, std::int64_t r) const {
    if (!opts.random) return (b * opts.batch_size + r) * opts.context;
    return text_window_start(opts.seed, epoch, b, r, opts.batch_size, batches, n, opts.context);
  }

  Batch assemble(std::int64_t b) const {
    const std::int64_t bs = opts.batch_size, t = opts.context;
    const std::int64_t rows = opts.random ? bs : std::min(bs, windows - b * bs);
    Batch out;
    out.index = b;
    Tensor host = Tensor::empty({rows, t}, DType::f32, MemoryCategory::workspace, Device{});
    out.targets.resize(static_cast<std::size_t>(rows * t));
    float* dst = host.data<float>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::uint8_t* src = text.data() + start_of(b, r);
      for (std::int64_t j = 0; j < t; ++j) {
        dst[r * t + j] = static_cast<float>(src[j]);
        out.targets[static_cast<std::size_t>(r * t + j)] = src[j + 1];
      }
    }
    stage_on_device(out, host);
    return out;
  }
};

TextWindows::TextWindows(std::vector<std::uint8_t> text, TextWindowsOptions opts) : state_(std::make_unique<State>()) {
  State& s = *state_;
  MIXPREC_CHECK(opts.context >= 1, ValueError, kOp, "context must be at least 1, got " << opts.context);
  MIXPREC_CHECK(opts.batch_size >= 1, ValueError, kOp, "batch_size must be at least 1, got " << opts.batch_size);
  MIXPREC_CHECK(opts.batches_per_epoch >= 0, ValueError, kOp,
                "batches_per_epoch must be >= 0 (0: one pass's worth of tokens), got " << opts.batches_per_epoch);
  MIXPREC_CHECK(opts.max_batches >= -1, ValueError, kOp,
                "max_batches must be >= 0, or -1 for all batches, got " << opts.max_batches);
  MIXPREC_CHECK(opts.random || opts.batches_per_epoch == 0, ValueError, kOp,
                "batches_per_epoch (" << opts.batches_per_epoch
                                      << ") applies to random (training) windows only; an evaluation epoch is the "
                                         "text itself: limit it with max_batches");
  MIXPREC_CHECK(!opts.random || opts.max_batches == -1, ValueError, kOp,
                "max_batches (" << opts.max_batches
                                << ") applies to evaluation windows only; for random (training) windows set "
                                   "batches_per_epoch");
  s.n = static_cast<std::int64_t>(text.size());
  MIXPREC_CHECK(s.n >= opts.context + 1, ValueError, kOp,
                "the text has " << s.n << " bytes but a window of context " << opts.context << " needs "
                                << opts.context + 1
                                << " (T inputs and the byte after them); lower --context or use more text "
                                   "(a larger corpus, or a larger validation fraction for the validation text)");
  const std::int64_t bs = opts.batch_size, t = opts.context;
  if (opts.random) {
    s.batches = opts.batches_per_epoch > 0 ? opts.batches_per_epoch : std::max<std::int64_t>(1, (s.n - 1) / (t * bs));
    s.windows = s.batches * bs;
  } else {
    const std::int64_t all = (s.n - 1) / t;
    s.batches = (all + bs - 1) / bs;
    if (opts.max_batches >= 0) s.batches = std::min(s.batches, opts.max_batches);
    s.windows = std::min(all, s.batches * bs);
  }
  s.text = std::move(text);
  s.opts = opts;
}

TextWindows::~TextWindows() = default;

std::int64_t TextWindows::batches_per_epoch() const { return state_->batches; }
std::int64_t TextWindows::windows_per_epoch() const { return state_->windows; }
std::int64_t TextWindows::tokens_per_batch() const { return state_->opts.batch_size * state_->opts.context; }
std::int64_t TextWindows::size() const { return state_->n; }
const TextWindowsOptions& TextWindows::options() const { return state_->opts; }

void TextWindows::start_epoch(std::int64_t epoch, std::int64_t first_batch) {
  State& s = *state_;
  detail::check_epoch_start("TextWindows::start_epoch", epoch, first_batch, s.batches);
  s.epoch = epoch;
  s.cursor = first_batch;
}

bool TextWindows::next(Batch& out) {
  State& s = *state_;
  MIXPREC_CHECK(s.epoch >= 0, StateError, "TextWindows::next",
                "no epoch started; call start_epoch(epoch) before next()");
  if (s.cursor >= s.batches) return false;
  out = s.assemble(s.cursor);
  ++s.cursor;
  return true;
}

}  // namespace mixprec::data
