// Fuzzes io::read_tfrecords (TensorBoard event files are TFRecord streams).
#include "fuzz_util.h"
#include "mixprec/io/tensorboard.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return mixprec::fuzz::run_one(
      [&] { (void)mixprec::io::read_tfrecords(mixprec::fuzz::as_view(data, size)); });
}
