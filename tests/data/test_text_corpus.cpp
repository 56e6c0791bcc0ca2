// Text corpus and windows: loading Debian's fortunes (skipping the .dat indexes and the .u8
// links) and a scratch directory with every kind of entry; every loading and option error; the
// tail split; random windows that are reproducible, resumable, in range, with targets shifted by
// one, and placed exactly as the Python reference (tests/python/text_windows.py) places them;
// evaluation windows that walk the text in order.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "data/expect_error.h"
#include "io/io_test_util.h"
#include "mixprec/core/error.h"
#include "mixprec/data/text_corpus.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;
using io::test::TempDir;

using testing::expect_error;

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// n bytes that vary enough for a window to be recognised: a fixed pseudo-random byte string.
std::vector<std::uint8_t> pseudo_text(std::int64_t n) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(n));
  std::uint32_t x = 12345;
  for (auto& b : v) {
    x = x * 1103515245u + 12345u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return v;
}

TextWindowsOptions options(std::int64_t context, std::int64_t batch, bool random = true, std::uint64_t seed = 0) {
  TextWindowsOptions o;
  o.context = context;
  o.batch_size = batch;
  o.random = random;
  o.seed = seed;
  return o;
}

std::vector<Batch> epoch_batches(TextWindows& w, std::int64_t epoch, std::int64_t first = 0) {
  w.start_epoch(epoch, first);
  std::vector<Batch> out;
  for (Batch b; w.next(b);) out.push_back(b);
  return out;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

TEST(TextCorpus, LoadsDebianFortunesWithoutIndexesOrLinks) {
  if (!fs::is_directory(kFortunesDefaultDir)) {
    GTEST_SKIP() << kFortunesDefaultDir << " is missing: `sudo apt-get install fortunes` (scripts/install-deps.sh)";
  }
  const TextCorpus c = load_text_corpus({kFortunesDefaultDir});
  ASSERT_GE(c.files.size(), 10u);
  std::uintmax_t total = 0;
  for (std::size_t i = 0; i < c.files.size(); ++i) {
    const std::string& f = c.files[i];
    EXPECT_FALSE(ends_with(f, ".dat")) << f;
    EXPECT_FALSE(ends_with(f, ".u8")) << f << " is a link to a file already read";
    if (i > 0) {
      EXPECT_LT(c.files[i - 1], f) << "files are read in sorted order";
    }
    total += fs::file_size(f);
  }
  EXPECT_EQ(c.bytes.size(), total);
  EXPECT_GT(c.bytes.size(), 1'000'000u);  // ~2.5 MB of English
  EXPECT_LT(c.bytes.size(), 10'000'000u);
}

TEST(TextCorpus, DirectorySkipsIndexesLinksAndSubdirectories) {
  TempDir dir;
  write(dir / "b.txt", "BB");
  write(dir / "a.txt", "AAA");
  write(dir / "a.txt.dat", "index");
  fs::create_symlink(dir / "a.txt", dir / "c.u8");  // link to a file read before it
  fs::create_hard_link(dir / "b.txt", dir / "d");   // second name of b.txt
  fs::create_symlink(dir / "nowhere", dir / "e");   // dangling
  fs::create_directory(dir / "sub");
  write(dir / "sub" + "/f.txt", "not read: no recursion");
  write(dir / "g", "");  // empty: read, adds nothing
  const TextCorpus c = load_text_corpus({dir.path().string()});
  EXPECT_EQ(c.files, (std::vector<std::string>{dir / "a.txt", dir / "b.txt", dir / "g"}));
  EXPECT_EQ(c.bytes, bytes_of("AAABB"));

  // Paths in the order given; a file named again (or reached through a directory) is read once;
  // a file named explicitly is used whatever its name.
  const TextCorpus d = load_text_corpus({dir / "a.txt.dat", dir / "b.txt", dir.path().string(), dir / "b.txt"});
  EXPECT_EQ(d.files, (std::vector<std::string>{dir / "a.txt.dat", dir / "b.txt", dir / "a.txt", dir / "g"}));
  EXPECT_EQ(d.bytes, bytes_of("indexBBAAA"));
}

TEST(TextCorpus, Errors) {
  TempDir dir;
  expect_error([] { load_text_corpus({}); }, {"load_text_corpus", "no path", kFortunesDefaultDir});
  expect_error([&] { load_text_corpus({dir / "missing.txt"}); }, {dir / "missing.txt", "no such file"});
  expect_error([&] { load_text_corpus({dir / "missing/x"}); }, {"missing/x", "no such file"});
  fs::create_directory(dir / "only_indexes");
  write(dir / "only_indexes/a.dat", "x");
  expect_error([&] { load_text_corpus({dir / "only_indexes"}); }, {dir / "only_indexes", "no usable text file"});
  fs::create_directory(dir / "empty_files");
  write(dir / "empty_files/a", "");
  expect_error([&] { load_text_corpus({dir / "empty_files"}); }, {"corpus is empty"});
  write(dir / "secret", "x");
  fs::permissions(dir / "secret", fs::perms::none);
  io::test::with_user_permissions(
      [&] { expect_error([&] { load_text_corpus({dir / "secret"}); }, {dir / "secret", "cannot open"}); });
}

TEST(TextSplit, ValidationIsTheTail) {
  TextCorpus c;
  c.bytes = bytes_of("0123456789");
  const TextSplit s = split_text(c, 0.25);  // floor(10 * 0.25) = 2
  EXPECT_EQ(s.train, bytes_of("01234567"));
  EXPECT_EQ(s.validation, bytes_of("89"));
  EXPECT_EQ(split_text(c, 0.05).validation.size(), 0u);  // floor(0.5): the loader complains, not the split
  for (const double f : {0.0, 1.0, -0.1, 1.5, std::nan("")}) {
    expect_error([&] { split_text(c, f); }, {"split_text", "(0, 1)"});
  }
}

TEST(TextWindowsRandom, BatchesAreWindowsWithTargetsShiftedByOne) {
  const std::vector<std::uint8_t> text = pseudo_text(1000);
  TextWindows w(text, options(16, 4, true, 7));
  EXPECT_EQ(w.size(), 1000);
  EXPECT_EQ(w.batches_per_epoch(), 999 / 64);  // one pass's worth of tokens
  EXPECT_EQ(w.windows_per_epoch(), 15 * 4);
  EXPECT_EQ(w.tokens_per_batch(), 64);
  for (std::int64_t epoch : {0, 3}) {
    const std::vector<Batch> batches = epoch_batches(w, epoch);
    ASSERT_EQ(batches.size(), 15u);
    for (std::size_t b = 0; b < batches.size(); ++b) {
      EXPECT_EQ(batches[b].index, static_cast<std::int64_t>(b));
      ASSERT_EQ(batches[b].inputs.shape(), (Shape{4, 16}));
      EXPECT_EQ(batches[b].inputs.dtype(), DType::f32);
      ASSERT_EQ(batches[b].targets.size(), 64u);
      const std::vector<float> in = batches[b].inputs.to_vector();
      for (std::int64_t r = 0; r < 4; ++r) {
        const std::int64_t s = text_window_start(7, epoch, static_cast<std::int64_t>(b), r, 4, 15, 1000, 16);
        ASSERT_GE(s, 0);
        ASSERT_LE(s + 16, 999);
        for (std::int64_t j = 0; j < 16; ++j) {
          const auto k = static_cast<std::size_t>(r * 16 + j);
          EXPECT_EQ(in[k], static_cast<float>(text[static_cast<std::size_t>(s + j)]));
          EXPECT_EQ(batches[b].targets[k], text[static_cast<std::size_t>(s + j + 1)]);
        }
      }
    }
  }
  Batch b;
  EXPECT_FALSE(w.next(b));
}

TEST(TextWindowsRandom, ReproducibleResumableAndSeeded) {
  const std::vector<std::uint8_t> text = pseudo_text(500);
  TextWindowsOptions o = options(8, 3, true, 11);
  o.batches_per_epoch = 6;
  TextWindows a(text, o), b(text, o);
  EXPECT_EQ(a.batches_per_epoch(), 6);
  const std::vector<Batch> e1 = epoch_batches(a, 1);
  const std::vector<Batch> again = epoch_batches(b, 1);
  const std::vector<Batch> tail = epoch_batches(b, 1, 4);
  ASSERT_EQ(e1.size(), 6u);
  ASSERT_EQ(tail.size(), 2u);
  for (std::size_t i = 0; i < e1.size(); ++i) {
    EXPECT_EQ(e1[i].inputs.to_vector(), again[i].inputs.to_vector());
    EXPECT_EQ(e1[i].targets, again[i].targets);
  }
  EXPECT_EQ(tail[0].index, 4);
  EXPECT_EQ(tail[0].targets, e1[4].targets);
  EXPECT_EQ(tail[1].targets, e1[5].targets);
  EXPECT_NE(epoch_batches(a, 2)[0].targets, e1[0].targets);  // a fresh draw each epoch
  o.seed = 12;
  TextWindows c(text, o);
  EXPECT_NE(epoch_batches(c, 1)[0].targets, e1[0].targets);
}

TEST(TextWindowsEval, ConsecutiveWindowsCoverTheTextInOrder) {
  const std::vector<std::uint8_t> text = pseudo_text(103);
  TextWindows w(text, options(10, 4, false));
  // Starts 0, 10, ..., 90: 10 windows (the last needs bytes 90..100), batches of 4, 4, 2.
  EXPECT_EQ(w.batches_per_epoch(), 3);
  EXPECT_EQ(w.windows_per_epoch(), 10);
  for (std::int64_t epoch : {0, 5}) {
    const std::vector<Batch> batches = epoch_batches(w, epoch);
    ASSERT_EQ(batches.size(), 3u);
    EXPECT_EQ(batches[2].inputs.shape(), (Shape{2, 10}));
    std::vector<float> inputs;
    std::vector<std::int64_t> targets;
    for (const Batch& b : batches) {
      const std::vector<float> v = b.inputs.to_vector();
      inputs.insert(inputs.end(), v.begin(), v.end());
      targets.insert(targets.end(), b.targets.begin(), b.targets.end());
    }
    ASSERT_EQ(inputs.size(), 100u);
    ASSERT_EQ(targets.size(), 100u);
    for (std::size_t i = 0; i < 100; ++i) {
      EXPECT_EQ(inputs[i], static_cast<float>(text[i]));
      EXPECT_EQ(targets[i], text[i + 1]);
    }
  }
  // Exactly context + 1 bytes: one window. max_batches caps the epoch.
  TextWindows one(pseudo_text(11), options(10, 4, false));
  EXPECT_EQ(one.windows_per_epoch(), 1);
  TextWindowsOptions capped = options(10, 4, false);
  capped.max_batches = 2;
  TextWindows two(text, capped);
  EXPECT_EQ(two.batches_per_epoch(), 2);
  EXPECT_EQ(two.windows_per_epoch(), 8);
  EXPECT_EQ(epoch_batches(two, 0).size(), 2u);
  capped.max_batches = 0;
  TextWindows none(text, capped);
  EXPECT_EQ(epoch_batches(none, 0).size(), 0u);
}

TEST(TextWindows, Errors) {
  const std::vector<std::uint8_t> text = pseudo_text(100);
  expect_error([] { TextWindows(pseudo_text(128), options(128, 1)); }, {"128 bytes", "context 128", "--context"});
  expect_error([&] { TextWindows(text, options(0, 1)); }, {"context must be at least 1"});
  expect_error([&] { TextWindows(text, options(4, 0)); }, {"batch_size must be at least 1"});
  TextWindowsOptions o = options(4, 2);
  o.batches_per_epoch = -1;
  expect_error([&] { TextWindows(text, o); }, {"batches_per_epoch must be >= 0"});
  o = options(4, 2, false);
  o.batches_per_epoch = 3;
  expect_error([&] { TextWindows(text, o); }, {"batches_per_epoch", "max_batches"});
  o = options(4, 2);
  o.max_batches = 3;
  expect_error([&] { TextWindows(text, o); }, {"max_batches", "evaluation"});
  o = options(4, 2, false);
  o.max_batches = -2;
  expect_error([&] { TextWindows(text, o); }, {"max_batches must be >= 0"});

  TextWindows w(text, options(4, 2));
  Batch b;
  expect_error<StateError>([&] { w.next(b); }, {"start_epoch"});
  expect_error([&] { w.start_epoch(-1); }, {"epoch must be >= 0"});
  expect_error([&] { w.start_epoch(0, w.batches_per_epoch() + 1); }, {"first_batch"});
  expect_error([&] { w.start_epoch(0, -1); }, {"first_batch"});
}

// The PyTorch peer's formula: the Python reference, run with python3, names the same starts
// (including seeds and counters that wrap modulo 2^64).
TEST(TextWindowsRandom, StartsMatchPythonReference) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not on PATH";
  TempDir dir;
  const std::string script = std::string(MIXPREC_TESTS_SOURCE_DIR) + "/python/text_windows.py";
  struct Case {
    std::uint64_t seed;
    std::int64_t epoch, batch, batch_size, bpe, n, context;
  };
  const Case cases[] = {{0, 0, 0, 4, 10, 1000, 16},
                        {42, 3, 7, 5, 9, 2'500'000, 128},
                        {std::numeric_limits<std::uint64_t>::max(), 1'000'000, 12345, 3, 1'000'000'007, 77, 5}};
  const std::string out = dir / "starts.txt";
  std::ostringstream os;
  os << "python3 '" << script << "'";
  std::vector<std::int64_t> ours;
  for (const Case& c : cases) {
    os << ' ' << c.seed << ' ' << c.epoch << ' ' << c.batch << ' ' << c.batch_size << ' ' << c.bpe << ' ' << c.n << ' '
       << c.context;
    for (std::int64_t r = 0; r < c.batch_size; ++r) {
      ours.push_back(text_window_start(c.seed, c.epoch, c.batch, r, c.batch_size, c.bpe, c.n, c.context));
    }
  }
  os << " > '" << out << "'";
  const std::string cmd = os.str();
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
  std::ifstream in(out);
  std::vector<std::int64_t> python;
  for (std::int64_t s; in >> s;) python.push_back(s);
  EXPECT_EQ(python, ours) << cmd;
  // And TextWindows itself places its rows there.
  TextWindowsOptions o = options(5, 3, true, std::numeric_limits<std::uint64_t>::max());
  o.batches_per_epoch = 1'000'000'007;
  TextWindows w(pseudo_text(77), o);
  w.start_epoch(1'000'000, 12345);
  Batch b;
  ASSERT_TRUE(w.next(b));
  const std::vector<float> row0 = b.inputs.to_vector();
  const std::vector<std::uint8_t> text = pseudo_text(77);
  const std::int64_t s0 = text_window_start(o.seed, 1'000'000, 12345, 0, 3, o.batches_per_epoch, 77, 5);
  for (std::int64_t j = 0; j < 5; ++j)
    EXPECT_EQ(row0[static_cast<std::size_t>(j)], text[static_cast<std::size_t>(s0 + j)]);
}

}  // namespace
}  // namespace mixprec::data
