// safetensors encoding and validated decoding. The header is parsed with nlohmann::ordered_json
// so that the header order of a file we wrote is kept; a parser callback rejects duplicate keys,
// which a plain parse would silently resolve to the last one (hiding a damaged header). Every
// offset is checked against the buffer before any byte is copied, with overflow-checked
// arithmetic, so a hostile header can only produce an error.
#include "mixprec/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"
#include "mixprec/io/atomic_file.h"

namespace mixprec::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts would need byte swapping");

using Json = nlohmann::ordered_json;
constexpr const char* kMetadataKey = "__metadata__";

const char* st_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::f8e4m3: return "F8_E4M3";  // the names safetensors (and PyTorch) use
    case DType::f8e5m2: return "F8_E5M2";
  }
  MIXPREC_ASSERT(false);
  return "";
}

// Throws ValueError(op, "<what>: <message>").
[[noreturn]] void fail(const char* op, const std::string& what, const std::string& message) {
  throw ValueError(op, what + ": " + message);
}

std::string offsets_text(std::uint64_t begin, std::uint64_t end) {
  // Built by appending: GCC 12 reports a false -Wrestrict on "literal" + std::to_string(...).
  std::string out("[");
  out += std::to_string(begin);
  out += ", ";
  out += std::to_string(end);
  out += ']';
  return out;
}

struct Entry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

DType parse_st_dtype(const Json& value, const char* op, const std::string& what,
                     const std::string& name) {
  if (!value.is_string()) fail(op, what, "tensor '" + name + "': \"dtype\" is not a string");
  const auto& s = value.get_ref<const std::string&>();
  if (s == "F32") return DType::f32;
  if (s == "BF16") return DType::bf16;
  if (s == "F16") return DType::f16;
  if (s == "F8_E4M3") return DType::f8e4m3;
  if (s == "F8_E5M2") return DType::f8e5m2;
  fail(op, what, "tensor '" + name + "' has dtype '" + s +
                     "', which mixprec does not read (it reads F32, BF16 and F16, and F8_E4M3 and "
                     "F8_E5M2 as fp8 storage)");
}

// One tensor's header entry, with its byte count checked against its shape.
Entry parse_entry(const std::string& name, const Json& value, const char* op,
                  const std::string& what) {
  const std::string where = "tensor '" + name + "'";
  if (!value.is_object()) fail(op, what, where + ": header entry is not a JSON object");
  for (const auto& [key, unused] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail(op, what, where + ": unexpected field \"" + key + "\" in the header entry");
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(key)) fail(op, what, where + ": header entry lacks \"" + key + "\"");
  }
  Entry e;
  e.name = name;
  e.dtype = parse_st_dtype(value["dtype"], op, what, name);

  const Json& shape = value["shape"];
  if (!shape.is_array()) fail(op, what, where + ": \"shape\" is not an array");
  // Checked product: a shape whose element count overflows cannot match any real buffer.
  std::uint64_t count = 1;
  bool overflow = false;
  bool zero_dim = false;
  constexpr auto kMaxDim = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  for (const Json& d : shape) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > kMaxDim) {
      fail(op, what, where + ": \"shape\" holds " + d.dump() + ", not a non-negative integer");
    }
    const auto dim = d.get<std::uint64_t>();
    e.shape.push_back(static_cast<std::int64_t>(dim));
    if (__builtin_mul_overflow(count, dim, &count)) overflow = true;
    if (dim == 0) zero_dim = true;
  }
  if (zero_dim) {  // a zero dimension makes any product of the others harmless
    overflow = false;
    count = 0;
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, std::uint64_t{size_of(e.dtype)}, &bytes)) overflow = true;

  const Json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    fail(op, what, where + ": \"data_offsets\" is " + offsets.dump() +
                       ", not [begin, end] with non-negative integers");
  }
  e.begin = offsets[0].get<std::uint64_t>();
  e.end = offsets[1].get<std::uint64_t>();
  if (e.end < e.begin) {
    fail(op, what, where + ": data_offsets " + offsets_text(e.begin, e.end) + " end before they begin");
  }
  if (overflow || bytes != e.end - e.begin) {
    fail(op, what, where + ": shape " + to_string(e.shape) + " of " + st_dtype(e.dtype) + " needs " +
                       (overflow ? std::string("more than 2^64") : std::to_string(bytes)) +
                       " bytes but data_offsets " + offsets_text(e.begin, e.end) + " hold " +
                       std::to_string(e.end - e.begin));
  }
  return e;
}

std::map<std::string, std::string> parse_metadata(const Json& value, const char* op,
                                                  const std::string& what) {
  if (!value.is_object()) fail(op, what, "\"__metadata__\" is not a JSON object");
  std::map<std::string, std::string> out;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      fail(op, what, "\"__metadata__\" value of \"" + key + "\" is " + v.dump() + ", not a string");
    }
    out.emplace(key, v.get<std::string>());
  }
  return out;
}

