#pragma once
/// The Hugging Face safetensors format, readable by the `safetensors` Python package:
///
///   u64 little-endian N | N bytes of JSON header | byte buffer
///
/// The header maps each tensor name to {"dtype": "F32"|"BF16"|"F16"|"F8_E4M3"|"F8_E5M2",
/// "shape": [...], "data_offsets": [begin, end]} (offsets into the byte buffer) plus an optional
/// "__metadata__": {string: string}. Files written here list tensors in the given order, lay
/// their bytes out contiguously in that order (row-major, little-endian) and pad the header with
/// spaces to a multiple of 8 bytes, as the reference implementation does.
///
/// Reading validates everything a damaged or hostile file could get wrong (header length beyond
/// the file, invalid JSON or UTF-8, duplicate names, unknown dtype, shape not matching the byte
/// count, offsets that overlap, leave gaps or run past the buffer, bytes after the last tensor)
/// and throws ValueError naming the file and the problem; it never reads out of bounds.
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::io {

/// Largest header accepted when reading (the reference implementation's limit too).
inline constexpr std::size_t kSafetensorsMaxHeaderBytes = 100'000'000;

/// The contents of a safetensors file: tensors in file (data offset) order, and the metadata.
struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
};

/// Serialises tensors (any dtype, any strides; values are copied row-major) and metadata.
/// ValueError for an undefined tensor, an empty or duplicate name, or the reserved name
/// "__metadata__".
std::string encode_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

/// Parses and validates a safetensors image; `what` (usually the file name) is named in every
/// error message. Tensors are new contiguous tensors filed under MemoryCategory::workspace.
SafetensorsFile decode_safetensors(std::string_view bytes, const std::string& what);

/// encode_safetensors written to path with write_file_atomically.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// read_file then decode_safetensors (errors name path).
SafetensorsFile load_safetensors(const std::string& path);

/// The tensor called name in file; ValueError naming `what` if there is none.
const Tensor& find_tensor(const SafetensorsFile& file, const std::string& name,
                          const std::string& what);

}  // namespace mixprec::io
