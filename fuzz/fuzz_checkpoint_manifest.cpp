// Fuzzes a checkpoint's MANIFEST.json through io::load_checkpoint: the input is the manifest of
// a scratch checkpoint directory that also holds one small file, "model.safetensors", whose
// size and SHA-256 the seed manifests list, so mutations get past the file checks too.
#include "fuzz_util.h"
#include "mixprec/io/checkpoint.h"

namespace {
// Listed by fuzz/corpus/fuzz_checkpoint_manifest/tiny.json (bytes 7, its sha256).
constexpr std::string_view kFileContents = "weights";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    const std::string file = mixprec::fuzz::write_scratch("ckpt/model.safetensors", kFileContents);
    return std::filesystem::path(file).parent_path().string();
  }();
  mixprec::fuzz::write_scratch("ckpt/MANIFEST.json", mixprec::fuzz::as_view(data, size));
  return mixprec::fuzz::run_one([&] { (void)mixprec::io::load_checkpoint(dir); });
}