// Parses the header, rejecting duplicate keys at any depth.
Json parse_header(std::string_view text, const char* op, const std::string& what) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  auto callback = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == Json::parse_event_t::key && !keys.empty()) {
      if (!keys.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  Json header;
  try {
    header = Json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    fail(op, what, std::string("the header is not valid JSON (") + e.what() + ")");
  }
  if (!duplicate.empty()) fail(op, what, "the header names \"" + duplicate + "\" twice");
  if (!header.is_object()) fail(op, what, "the header is not a JSON object");
  return header;
}

// The 8-byte length prefix n against the limit and the `available` bytes that follow it.
void check_header_length(std::uint64_t n, std::uint64_t available, const char* op,
                         const std::string& what) {
  if (n > kSafetensorsMaxHeaderBytes) {
    fail(op, what, "header length " + std::to_string(n) + " exceeds the limit of " +
                       std::to_string(kSafetensorsMaxHeaderBytes) +
                       " bytes (not a safetensors file, or damaged)");
  }
  if (n > available) {
    fail(op, what, "header length " + std::to_string(n) + " runs past the end of the file (" +
                       std::to_string(available) + " bytes follow the length; truncated?)");
  }
}

// Checks a file's length prefix against its size before the whole file is read, so a prefix
// claiming gigabytes is refused without reading (or allocating) them. Files whose size is not
// known (pipes) are left to decode.
void precheck_file(const std::string& path, const char* op) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;  // read_file reports the error
  struct stat st {};
  std::uint64_t n = 0;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 8;
  const bool got = regular && ::pread(fd, &n, 8, 0) == 8;
  ::close(fd);
  if (got) check_header_length(n, static_cast<std::uint64_t>(st.st_size) - 8, op, path);
}

SafetensorsFile decode(std::string_view bytes, const std::string& what, const char* op) {
  if (bytes.size() < 8) {
    fail(op, what, "the file is " + std::to_string(bytes.size()) +
                       " bytes, too short for the 8-byte header length (not a safetensors file, "
                       "or truncated)");
  }
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);  // little-endian (static_assert above)
  check_header_length(n, bytes.size() - 8, op, what);
  const Json header = parse_header(bytes.substr(8, n), op, what);
  const std::string_view buffer = bytes.substr(8 + n);

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      out.metadata = parse_metadata(value, op, what);
    } else {
      entries.push_back(parse_entry(key, value, op, what));
    }
  }
  for (const Entry& e : entries) {
    if (e.end > buffer.size()) {
      fail(op, what, "tensor '" + e.name + "': data_offsets " + offsets_text(e.begin, e.end) +
                         " run past the " + std::to_string(buffer.size()) +
                         "-byte data buffer (truncated?)");
    }
  }
  // The buffer must be tiled exactly: no overlaps (aliasing), no gaps, nothing after the end.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < expected) {
      fail(op, what, "tensor '" + e.name + "': data_offsets " + offsets_text(e.begin, e.end) +
                         " overlap those of tensor '" + previous->name + "' " +
                         offsets_text(previous->begin, previous->end));
    }
    if (e.begin > expected) {
      fail(op, what, "data buffer bytes " + offsets_text(expected, e.begin) +
                         " belong to no tensor (before tensor '" + e.name + "')");
    }
    expected = e.end;
    previous = &e;
  }
  if (expected != buffer.size()) {
    fail(op, what, std::to_string(buffer.size() - expected) +
                       " bytes of trailing garbage after the last tensor's data (the buffer is " +
                       std::to_string(buffer.size()) + " bytes, tensors end at " +
                       std::to_string(expected) + ")");
  }
  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    // Loading is an upload: the tensor lands on the current device.
    const TransferReason why("checkpoint load");
    Tensor t = Tensor::from_bytes(buffer.data() + e.begin, e.end - e.begin, e.shape, e.dtype);
    t.set_category(MemoryCategory::workspace);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace

std::string encode_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  constexpr const char* kOp = "encode_safetensors";
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header[kMetadataKey] = std::move(meta);  // first, as the reference writer puts it
  }
  std::vector<Tensor> contiguous;
  contiguous.reserve(tensors.size());
  std::set<std::string_view> seen;  // ordered_json lookups are linear: keep our own index
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    MIXPREC_CHECK(!name.empty(), ValueError, kOp, "a tensor name is empty; give every tensor a name");
    MIXPREC_CHECK(name != kMetadataKey, ValueError, kOp,
                  "\"__metadata__\" is reserved for the metadata and cannot name a tensor");
    MIXPREC_CHECK(tensor.defined(), ValueError, kOp, "tensor '" << name << "' is undefined");
    MIXPREC_CHECK(seen.insert(name).second, ValueError, kOp,
                  "tensor name '" << name << "' appears twice; names must be unique");
    Tensor c = tensor.detach().contiguous();
    const std::uint64_t end = offset + c.nbytes();
    header[name] = Json{{"dtype", st_dtype(c.dtype())},
                        {"shape", c.shape()},
                        {"data_offsets", Json::array({offset, end})}};
    offset = end;
    contiguous.push_back(std::move(c));
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(kOp, std::string("tensor names and metadata must be valid UTF-8 (") +
                              e.what() + ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // aligns the data buffer to 8 bytes

  std::string out;
  out.reserve(8 + text.size() + offset);
  const std::uint64_t n = text.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += text;
  const TransferReason why("checkpoint save");
  for (const Tensor& c : contiguous) {
    const std::vector<std::uint8_t> bytes = c.to_bytes();  // a download on a device
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  return out;
}

SafetensorsFile decode_safetensors(std::string_view bytes, const std::string& what) {
  return decode(bytes, what, "decode_safetensors");
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomically(path, encode_safetensors(tensors, metadata));
}

SafetensorsFile load_safetensors(const std::string& path) {
  precheck_file(path, "load_safetensors");
  return decode(read_file(path), path, "load_safetensors");
}

const Tensor& find_tensor(const SafetensorsFile& file, const std::string& name,
                          const std::string& what) {
  for (const auto& [n, t] : file.tensors) {
    if (n == name) return t;
  }
  std::ostringstream names;
  for (std::size_t i = 0; i < file.tensors.size() && i < 20; ++i) {
    names << (i ? ", " : "") << file.tensors[i].first;
  }
  if (file.tensors.size() > 20) names << ", ...";
  throw ValueError("find_tensor", what + ": no tensor named '" + name + "' (it holds: " +
                                      (file.tensors.empty() ? std::string("nothing") : names.str()) +
                                      ")");
}

}  // namespace mixprec::io
