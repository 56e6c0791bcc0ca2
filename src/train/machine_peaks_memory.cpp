// The best machine peaks, remembered in a small JSON file: read, raised by this run's samples,
// and written back atomically only when a sample beat what was there. The file is a cache of
// measurements, never an input a run depends on: whatever is wrong with it costs a warning and
// the remembering, never the run.
#include "mixprec/train/machine_peaks_memory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/cpu_model.h"
#include "mixprec/core/device.h"
#include "mixprec/core/error.h"
#include "mixprec/core/gpu.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/runtime/runtime.h"

namespace mixprec::train {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "mixprec machine peaks";
constexpr int kVersion = 1;
constexpr const char* kFixIt = "remove or fix it, or set MIXPREC_PEAKS_FILE to another file or to off";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// What may be remembered: a rate that was measured. 0 means "not measured" (bf16_gflops of an
// f32 run), and NaN, infinities or negative rates come only from a broken measurement.
bool usable(double rate) { return std::isfinite(rate) && rate > 0; }

// A message without its "<op>: " prefix, to be quoted inside a sentence of ours.
std::string reason_of(const Error& e) {
  const std::string what = e.what();
  return what.rfind(e.op() + ": ", 0) == 0 ? what.substr(e.op().size() + 2) : what;
}

// Each distinct warning once per process: `bench --compare` remembers once per precision, and
// an unwritable file would otherwise be reported for each.
void warn_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(message).second) std::fprintf(stderr, "mixprec: warning: machine peaks: %s\n", message.c_str());
}

std::string gemm_key(DType dtype, std::int64_t n) {
  return std::string("gemm_gflops ") + name(dtype) + " n=" + std::to_string(n);
}

std::string copy_key(std::int64_t bytes) { return "copy_gbytes_per_s bytes=" + std::to_string(bytes); }

json empty_document() {
  return json{{"format", kFormat},
              {"version", kVersion},
              {"about", "the best GEMM rates and copy bandwidths mixprec bench and profile have "
                        "measured, per machine (docs/performance.md, Method); safe to delete"},
              {"machines", json::object()}};
}

// Why doc is not a peaks file of this version, or "" if it is. Every remembered value must be a
// usable rate: a hand-edited 0 or "fast" would otherwise become a floor.
std::string document_problem(const json& doc) {
  if (!doc.is_object() || !doc.contains("format") || doc.at("format") != kFormat) {
    return std::string("its \"format\" is not \"") + kFormat + "\"";
  }
  // == on the json value: get<int>() would throw for a string, or cast a JSON 1e300.
  if (!doc.contains("version") || doc.at("version") != kVersion) {
    return "its \"version\" is not " + std::to_string(kVersion) + ", the one this mixprec reads";
  }
  if (!doc.contains("machines") || !doc.at("machines").is_object()) return "it has no \"machines\" object";
  for (const auto& [machine, peaks] : doc.at("machines").items()) {
    if (!peaks.is_object()) return "machine \"" + machine + "\" is not an object";
    for (const auto& [peak, value] : peaks.items()) {
      if (!value.is_number() || !usable(value.get<double>())) {
        return "\"" + peak + "\" of machine \"" + machine + "\" is not a positive number";
      }
    }
  }
  return "";
}

// The file's document, or an empty one and why the file could not be used ("" for a file that
// does not exist yet: the first run on this machine, or a folder that could not be created,
// which the write then reports).
json load(const std::string& path, std::string& problem) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) return empty_document();
  std::string text;
  try {
    text = io::read_file(path);
  } catch (const Error& e) {
    problem = reason_of(e);
    return empty_document();
  }
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    problem = "'" + path + "' is not valid JSON (at byte " + std::to_string(e.byte) + ")";
    return empty_document();
  }
  const std::string why = document_problem(doc);
  if (!why.empty()) {
    problem = "'" + path + "' is not a machine peaks file: " + why;
    return empty_document();
  }
  return doc;
}

// The best of sample and the value remembered under key; a higher sample replaces it.
double best_of(json& peaks, const std::string& key, double sample, bool& changed) {
  if (!usable(sample)) return sample;
  if (peaks.contains(key) && peaks.at(key).get<double>() >= sample) return peaks.at(key).get<double>();
  peaks[key] = sample;
  changed = true;
  return sample;
}

