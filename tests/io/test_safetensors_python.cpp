// Interoperability: files written by encode_safetensors are read by the real Python
// `safetensors` package with the same names, dtypes, shapes, element bits and metadata (see
// tests/python/check_safetensors.py). Runs when MIXPREC_PYTHON names a Python interpreter with
// safetensors and numpy installed; skipped (saying so) otherwise.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/safetensors.h"

namespace mixprec::io {
namespace {

using Named = std::vector<std::pair<std::string, Tensor>>;

// The sidecar expectation for check_safetensors.py: every element as its bit pattern.
std::string spec_json(const Named& tensors, const std::map<std::string, std::string>& metadata) {
  std::ostringstream os;
  os << "{\"tensors\": {";
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].second;
    const Tensor c = t.contiguous();
    os << (i ? ", " : "") << "\"" << tensors[i].first << "\": {\"dtype\": \""
       << (t.dtype() == DType::f32 ? "F32" : t.dtype() == DType::bf16 ? "BF16" : "F16") << "\", \"shape\": [";
    for (std::size_t d = 0; d < t.shape().size(); ++d) os << (d ? ", " : "") << t.shape()[d];
    os << "], \"bits\": [";
    for (std::int64_t k = 0; k < c.numel(); ++k) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, static_cast<const char*>(c.data_ptr()) + k * size_of(c.dtype()), size_of(c.dtype()));
      os << (k ? ", " : "") << bits;
    }
    os << "]}";
  }
  os << "}, \"metadata\": {";
  std::size_t i = 0;
  for (const auto& [k, v] : metadata) os << (i++ ? ", " : "") << "\"" << k << "\": \"" << v << "\"";
  os << "}}";
  return os.str();
}

// The checker's path comes from CMake: __FILE__ is relative when ccache rewrites paths
// (CCACHE_BASEDIR), so it cannot locate the source tree.
std::string checker_script() { return std::string(MIXPREC_TESTS_SOURCE_DIR) + "/python/check_safetensors.py"; }

// Runs the checker on (tensors, metadata); returns its exit status.
int check_with_python(const char* python, const test::TempDir& dir, const std::string& stem,
                      const Named& tensors, const std::map<std::string, std::string>& metadata) {
  const std::string file = dir / (stem + ".safetensors");
  const std::string spec = dir / (stem + ".json");
  save_safetensors(file, tensors, metadata);
  write_file_atomically(spec, spec_json(tensors, metadata));
  const std::string script = checker_script();
  const std::string cmd = std::string("'") + python + "' '" + script + "' '" + file + "' '" + spec + "'";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

TEST(IoSafetensorsPython, LoadsInRealPackage) {
  const char* python = std::getenv("MIXPREC_PYTHON");
  if (python == nullptr || *python == '\0') {
    GTEST_SKIP() << "set MIXPREC_PYTHON to a python with `safetensors` and `numpy` installed "
                    "(pip install safetensors numpy) to check files with the real package";
  }
  test::TempDir dir;
  const std::vector<std::uint32_t> f32 = {0x00000000, 0x80000000, 0x00000001, 0x7F800000,
                                          0xFF800000, 0x7FC00000, 0x7FA12345, 0x3F800000};
  const std::vector<std::uint16_t> f16 = {0x0000, 0x8000, 0x0001, 0x03FF, 0x7BFF, 0x7C00, 0x7E00, 0x3C00};
  const std::vector<std::uint16_t> bf16 = {0x0000, 0x8000, 0x0001, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0, 0x3F80};
  // numpy has no bfloat16: load_file cannot read BF16, so F32/F16 go through load_file and a
  // second file adds BF16, checked through the package's own parser (safetensors.deserialize).
  const Named plain = {{"weight", test::tensor_from_bits(f32, {2, 4}, DType::f32)},
                       {"half", test::tensor_from_bits(f16, {8}, DType::f16)},
                       {"scalar", Tensor::scalar(3.0f)},
                       {"empty", Tensor::empty({0, 3}, DType::f16)},
                       {"strided", Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1)}};
  EXPECT_EQ(check_with_python(python, dir, "plain", plain, {{"format", "mixprec"}, {"step", "7"}}), 0);
  Named mixed = plain;
  mixed.emplace_back("bf", test::tensor_from_bits(bf16, {2, 2, 2}, DType::bf16));
  EXPECT_EQ(check_with_python(python, dir, "bf16", mixed, {}), 0);
  // The checker must be able to fail: a wrong expectation gives a non-zero status.
  write_file_atomically(dir / "wrong.json", R"({"tensors": {"x": {"dtype": "F32", "shape": [1], "bits": [0]}}})");
  const std::string script = checker_script();
  const int status = std::system((std::string("'") + python + "' '" + script + "' '" + (dir / "plain.safetensors") +
                                  "' '" + (dir / "wrong.json") + "' 2>/dev/null").c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);

  // Reverse direction: a file written by the package's save_file (which orders tensors by
  // alignment and name, not as given) decodes with the values the script documents.
  const std::string written = dir / "python.safetensors";
  ASSERT_EQ(std::system((std::string("'") + python + "' '" + script + "' --write '" + written + "'").c_str()), 0);
  const SafetensorsFile f = load_safetensors(written);
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"src", "python"}}));
  ASSERT_EQ(f.tensors.size(), 3u);
  const Tensor& b = find_tensor(f, "b_f32", written);
  EXPECT_EQ(b.shape(), (Shape{2, 3}));
  EXPECT_EQ(b.to_vector(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  const Tensor& a = find_tensor(f, "a_f16", written);
  EXPECT_EQ(a.dtype(), DType::f16);
  EXPECT_EQ(a.to_vector(), (std::vector<float>{1, -2, INFINITY, 0.5f}));
  EXPECT_EQ(find_tensor(f, "c_scalar", written).shape(), Shape{});
  EXPECT_EQ(find_tensor(f, "c_scalar", written).item(), 7.0f);
}

}  // namespace
}  // namespace mixprec::io
