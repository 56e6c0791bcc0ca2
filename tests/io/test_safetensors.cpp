// safetensors: bit-exact round trips of every dtype including NaN payloads, infinities, signed
// zeros and subnormals; 0-d, empty and strided tensors; metadata; the on-disk layout the format
// prescribes; and every kind of damaged file throws a ValueError naming the file and the
// problem. A fuzz-style sweep truncates a valid file at every length and flips header bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/safetensors.h"

namespace mixprec::io {
namespace {

using test::tensor_bytes;
using test::tensor_from_bits;
using Named = std::vector<std::pair<std::string, Tensor>>;

// Special values of each format, as bit patterns: zeros, smallest/largest subnormal, smallest
// normal, largest finite, infinities, quiet and signalling NaNs with payloads.
const std::vector<std::uint32_t> kF32Bits = {0x00000000, 0x80000000, 0x00000001, 0x007FFFFF,
                                              0x00800000, 0x7F7FFFFF, 0x7F800000, 0xFF800000,
                                              0x7FC00000, 0x7FA12345, 0xFFC00001, 0x3F800000};
const std::vector<std::uint16_t> kBF16Bits = {0x0000, 0x8000, 0x0001, 0x007F, 0x0080, 0x7F7F,
                                               0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFC1, 0x3F80};
const std::vector<std::uint16_t> kF16Bits = {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF,
                                              0x7C00, 0xFC00, 0x7E00, 0x7D01, 0xFE01, 0x3C00};

Named sample_tensors() {
  return {{"w32", tensor_from_bits(kF32Bits, {3, 4}, DType::f32)},
          {"wbf16", tensor_from_bits(kBF16Bits, {2, 2, 3}, DType::bf16)},
          {"wf16", tensor_from_bits(kF16Bits, {12}, DType::f16)},
          {"scalar", Tensor::scalar(2.5f)},
          {"empty", Tensor::empty({0}, DType::bf16)},
          {"empty2d", Tensor::empty({3, 0}, DType::f16)}};
}

// Builds a file from a header text and data buffer, with an explicit header length.
std::string raw_file(const std::string& header, const std::string& buffer, std::uint64_t n) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + buffer;
}
std::string raw_file(const std::string& header, const std::string& buffer) {
  return raw_file(header, buffer, header.size());
}

// Expects decode to throw ValueError mentioning the file name and every part.
void expect_bad(const std::string& file, std::initializer_list<std::string> parts) {
  try {
    (void)decode_safetensors(file, "bad.safetensors");
    ADD_FAILURE() << "no exception for a damaged file";
  } catch (const ValueError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("decode_safetensors: bad.safetensors: "), std::string::npos) << m;
    for (const std::string& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "want '" << p << "' in: " << m;
  }
}

TEST(IoSafetensors, RoundTripIsBitExact) {
  const Named in = sample_tensors();
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "468"}, {"empty", ""}};
  const SafetensorsFile out = decode_safetensors(encode_safetensors(in, meta), "mem");
  ASSERT_EQ(out.tensors.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(in[i].first);
    EXPECT_EQ(out.tensors[i].first, in[i].first);  // file order = the order given
    const Tensor& t = out.tensors[i].second;
    EXPECT_EQ(t.dtype(), in[i].second.dtype());
    EXPECT_EQ(t.shape(), in[i].second.shape());
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.category(), MemoryCategory::workspace);
    EXPECT_EQ(tensor_bytes(t), tensor_bytes(in[i].second));  // NaN payloads included
  }
  EXPECT_EQ(out.metadata, meta);
  EXPECT_EQ(find_tensor(out, "wf16", "mem").shape(), Shape{12});
  EXPECT_THROW((void)find_tensor(out, "nope", "mem"), ValueError);
}

TEST(IoSafetensors, LayoutFollowsTheFormat) {
  const std::string file = encode_safetensors(sample_tensors(), {{"k", "v"}});
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  EXPECT_EQ(n % 8, 0u);  // padded so the data buffer is 8-byte aligned
  const std::string header = file.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  EXPECT_EQ(header.find("{\"__metadata__\":{\"k\":\"v\"},\"w32\":{\"dtype\":\"F32\",\"shape\":[3,4],"
                        "\"data_offsets\":[0,48]},\"wbf16\":{\"dtype\":\"BF16\",\"shape\":[2,2,3],"
                        "\"data_offsets\":[48,72]}"),
            0u)
      << header;
  EXPECT_NE(header.find("\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[96,100]}"),
            std::string::npos);
  const std::size_t close = header.rfind('}');  // after the JSON: only padding spaces
  EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos);
  EXPECT_LT(header.size() - close - 1, 8u);
  // Data buffer: the tensors back to back.
  EXPECT_EQ(file.size(), 8 + n + 48 + 24 + 24 + 4);
  EXPECT_EQ(file.substr(8 + n, 48), std::string(reinterpret_cast<const char*>(kF32Bits.data()), 48));
}