// An exclusive flock(2) on "<file>.lock" for one read-raise-write: two runs ending together
// must not both read the old maxima, or the later rename drops the other's. The lock file stays
// (removing it would race with a run taking it), and the kernel drops the lock with the process.
// Best effort: where it cannot be created (a read-only folder) the file is still read, and a
// write that was needed fails on its own and says so.
class FileLock {
 public:
  explicit FileLock(const std::string& path)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666)) {
    while (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

std::string machine_peaks_file() {
  const std::string chosen = env("MIXPREC_PEAKS_FILE");
  if (chosen == "off") return "";
  if (!chosen.empty()) return chosen;
  const std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty() && xdg.front() == '/') return xdg + "/mixprec/machine_peaks.json";
  const std::string home = env("HOME");
  if (!home.empty()) return home + "/.cache/mixprec/machine_peaks.json";
  return "";
}

std::string machine_peaks_key() {
  const Device device = current_device();
  std::string where = to_string(device);
  if (device.type == DeviceType::cuda) {
    const std::vector<GpuInfo>& gpus = gpu_inventory().gpus;
    if (device.index >= 0 && static_cast<std::size_t>(device.index) < gpus.size()) {
      where += " (" + gpus[static_cast<std::size_t>(device.index)].name + ")";
    }
  }
  return cpu_model_name() + " | logical CPUs " + std::to_string(std::thread::hardware_concurrency()) +
         " | threads " + std::to_string(num_threads()) + " | isa " + name(max_isa()) +
         " | backend " + kernel_backend() + " | device " + where;
}

MachinePeaks remember_best_peaks(const MachinePeaks& measured) {
  MachinePeaks best = measured;
  best.measured_gflops = measured.gflops;
  best.measured_bf16_gflops = measured.bf16_gflops;
  best.measured_gbytes_per_s = measured.gbytes_per_s;
  best.peaks_file = machine_peaks_file();
  if (best.peaks_file.empty()) {
    if (env("MIXPREC_PEAKS_FILE") != "off") {
      warn_once("neither MIXPREC_PEAKS_FILE, XDG_CACHE_HOME nor HOME is set, so the peaks are "
                "not remembered; the floor uses this run's");
    }
    return best;
  }
  const std::string& path = best.peaks_file;

  std::string cannot_write;  // why the folder or the file cannot be written, once known
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty()) {
    try {
      io::make_directories(folder.string());
    } catch (const Error& e) {
      cannot_write = reason_of(e);
    }
  }
  const FileLock lock(path + ".lock");
  std::string problem;
  json doc = load(path, problem);
  json& peaks = doc["machines"][machine_peaks_key()];
  if (!peaks.is_object()) peaks = json::object();
  bool changed = false;
  if (measured.gemm_n > 0) {
    best.gflops = best_of(peaks, gemm_key(measured.gemm_dtype, measured.gemm_n), measured.gflops, changed);
    best.bf16_gflops = best_of(peaks, gemm_key(DType::bf16, measured.gemm_n), measured.bf16_gflops, changed);
  }
  if (measured.copy_bytes > 0) {
    best.gbytes_per_s = best_of(peaks, copy_key(measured.copy_bytes), measured.gbytes_per_s, changed);
  }
  // A damaged file is rewritten even without a new maximum, so the next run reads a good one.
  const bool write = changed || !problem.empty();
  if (write && cannot_write.empty()) {
    try {
      io::write_file_atomically(path, doc.dump(2) + "\n");
    } catch (const Error& e) {
      cannot_write = reason_of(e);
    }
  }
  if (!problem.empty()) {
    warn_once(problem + "; the floor uses this run's peaks, and " +
              (cannot_write.empty() ? "the file was replaced with them"
                                    : "the file could not be replaced (" + cannot_write + "): " + kFixIt));
  } else if (write && !cannot_write.empty()) {
    warn_once("this run's higher peaks could not be remembered in '" + path + "' (" + cannot_write +
              "); the floor uses the best of this run and the file: " + kFixIt);
  }
  return best;
}

std::string describe_peak(double value, double measured, const char* unit, const std::string& file) {
  const auto rate = [unit](double v) {
    char buf[48];  // "%.1f" of any real rate fits; a NaN or inf prints as such
    std::snprintf(buf, sizeof buf, "%.1f ", v);
    return buf + std::string(unit);
  };
  if (file.empty()) return rate(value) + " (this run; not remembered)";
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a known false positive) on "~" + rest.
  const std::string home = env("HOME");
  std::string shown;
  if (!home.empty() && home != "/" && file.rfind(home + "/", 0) == 0) {
    shown += '~';
    shown.append(file, home.size());
  } else {
    shown = file;
  }
  return rate(value) + " (best remembered; this run " + rate(measured) + ", " + shown + ")";
}

}  // namespace mixprec::train
