#pragma once
/// A byte-level text corpus (files concatenated, one token per byte, vocabulary 256), its split
/// into training and validation text, and TextWindows: language-modelling batches of windows of
/// that text, random for training and consecutive for evaluation.
///
///   const TextCorpus corpus = load_text_corpus({kFortunesDefaultDir});
///   const TextSplit split = split_text(corpus, 0.1);
///   TextWindowsOptions opts;  // context 128, batch 32
///   TextWindows train(split.train, opts);  // inputs [32, 128], 32 * 128 targets
///   for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
///     train.start_epoch(epoch);
///     for (Batch b; train.next(b);) train_step(b.inputs, b.targets);
///   }
///
/// Training windows are placed by a formula simple enough to replay in Python, so a PyTorch peer
/// trains on exactly the same batches (tests/python/text_windows.py; see TextWindows).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/data/batch_source.h"

namespace mixprec::data {

/// Where Debian's `fortunes` package installs its fortune files (~2.5 MB of English text), the
/// default corpus: small enough to train a byte-level GPT on a CPU, large enough to overfit slowly.
inline constexpr const char* kFortunesDefaultDir = "/usr/share/games/fortunes";

/// The bytes of some text files, concatenated in the order they were found.
struct TextCorpus {
  /// Every byte of every file, file after file (no separator is inserted).
  std::vector<std::uint8_t> bytes;
  /// The files read, in order (a directory entry as directory/name).
  std::vector<std::string> files;
};

/// Reads and concatenates the text of `paths`, in order. A path names a file (used as it is,
/// whatever its name) or a directory, which contributes its regular files in sorted name order,
/// not recursing, skipping `*.dat` files (the binary indexes of fortune files) and files already
/// included under another name: a symlink or hard link to a file read earlier (Debian's fortunes
/// directory holds `art`, `art.dat` and `art.u8 -> art`; only `art` is read). A file named twice
/// is read once. ValueError if `paths` is empty, a path does not exist (naming it), a directory
/// holds no usable file, a file cannot be read, or the corpus has no bytes at all.
TextCorpus load_text_corpus(const std::vector<std::string>& paths);

/// Training and validation text, cut from one corpus.
struct TextSplit {
  std::vector<std::uint8_t> train;
  std::vector<std::uint8_t> validation;
};

/// Cuts the corpus in two: validation is its last floor(n * validation_fraction) bytes (n bytes
/// in all; computed in double, as Python's int(n * f) does), train the bytes before them. The
/// tail rather than a random sample keeps both parts running text, so no window straddles the
/// cut. Either part may come out too short for a context window: TextWindows checks that.
/// ValueError if validation_fraction is outside (0, 1).
TextSplit split_text(const TextCorpus& corpus, double validation_fraction);

/// How TextWindows cuts text into batches.
struct TextWindowsOptions {
  /// Tokens per window T (>= 1): the model sees T bytes and predicts the T that follow, each
  /// shifted by one.
  std::int64_t context = 128;
  /// Windows per batch B (>= 1).
  std::int64_t batch_size = 32;
  /// Seed of the random window starts (random mode only).
  std::uint64_t seed = 0;
  /// true (training): windows at random starts, fresh each epoch. false (evaluation): the
  /// text's consecutive windows in order, the same every epoch.
  bool random = true;
  /// Random mode: batches per epoch (>= 1), or 0 for one pass's worth of tokens,
  /// max(1, (n - 1) / (T * B)). Must be 0 in evaluation mode, whose epoch is the text itself.
  std::int64_t batches_per_epoch = 0;
  /// Evaluation mode: at most this many batches per epoch (>= 0), or -1 for all of them (e.g. a
  /// cheap validation loss on the first few batches). Must be -1 in random mode: set
  /// batches_per_epoch there instead.
  std::int64_t max_batches = -1;
};

/// Language-modelling batches of windows of a byte string (n bytes). A window starting at s is
/// the input row bytes[s .. s+T) (f32 values 0..255 in Batch::inputs [B, T]) and its targets
/// bytes[s+1 .. s+T], B * T of them in row-major order: every window needs T + 1 bytes.
///
/// Random mode (training): row r of batch b of epoch e starts at
///
///   c     = (e * batches_per_epoch + b) * B + r
///   start = splitmix64(seed * 0x9E3779B97F4A7C15 + c) % (n - T)
///
/// with all arithmetic modulo 2^64 and splitmix64 the finaliser in core/random.h, so starts
/// cover [0, n - T - 1], each window fits, and any batch can be computed directly (no stream to
/// replay) by this class or in Python (tests/python/text_windows.py, window_starts). Windows
/// may overlap and repeat; the modulo bias is below n / 2^64.
///
/// Evaluation mode: the windows starting at 0, T, 2T, ... while start + T + 1 <= n, i.e.
/// (n - 1) / T windows that together predict every byte after the first of the covered text
/// once; B at a time in order, the last batch possibly smaller, at most max_batches batches.
///
/// Holds its own copy of the text. Assembling a batch is B copies of T bytes, so there is no
/// prefetch thread. Used from one thread at a time.
class TextWindows : public BatchSource {
 public:
  /// ValueError if context or batch_size < 1, batches_per_epoch < 0, max_batches < -1, an
  /// option is set that the other mode owns (see TextWindowsOptions), or the text is shorter
  /// than context + 1 bytes (the message names the byte count and the context, `--context`).
  TextWindows(std::vector<std::uint8_t> text, TextWindowsOptions opts);
  ~TextWindows() override;
  TextWindows(const TextWindows&) = delete;
  TextWindows& operator=(const TextWindows&) = delete;

  /// Batches in one epoch (see the class comment); 0 only for an evaluation source with
  /// max_batches = 0.
  std::int64_t batches_per_epoch() const override;
  /// Windows in one epoch: batches_per_epoch() * B in random mode, the number of windows the
  /// epoch's batches hold in evaluation mode.
  std::int64_t windows_per_epoch() const;
  /// Tokens (= targets) in a full batch, B * T; the last evaluation batch may hold fewer.
  std::int64_t tokens_per_batch() const;
  /// Bytes of text n.
  std::int64_t size() const;
  /// The options in effect (batches_per_epoch as given, 0 if derived).
  const TextWindowsOptions& options() const;

  /// Begins epoch `epoch` (>= 0) at batch first_batch (0 <= first_batch <= batches_per_epoch();
  /// a resumed run passes the number of batches it already did). The batches are a pure
  /// function of (text, options, epoch, batch index). ValueError on a negative epoch or an
  /// out-of-range first_batch.
  void start_epoch(std::int64_t epoch, std::int64_t first_batch = 0) override;

  /// Replaces out with the next batch of the epoch and returns true, or returns false (out
  /// untouched) when the epoch is over. StateError before the first start_epoch.
  bool next(Batch& out) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// The start of row `row` of batch `batch` of epoch `epoch` in random mode (the formula in the
/// TextWindows comment), for n bytes of text and context T; n > T. Exposed so tools and tests
/// can name a window without building a TextWindows.
std::int64_t text_window_start(std::uint64_t seed, std::int64_t epoch, std::int64_t batch, std::int64_t row,
                               std::int64_t batch_size, std::int64_t batches_per_epoch, std::int64_t n,
                               std::int64_t context);

}  // namespace mixprec::data
