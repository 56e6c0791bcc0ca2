// Fuzzes the gzip path of the IDX readers with well-formed gzip streams: the input is the
// uncompressed IDX bytes, gzipped here, so mutations reach the IDX checks behind zlib instead of
// stopping at a corrupt-gzip error (fuzz_idx mutates the compressed bytes themselves).
#include <zlib.h>

#include "fuzz_util.h"
#include "mixprec/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = (mixprec::fuzz::scratch_dir() / "input-idx.gz").string();
  gzFile out = gzopen(path.c_str(), "wb1");
  if (out == nullptr || (size > 0 && gzwrite(out, data, static_cast<unsigned>(size)) == 0) ||
      gzclose(out) != Z_OK) {
    std::fprintf(stderr, "fuzz_idx_gzip: cannot write %s\n", path.c_str());
    std::abort();
  }
  mixprec::fuzz::run_one([&] { (void)mixprec::data::read_idx_images(path); });
  mixprec::fuzz::run_one([&] { (void)mixprec::data::read_idx_labels(path); });
  return 0;
}
