// Remembered machine peaks (train/machine_peaks_memory.h): the best sample per machine and
// conditions is kept in a JSON file and raises later, lower samples; `off` remembers nothing;
// a damaged or unwritable file costs one warning, never the run. Each test has its own file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "env_scope.h"
#include "io/io_test_util.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/cpu_model.h"
#include "mixprec/core/device.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/train/machine_peaks_memory.h"

namespace mixprec::train {
namespace {

using io::test::TempDir;
using mixprec::testing::EnvScope;
using nlohmann::json;

constexpr const char* kGemm = "gemm_gflops f32 n=64";
constexpr const char* kBf16Gemm = "gemm_gflops bf16 n=64";
constexpr const char* kCopy = "copy_gbytes_per_s bytes=1048576";

// Runs with another compute thread count, restoring the one it found.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : old_(num_threads()) { set_num_threads(n); }
  ~ScopedThreads() { set_num_threads(old_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int old_;
};

MachinePeaks sample(double gflops, double gbytes_per_s, std::int64_t gemm_n = 64,
                    std::int64_t copy_bytes = std::int64_t{1} << 20) {
  MachinePeaks p;
  p.gflops = gflops;
  p.gbytes_per_s = gbytes_per_s;
  p.gemm_n = gemm_n;
  p.copy_bytes = copy_bytes;
  return p;
}

// remember_best_peaks with what it printed on stderr.
MachinePeaks remember(const MachinePeaks& measured, std::string& warnings) {
  ::testing::internal::CaptureStderr();
  const MachinePeaks best = remember_best_peaks(measured);
  warnings = ::testing::internal::GetCapturedStderr();
  return best;
}

std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Each test on its own file (the binary otherwise runs with MIXPREC_PEAKS_FILE=off:
// hermetic_peaks_file.cpp).
class MachinePeaksMemory : public ::testing::Test {
 protected:
  json stored() const { return json::parse(io::read_file(file)); }
  // This machine's entry in the file.
  json stored_here() const { return stored().at("machines").at(machine_peaks_key()); }

  TempDir dir;
  const std::string file = dir / "peaks.json";
  EnvScope env{"MIXPREC_PEAKS_FILE", file};
};

TEST_F(MachinePeaksMemory, TheFirstSampleIsRememberedAndUsed) {
  ASSERT_FALSE(std::filesystem::exists(file));
  std::string warnings;
  const MachinePeaks best = remember(sample(100, 20), warnings);
  EXPECT_EQ(warnings, "");
  EXPECT_EQ(best.gflops, 100);
  EXPECT_EQ(best.gbytes_per_s, 20);
  EXPECT_EQ(best.measured_gflops, 100);
  EXPECT_EQ(best.measured_gbytes_per_s, 20);
  EXPECT_EQ(best.peaks_file, file);
  const json doc = stored();
  EXPECT_EQ(doc.at("format"), "mixprec machine peaks");
  EXPECT_EQ(doc.at("version"), 1);
  const json here = stored_here();
  EXPECT_EQ(here.at(kGemm), 100);
  EXPECT_EQ(here.at(kCopy), 20);
  EXPECT_EQ(here.size(), 2u) << here.dump();  // bf16_gflops 0: not measured, not remembered
}

TEST_F(MachinePeaksMemory, ALowerSampleGetsTheRememberedBestAndLeavesTheFile) {
  remember_best_peaks(sample(100, 20));
  const std::string before = io::read_file(file);
  const MachinePeaks best = remember_best_peaks(sample(80, 15));
  EXPECT_EQ(best.gflops, 100);
  EXPECT_EQ(best.gbytes_per_s, 20);
  EXPECT_EQ(best.measured_gflops, 80);  // the reports print this run's beside the best
  EXPECT_EQ(best.measured_gbytes_per_s, 15);
  EXPECT_EQ(io::read_file(file), before);
}

TEST_F(MachinePeaksMemory, AHigherSampleReplacesTheRememberedOneEachPeakOnItsOwn) {
  remember_best_peaks(sample(100, 20));
  MachinePeaks best = remember_best_peaks(sample(120, 25));
  EXPECT_EQ(best.gflops, 120);
  EXPECT_EQ(best.gbytes_per_s, 25);
  EXPECT_EQ(stored_here().at(kGemm), 120);
  EXPECT_EQ(stored_here().at(kCopy), 25);
  // A faster GEMM and a slower copy: the GEMM is remembered, the copy keeps its best.
  best = remember_best_peaks(sample(130, 10));
  EXPECT_EQ(best.gflops, 130);
  EXPECT_EQ(best.gbytes_per_s, 25);
  EXPECT_EQ(stored_here().at(kGemm), 130);
  EXPECT_EQ(stored_here().at(kCopy), 25);
}

TEST_F(MachinePeaksMemory, EachSizeDtypeAndThreadCountHasItsOwnBest) {
  remember_best_peaks(sample(100, 20));
  // Another copy size, another GEMM size: their own (lower) samples, not the 20 and 100 above.
  EXPECT_EQ(remember_best_peaks(sample(100, 5, 64, std::int64_t{2} << 20)).gbytes_per_s, 5);
  EXPECT_EQ(remember_best_peaks(sample(10, 20, 128)).gflops, 10);
  // A bf16 GEMM is not an f32 one.
  MachinePeaks bf16 = sample(10, 20);
  bf16.gemm_dtype = DType::bf16;
  EXPECT_EQ(remember_best_peaks(bf16).gflops, 10);
  {
    const std::string key = machine_peaks_key();
    const ScopedThreads other(num_threads() == 1 ? 2 : 1);
    ASSERT_NE(machine_peaks_key(), key);
    const MachinePeaks best = remember_best_peaks(sample(1, 1));
    EXPECT_EQ(best.gflops, 1);
    EXPECT_EQ(best.gbytes_per_s, 1);
  }
  // Back on the first thread count, its best is still there, untouched by the others.
  const MachinePeaks best = remember_best_peaks(sample(1, 1));
  EXPECT_EQ(best.gflops, 100);
  EXPECT_EQ(best.gbytes_per_s, 20);
  EXPECT_EQ(stored().at("machines").size(), 2u);
}

TEST_F(MachinePeaksMemory, TheBf16RateIsRememberedUnderItsOwnKeyWhenMeasured) {
  MachinePeaks measured = sample(100, 20);
  measured.bf16_gflops = 300;
  remember_best_peaks(measured);
  EXPECT_EQ(stored_here().at(kBf16Gemm), 300);
  measured.bf16_gflops = 200;
  MachinePeaks best = remember_best_peaks(measured);
  EXPECT_EQ(best.bf16_gflops, 300);
  EXPECT_EQ(best.measured_bf16_gflops, 200);
  // Not measured (an f32 run): stays 0, so bf16 rows are not floored at a rate of another run.
  measured.bf16_gflops = 0;
  best = remember_best_peaks(measured);
  EXPECT_EQ(best.bf16_gflops, 0);
  EXPECT_EQ(stored_here().at(kBf16Gemm), 300);
}

TEST_F(MachinePeaksMemory, SamplesThatAreNotFiniteAndPositiveAreNeverRemembered) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  MachinePeaks best = remember_best_peaks(sample(nan, inf));
  EXPECT_TRUE(std::isnan(best.gflops));  // passed through, not raised: the sample is broken
  EXPECT_TRUE(std::isinf(best.gbytes_per_s));
  remember_best_peaks(sample(0, -1));
  EXPECT_FALSE(std::filesystem::exists(file)) << "nothing usable, nothing written";
  remember_best_peaks(sample(100, 20));
  remember_best_peaks(sample(inf, nan));
  remember_best_peaks(sample(-5, 0));
  EXPECT_EQ(stored_here().at(kGemm), 100);
  EXPECT_EQ(stored_here().at(kCopy), 20);
}

TEST_F(MachinePeaksMemory, ADamagedFileGivesTheSamplesAWarningAndIsReplaced) {
  const std::string here = machine_peaks_key();
  // Each damage with values far above the samples, which must not be used.
  const std::vector<std::pair<std::string, std::string>> damaged = {
      {"not JSON", "{\"machines\": {"},
      {"empty", ""},
      {"not an object", "[1e9, 1e9]"},
      {"another format", json{{"format", "other"}, {"version", 1}, {"machines", json::object()}}.dump()},
      {"another version",
       json{{"format", "mixprec machine peaks"}, {"version", 2},
            {"machines", {{here, {{kGemm, 1e9}, {kCopy, 1e9}}}}}}.dump()},
      {"a value that is no number",
       json{{"format", "mixprec machine peaks"}, {"version", 1},
            {"machines", {{here, {{kGemm, "fast"}, {kCopy, 1e9}}}}}}.dump()},
      {"a negative value",
       json{{"format", "mixprec machine peaks"}, {"version", 1},
            {"machines", {{here, {{kGemm, 1e9}, {kCopy, -1e9}}}}}}.dump()},
  };
  for (std::size_t i = 0; i < damaged.size(); ++i) {
    SCOPED_TRACE(damaged[i].first);
    const std::string path = dir / ("damaged" + std::to_string(i) + ".json");
    const EnvScope use("MIXPREC_PEAKS_FILE", path);
    io::write_file_atomically(path, damaged[i].second);
    std::string warnings;
    MachinePeaks best = remember(sample(100, 20), warnings);
    EXPECT_EQ(best.gflops, 100);
    EXPECT_EQ(best.gbytes_per_s, 20);
    EXPECT_EQ(lines(warnings), 1u) << warnings;
    EXPECT_NE(warnings.find("mixprec: warning: machine peaks: '" + path + "'"), std::string::npos) << warnings;
    EXPECT_NE(warnings.find("replaced"), std::string::npos) << warnings;
    // Repaired: a good file with this run's peaks, read back without a word by the next run.
    const json doc = json::parse(io::read_file(path));
    EXPECT_EQ(doc.at("version"), 1);
    EXPECT_EQ(doc.at("machines").at(here).at(kGemm), 100);
    EXPECT_EQ(doc.at("machines").at(here).at(kCopy), 20);
    best = remember(sample(50, 10), warnings);
    EXPECT_EQ(warnings, "");
    EXPECT_EQ(best.gflops, 100);
    EXPECT_EQ(best.gbytes_per_s, 20);
  }
}

TEST_F(MachinePeaksMemory, ADamagedFileIsReplacedEvenWithoutASampleToRemember) {
  io::write_file_atomically(file, "{\"version\": 1,");
  std::string warnings;
  remember(sample(std::numeric_limits<double>::quiet_NaN(), 0), warnings);
  EXPECT_EQ(lines(warnings), 1u) << warnings;
  const json doc = stored();
  EXPECT_EQ(doc.at("version"), 1);
  EXPECT_TRUE(doc.at("machines").is_object());
}

TEST_F(MachinePeaksMemory, AnUnreadableFileThatCannotBeReplacedWarnsWhatToDo) {
  // A directory where the file should be: it cannot be read, and rename cannot replace it.
  std::filesystem::create_directories(dir.path() / "peaks.json" / "inside");
  std::string warnings;
  const MachinePeaks best = remember(sample(100, 20), warnings);
  EXPECT_EQ(best.gflops, 100);
  EXPECT_EQ(best.gbytes_per_s, 20);
  EXPECT_EQ(lines(warnings), 1u) << warnings;
  EXPECT_NE(warnings.find(file), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("could not be replaced"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("MIXPREC_PEAKS_FILE"), std::string::npos) << warnings;
}

TEST_F(MachinePeaksMemory, AnUnwritablePlaceWarnsOnceAndTheRunGoesOn) {
  // A regular file where the folder should be: the folder cannot be created, even by root.
  io::write_file_atomically(dir / "blocker", "a file");
  const std::string path = dir / "blocker/peaks.json";
  const EnvScope use("MIXPREC_PEAKS_FILE", path);
  std::string warnings;
  MachinePeaks best = remember(sample(100, 20), warnings);
  EXPECT_EQ(best.gflops, 100);
  EXPECT_EQ(best.gbytes_per_s, 20);
  EXPECT_EQ(best.peaks_file, path);
  EXPECT_EQ(lines(warnings), 1u) << warnings;
  EXPECT_NE(warnings.find(path), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("MIXPREC_PEAKS_FILE"), std::string::npos) << warnings;
  best = remember(sample(100, 20), warnings);  // `bench --compare` remembers once per precision
  EXPECT_EQ(warnings, "");
}

TEST_F(MachinePeaksMemory, ConcurrentRunsLoseNoMaximum) {
  // Each thread is a run ending at the same moment: one GEMM key they all raise, and a copy key
  // of each its own. Without the lock a run would rename its file over another's new maxima.
  constexpr int kRuns = 8;
  std::vector<std::thread> runs;
  for (int i = 0; i < kRuns; ++i) {
    runs.emplace_back([i] {
      remember_best_peaks(sample(10 + i, 10 + i, 64, std::int64_t{i + 1} << 20));
    });
  }
  for (std::thread& t : runs) t.join();
  const json here = stored_here();
  EXPECT_EQ(here.at(kGemm), 10 + kRuns - 1);
  for (int i = 0; i < kRuns; ++i) {
    EXPECT_EQ(here.at("copy_gbytes_per_s bytes=" + std::to_string(std::int64_t{i + 1} << 20)), 10 + i);
  }
}

TEST_F(MachinePeaksMemory, TheKeyNamesTheMachineAndTheConditions) {
  const std::string key = machine_peaks_key();
  EXPECT_NE(key.find(cpu_model_name()), std::string::npos) << key;
  EXPECT_NE(key.find("logical CPUs " + std::to_string(std::thread::hardware_concurrency())), std::string::npos) << key;
  EXPECT_NE(key.find("threads " + std::to_string(num_threads())), std::string::npos) << key;
  EXPECT_NE(key.find(std::string("isa ") + name(max_isa())), std::string::npos) << key;
  EXPECT_NE(key.find("backend " + kernel_backend()), std::string::npos) << key;
  EXPECT_NE(key.find("device " + to_string(current_device())), std::string::npos) << key;
}

TEST(MachinePeaksMemoryOff, OffUsesTheSamplesAndWritesNothing) {
  TempDir dir;
  const EnvScope xdg("XDG_CACHE_HOME", dir.path().string());
  const EnvScope home("HOME", dir.path().string());
  const std::string default_file = dir / "mixprec/machine_peaks.json";
  {
    const EnvScope unset("MIXPREC_PEAKS_FILE", std::nullopt);
    ASSERT_EQ(machine_peaks_file(), default_file);
    remember_best_peaks(sample(100, 20));  // a best in the default file, which off must not use
  }
  const std::vector<std::string> files = io::test::entries(dir.path() / "mixprec");
  const std::string before = io::read_file(default_file);
  const EnvScope off("MIXPREC_PEAKS_FILE", "off");
  EXPECT_EQ(machine_peaks_file(), "");
  std::string warnings;
  const MachinePeaks best = remember(sample(80, 15), warnings);
  EXPECT_EQ(warnings, "");
  EXPECT_EQ(best.gflops, 80);
  EXPECT_EQ(best.gbytes_per_s, 15);
  EXPECT_EQ(best.measured_gflops, 80);
  EXPECT_EQ(best.measured_gbytes_per_s, 15);
  EXPECT_EQ(best.peaks_file, "");
  EXPECT_EQ(io::read_file(default_file), before);
  EXPECT_EQ(io::test::entries(dir.path() / "mixprec"), files);
  EXPECT_EQ(io::test::entries(dir.path()), std::vector<std::string>{"mixprec"});
}

TEST(MachinePeaksMemoryFile, TheEnvironmentChoosesTheFile) {
  const EnvScope xdg("XDG_CACHE_HOME", "/x/cache");
  const EnvScope home("HOME", "/home/u");
  {
    const EnvScope chosen("MIXPREC_PEAKS_FILE", "/somewhere/peaks.json");
    EXPECT_EQ(machine_peaks_file(), "/somewhere/peaks.json");
  }
  {
    const EnvScope empty("MIXPREC_PEAKS_FILE", "");  // empty counts as unset
    EXPECT_EQ(machine_peaks_file(), "/x/cache/mixprec/machine_peaks.json");
  }
  const EnvScope unset("MIXPREC_PEAKS_FILE", std::nullopt);
  EXPECT_EQ(machine_peaks_file(), "/x/cache/mixprec/machine_peaks.json");
  {
    const EnvScope relative("XDG_CACHE_HOME", "cache");  // the XDG spec ignores relative paths
    EXPECT_EQ(machine_peaks_file(), "/home/u/.cache/mixprec/machine_peaks.json");
  }
  {
    const EnvScope no_xdg("XDG_CACHE_HOME", std::nullopt);
    EXPECT_EQ(machine_peaks_file(), "/home/u/.cache/mixprec/machine_peaks.json");
    const EnvScope no_home("HOME", std::nullopt);
    EXPECT_EQ(machine_peaks_file(), "");
  }
}

TEST(MachinePeaksMemoryFile, DescribePeakSaysWhereTheValueCameFrom) {
  const EnvScope home("HOME", "/home/u");
  EXPECT_EQ(describe_peak(16.9, 16.9, "GB/s", ""), "16.9 GB/s (this run; not remembered)");
  EXPECT_EQ(describe_peak(22.7, 16.9, "GB/s", "/home/u/.cache/mixprec/machine_peaks.json"),
            "22.7 GB/s (best remembered; this run 16.9 GB/s, ~/.cache/mixprec/machine_peaks.json)");
  EXPECT_EQ(describe_peak(250, 240.04, "GFLOP/s", "/home/user2/peaks.json"),
            "250.0 GFLOP/s (best remembered; this run 240.0 GFLOP/s, /home/user2/peaks.json)");
}

}  // namespace
}  // namespace mixprec::train