TEST(IoSafetensors, StridedInputIsStoredRowMajor) {
  const Tensor base = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor t = base.transpose(0, 1);  // [3, 2] view: 1 4 2 5 3 6
  ASSERT_FALSE(t.is_contiguous());
  const SafetensorsFile out = decode_safetensors(encode_safetensors({{"t", t}, {"s", base.slice(1, 1, 3)}}), "mem");
  EXPECT_EQ(out.tensors[0].second.to_vector(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(out.tensors[1].second.to_vector(), (std::vector<float>{2, 3, 5, 6}));
}

TEST(IoSafetensors, EmptyFileAndMetadataOnly) {
  EXPECT_TRUE(decode_safetensors(encode_safetensors({}), "mem").tensors.empty());
  const SafetensorsFile m = decode_safetensors(encode_safetensors({}, {{"a", "b"}}), "mem");
  EXPECT_TRUE(m.tensors.empty());
  EXPECT_EQ(m.metadata.at("a"), "b");
}

TEST(IoSafetensors, EncodeRejectsBadNames) {
  const Tensor t = Tensor::zeros({2});
  EXPECT_THROW((void)encode_safetensors({{"a", t}, {"a", t}}), ValueError);
  EXPECT_THROW((void)encode_safetensors({{"", t}}), ValueError);
  EXPECT_THROW((void)encode_safetensors({{"__metadata__", t}}), ValueError);
  EXPECT_THROW((void)encode_safetensors({{"u", Tensor()}}), ValueError);
  EXPECT_THROW((void)encode_safetensors({{std::string("bad\xff", 4), t}}), ValueError);  // not UTF-8
}

TEST(IoSafetensors, SaveAndLoadFile) {
  test::TempDir dir;
  save_safetensors(dir / "m.safetensors", sample_tensors(), {{"a", "b"}});
  const SafetensorsFile f = load_safetensors(dir / "m.safetensors");
  EXPECT_EQ(f.tensors.size(), 6u);
  EXPECT_EQ(tensor_bytes(f.tensors[1].second), tensor_bytes(sample_tensors()[1].second));
  try {
    (void)load_safetensors(dir / "missing.safetensors");
    ADD_FAILURE();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.safetensors"), std::string::npos);
  }
  write_file_atomically(dir / "bad.safetensors", "short");
  try {
    (void)load_safetensors(dir / "bad.safetensors");
    ADD_FAILURE();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("load_safetensors: " + (dir / "bad.safetensors")), std::string::npos)
        << e.what();
  }
}

TEST(IoSafetensors, DamagedHeadersAreValueErrors) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, 'x');
  ASSERT_NO_THROW((void)decode_safetensors(raw_file(ok, eight), "x"));
  expect_bad("abc", {"too short"});
  expect_bad(raw_file(ok, eight, ok.size() + 9), {"runs past the end of the file"});
  expect_bad(raw_file(ok, eight, std::uint64_t{1} << 40), {"exceeds the limit"});
  expect_bad(raw_file(ok, eight, 0), {"not valid JSON"});
  expect_bad(raw_file(R"({"a":{"dtype":"F32",)", ""), {"not valid JSON"});
  expect_bad(raw_file("[1,2]", ""), {"not a JSON object"});
  expect_bad(raw_file(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", eight),
             {"tensor 'a'", "dtype 'F64'", "F32, BF16 and F16"});
  expect_bad(raw_file(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", eight), {"not a string"});
  expect_bad(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
             {"shape [3] of F32 needs 12 bytes but data_offsets [0, 8] hold 8"});
  expect_bad(raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight),
             {"more than 2^64"});
  expect_bad(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight), {"non-negative integer"});
  expect_bad(raw_file(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", eight), {"non-negative integer"});
  expect_bad(raw_file(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", eight), {"not an array"});
  expect_bad(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight), {"end before"});
  expect_bad(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", eight), {"data_offsets"});
  expect_bad(raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", eight), {"lacks \"data_offsets\""});
  expect_bad(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", eight),
             {"unexpected field \"x\""});
  expect_bad(raw_file(R"({"a":[1]})", eight), {"not a JSON object"});
  expect_bad(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight),
             {"names \"a\" twice"});
  expect_bad(raw_file(R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight),
             {"__metadata__", "not a string"});
  expect_bad(raw_file(R"({"__metadata__":[],"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight),
             {"__metadata__", "not a JSON object"});
  expect_bad(raw_file("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", eight),
             {"not valid JSON"});  // invalid UTF-8
}

TEST(IoSafetensors, BadOffsetsAreValueErrors) {
  const std::string t = R"({"dtype":"F32","shape":[1],"data_offsets":)";
  // Out of range: the buffer is 4 bytes, the tensor claims [4, 8].
  expect_bad(raw_file(R"({"a":)" + t + "[4,8]}}", "1234"), {"tensor 'a'", "[4, 8] run past the 4-byte data buffer"});
  // Overlap: two tensors on the same bytes.
  expect_bad(raw_file(R"({"a":)" + t + R"([0,4]},"b":)" + t + "[0,4]}}", "1234"),
             {"overlap", "'a'", "'b'"});
  // Gap: bytes [4, 8) belong to nobody.
  expect_bad(raw_file(R"({"a":)" + t + R"([0,4]},"b":)" + t + "[8,12]}}", "123456789012"),
             {"bytes [4, 8] belong to no tensor"});
  // Trailing garbage after the last tensor.
  expect_bad(raw_file(R"({"a":)" + t + "[0,4]}}", "12345678"), {"4 bytes of trailing garbage"});
  expect_bad(raw_file("{}", "x"), {"1 bytes of trailing garbage"});
  // Header order does not have to be data order; zero-size tensors may sit anywhere.
  const SafetensorsFile f = decode_safetensors(
      raw_file(R"({"b":)" + t + R"([4,8]},"z":{"dtype":"F16","shape":[0],"data_offsets":[4,4]},"a":)" + t + "[0,4]}}",
               "12345678"),
      "x");
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[0].first, "a");
  EXPECT_EQ(f.tensors[1].first, "z");
  EXPECT_EQ(tensor_bytes(f.tensors[2].second), "5678");
}

// load_safetensors checks the length prefix against the limit and the file size before reading
// the file: an 8 GiB (sparse) file whose prefix claims a 4 GiB header is refused without
// reading or allocating it.
TEST(IoSafetensors, LoadChecksTheLengthPrefixBeforeReading) {
  test::TempDir dir;
  const std::string huge = dir / "huge.safetensors";
  write_file_atomically(huge, raw_file("{}", "", std::uint64_t{1} << 32));
  std::filesystem::resize_file(huge, std::uint64_t{1} << 33);
  try {
    (void)load_safetensors(huge);
    ADD_FAILURE() << "no exception";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("header length 4294967296 exceeds the limit"), std::string::npos)
        << e.what();
  }
  const std::string past = dir / "past.safetensors";
  write_file_atomically(past, raw_file("{}", "", 1000));
  EXPECT_THROW((void)load_safetensors(past), ValueError);
}

