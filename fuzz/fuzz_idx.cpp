// Fuzzes data::read_idx_images and data::read_idx_labels on one file, raw or gzip (zlib's gz*
// reader detects which); the readers take a path, so each input is written to a scratch file.
#include "fuzz_util.h"
#include "mixprec/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = mixprec::fuzz::write_scratch("input-idx", mixprec::fuzz::as_view(data, size));
  mixprec::fuzz::run_one([&] { (void)mixprec::data::read_idx_images(path); });
  mixprec::fuzz::run_one([&] { (void)mixprec::data::read_idx_labels(path); });
  return 0;
}
