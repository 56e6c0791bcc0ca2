// Every piece of GPU work runs on the backend's one stream (core/cuda_runtime.h, cuda_stream();
// the kernels' stream()): what keeps a download ordered after the kernels it reads, and what a
// CUDA graph capture of a training step needs (a synchronous call or a launch on the legacy
// stream fails the capture). Checked on the source text, so on every machine, GPU or not:
//  - a kernel launch `k<<<grid, block, smem, stream>>>` must name the stream as its 4th launch
//    argument (`stream()`, or `backend_stream()` in host files; nothing else is documented as
//    the stream), never leave it out (the legacy default stream);
//  - no synchronous runtime copy, memset or device-wide synchronisation (cudaMemcpy(,
//    cudaMemset(, cudaDeviceSynchronize and their 2D/3D/symbol/peer forms) outside
//    src/core/gpu.cpp, the one file that sees the runtime's transfers.
// Comments and string literals are skipped, so a message or a comment may name the calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

/// The names a launch may pass as its stream (launch.cuh's stream(); stream_bridge.h's
/// backend_stream() for host .cpp files).
const char* const kStreamNames[] = {"stream()", "backend_stream()"};

/// The one file allowed synchronous runtime calls (relative to the source root).
constexpr const char* kRuntimeFile = "src/core/gpu.cpp";

/// text with comments and string and character literals replaced by spaces; newlines kept, so
/// offsets still give line numbers.
std::string code_only(const std::string& text) {
  std::string out = text;
  const std::size_t n = text.size();
  auto blank = [&](std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to && k < n; ++k) {
      if (out[k] != '\n') out[k] = ' ';
    }
  };
  std::size_t i = 0;
  while (i < n) {
    const char c = text[i];
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      const std::size_t end = text.find('\n', i);
      blank(i, end == std::string::npos ? n : end);
      i = end == std::string::npos ? n : end;
    } else if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      const std::size_t end = text.find("*/", i + 2);
      const std::size_t stop = end == std::string::npos ? n : end + 2;
      blank(i, stop);
      i = stop;
    } else if (c == 'R' && i + 1 < n && text[i + 1] == '"' &&
               (i == 0 || !(std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_'))) {
      // Raw string R"delim( ... )delim".
      const std::size_t open = text.find('(', i + 2);
      if (open == std::string::npos) break;
      // Built by appends: GCC 12's -Wrestrict misfires on ")" + std::string at -O3.
      std::string close(1, ')');
      close.append(text, i + 2, open - (i + 2));
      close += '"';
      const std::size_t end = text.find(close, open + 1);
      const std::size_t stop = end == std::string::npos ? n : end + close.size();
      blank(i, stop);
      i = stop;
    } else if (c == '"' || c == '\'') {
      if (c == '\'' && i > 0 && std::isxdigit(static_cast<unsigned char>(text[i - 1]))) {
        // A digit separator (1'000, 0xFF'FF) when the word before it is a number.
        std::size_t w = i;
        while (w > 0 && (std::isalnum(static_cast<unsigned char>(text[w - 1])) || text[w - 1] == '\'')) --w;
        if (std::isdigit(static_cast<unsigned char>(text[w]))) {
          ++i;
          continue;
        }
      }
      std::size_t k = i + 1;
      while (k < n && text[k] != c && text[k] != '\n') k += text[k] == '\\' ? 2 : 1;
      blank(i, k + 1);
      i = k + 1;
    } else {
      ++i;
    }
  }
  return out;
}