// A shape whose element count overflows int64 but not uint64 still cannot match its offsets.
TEST(IoSafetensors, ShapeCountBeyondInt64IsRefused) {
  expect_bad(raw_file(R"({"a":{"dtype":"F8_E4M3","shape":[4294967296,2147483649],"data_offsets":[0,8]}})",
                      std::string(8, 'x')),
             {"tensor 'a'", "needs 9223372041149743104 bytes", "hold 8"});
}

// Every prefix of a valid file is invalid (the data buffer must be exactly covered), so each
// must throw ValueError; none may crash or read out of bounds (run under ASan to check the
// latter).
TEST(IoSafetensors, EveryTruncationIsValueError) {
  const std::string file = encode_safetensors(sample_tensors(), {{"k", "v"}});
  for (std::size_t len = 0; len < file.size(); ++len) {
    EXPECT_THROW((void)decode_safetensors(std::string_view(file).substr(0, len), "t"), ValueError) << len;
  }
}

// Flipping header bytes either yields another valid file (e.g. a changed name or metadata
// character) or a ValueError, never another exception or a crash; most flips must be caught.
TEST(IoSafetensors, HeaderByteFlipsAreValueErrorsOrValid) {
  const std::string file = encode_safetensors(sample_tensors(), {{"k", "v"}});
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  int rejected = 0, accepted = 0;
  for (std::size_t pos = 0; pos < 8 + n; ++pos) {
    for (const unsigned char mask : {0x01, 0x02, 0x10, 0x20, 0x80, 0xFF}) {
      std::string damaged = file;
      damaged[pos] = static_cast<char>(damaged[pos] ^ mask);
      try {
        const SafetensorsFile f = decode_safetensors(damaged, "t");
        ++accepted;
        std::size_t total = 0;  // whatever was accepted must still describe the whole buffer
        for (const auto& [name, t] : f.tensors) total += t.nbytes();
        EXPECT_EQ(total, file.size() - 8 - n) << pos;
      } catch (const ValueError&) {
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, 4 * accepted) << "rejected " << rejected << ", accepted " << accepted;
}

}  // namespace
}  // namespace mixprec::io
