// Fuzzes io::decode_safetensors, then looks up every tensor it returned by name.
#include "fuzz_util.h"
#include "mixprec/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return mixprec::fuzz::run_one([&] {
    const mixprec::io::SafetensorsFile f =
        mixprec::io::decode_safetensors(mixprec::fuzz::as_view(data, size), "fuzz.safetensors");
    for (const auto& [name, tensor] : f.tensors) (void)mixprec::io::find_tensor(f, name, "fuzz");
  });
}