int line_of(const std::string& text, std::size_t offset) {
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

std::string trim(const std::string& s) {
  const std::size_t b = s.find_first_not_of(" \t\n\r");
  if (b == std::string::npos) return "";
  const std::size_t e = s.find_last_not_of(" \t\n\r");
  return s.substr(b, e - b + 1);
}

/// The violations in one file's text, each "path:line: what"; `path` is relative to the source
/// root (it decides whether launches are looked for and whether synchronous calls are allowed).
std::vector<std::string> violations(const std::string& path, const std::string& text) {
  std::vector<std::string> found;
  const std::string code = code_only(text);
  const bool device_file = path.ends_with(".cu") || path.ends_with(".cuh");
  // Launches exist only in files nvcc compiles; elsewhere `>>>` closes nested templates.
  for (std::size_t at = device_file ? code.find("<<<") : std::string::npos; at != std::string::npos;
       at = code.find("<<<", at + 3)) {
    const std::size_t end = code.find(">>>", at + 3);
    if (end == std::string::npos) {
      found.push_back(path + ":" + std::to_string(line_of(code, at)) + ": kernel launch without >>>");
      break;
    }
    std::vector<std::string> args(1);
    int depth = 0;
    for (std::size_t k = at + 3; k < end; ++k) {
      const char ch = code[k];
      if (ch == '(' || ch == '[' || ch == '{') ++depth;
      if (ch == ')' || ch == ']' || ch == '}') --depth;
      if (ch == ',' && depth == 0) {
        args.emplace_back();
      } else {
        args.back() += ch;
      }
    }
    const std::string fourth = args.size() >= 4 ? trim(args[3]) : "";
    const bool named = std::any_of(std::begin(kStreamNames), std::end(kStreamNames),
                                   [&](const char* s) { return fourth == s; });
    if (args.size() < 4 || !named) {
      std::string config = trim(code.substr(at + 3, end - at - 3));
      std::replace(config.begin(), config.end(), '\n', ' ');
      found.push_back(path + ":" + std::to_string(line_of(code, at)) + ": kernel launch <<<" +
                      config + ">>> " +
                      (args.size() < 4 ? "has " + std::to_string(args.size()) +
                                             " launch arguments: the 4th must be stream()"
                                       : "runs on '" + fourth + "', not on stream()"));
    }
  }
  if (path != kRuntimeFile) {
    // Identifier tokens followed (after blanks) by '(': the calls, not cudaMemcpyAsync and
    // the like, whose tokens are longer. (A token scan, not std::regex: GCC 12 warns inside
    // <regex> under the sanitizer build's -O1 -Werror.)
    static const std::set<std::string> sync_calls = {
        "cudaMemcpy",      "cudaMemcpy2D",          "cudaMemcpy3D",   "cudaMemcpyToSymbol",
        "cudaMemcpyFromSymbol", "cudaMemcpyPeer",   "cudaMemset",     "cudaMemset2D",
        "cudaMemset3D",    "cudaDeviceSynchronize", "cudaThreadSynchronize"};
    const auto is_word = [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_';
    };
    for (std::size_t i = 0; i < code.size();) {
      if (!is_word(code[i])) {
        ++i;
        continue;
      }
      const std::size_t at = i;
      while (i < code.size() && is_word(code[i])) ++i;
      const std::string token = code.substr(at, i - at);
      std::size_t next = i;
      while (next < code.size() && std::isspace(static_cast<unsigned char>(code[next])) != 0) ++next;
      if (next < code.size() && code[next] == '(' && sync_calls.count(token) != 0) {
        found.push_back(path + ":" + std::to_string(line_of(code, at)) + ": synchronous " + token +
                        " outside " + kRuntimeFile +
                        ": queue it on stream() (cudaMemcpyAsync, cudaMemsetAsync, "
                        "cudaStreamSynchronize) or go through core/cuda_runtime.h");
      }
    }
  }
  return found;
}

fs::path source_root() { return fs::path(MIXPREC_TESTS_SOURCE_DIR).parent_path(); }

TEST(StreamDiscipline, TheScannerFlagsWhatItMust) {
  struct Case {
    const char* path;
    const char* text;
    std::size_t violations;
  };
  const Case cases[] = {
      // Launches: the stream named, left out, or another one.
      {"src/kernels/cuda/x.cu", "k<<<grid(n), kThreads, 0, stream()>>>(a, b);", 0},
      {"src/kernels/cuda/x.cu", "k<T, 2><<<dim3(a, b), std::min<int>(c, 4),\n  bytes, stream()>>>(a);", 0},
      {"src/kernels/cuda/x.cu", "k<<<grid(n), kThreads>>>(a);", 1},
      {"src/kernels/cuda/x.cu", "k<<<grid(n), kThreads, 0>>>(a);", 1},
      {"src/kernels/cuda/x.cu", "k<<<grid(n), kThreads, 0, nullptr>>>(a);", 1},
      {"src/kernels/cuda/x.cu", "k<<<g, t, 0, 0>>>(a);", 1},
      // Synchronous calls, outside gpu.cpp only; the Async forms and mentions in comments and
      // strings are fine.
      {"src/kernels/cuda/x.cu", "cudaMemcpy(d, s, n, cudaMemcpyDeviceToHost);", 1},
      {"src/ops/x.cpp", "cudaMemset (d, 0, n);", 1},
      {"tools/x.cpp", "(void)cudaDeviceSynchronize();", 1},
      {"src/core/gpu.cpp", "cudaDeviceSynchronize();", 0},
      {"src/kernels/cuda/x.cu", "cudaMemcpyAsync(d, s, n, k, stream());", 0},
      {"src/kernels/cuda/x.cu",
       "// cudaMemcpy(d, s) k<<<1, 1>>>\n/* cudaMemset(p) */ f(\"cudaDeviceSynchronize()\");", 0},
      {"src/kernels/cuda/x.cu", "f(R\"(cudaMemcpy(a) \" )\"); g('\"'); int n = 1'000;", 0},
      // `>>>` in a host file closes templates.
      {"src/x.cpp", "std::vector<std::vector<std::vector<int>>> v;", 0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(violations(c.path, c.text).size(), c.violations) << c.path << ": " << c.text;
  }
  // The line is reported.
  const std::vector<std::string> v = violations("src/kernels/cuda/x.cu", "\n\nk<<<1, 2>>>();");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rfind("src/kernels/cuda/x.cu:3: kernel launch <<<1, 2>>>", 0), 0u) << v[0];
}

TEST(StreamDiscipline, EveryLaunchNamesTheStreamAndNoSynchronousCallEscapesGpuCpp) {
  const fs::path root = source_root();
  ASSERT_TRUE(fs::exists(root / "src/kernels/cuda/launch.cuh")) << "cannot find the sources at " << root;
  std::vector<std::string> all;
  std::size_t files = 0, device_files = 0;
  for (const char* dir : {"src", "tools", "bench", "examples"}) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      if (!entry.is_regular_file()) continue;
      const std::string ext = entry.path().extension().string();
      if (ext != ".cu" && ext != ".cuh" && ext != ".cpp" && ext != ".h" && ext != ".hpp" && ext != ".cc") {
        continue;
      }
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      const std::string rel = fs::relative(entry.path(), root).generic_string();
      ++files;
      device_files += ext == ".cu" || ext == ".cuh";
      for (std::string& v : violations(rel, text.str())) all.push_back(std::move(v));
    }
  }
  // The walk must have seen the backend (a wrong root would pass vacuously).
  EXPECT_GT(device_files, 20u);
  EXPECT_GT(files, 300u);
  std::string report;
  for (const std::string& v : all) report += "\n  " + v;
  EXPECT_TRUE(all.empty()) << all.size() << " place(s) bypass the backend's stream:" << report;
}

}  // namespace
