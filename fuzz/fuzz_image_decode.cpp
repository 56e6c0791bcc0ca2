// Fuzzes the JPEG and PNG decoding behind --data images: (data::detail::decode_image, private:
// the image-folder source calls it on every file). The bytes go in as they are; the signature
// picks libjpeg-turbo or libpng, so both decoders and their error paths (setjmp/longjmp for
// libjpeg) see mutated streams. A ValueError is the expected answer to bad bytes.
#include "data/image_decode.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return mixprec::fuzz::run_one([&] {
    const mixprec::data::detail::RgbImage img = mixprec::data::detail::decode_image(data, size, "fuzz-input");
    // Every pixel of the result is read, so a short buffer is found by AddressSanitizer.
    unsigned sum = 0;
    for (const std::uint8_t v : img.rgb) sum += v;
    if (img.rgb.size() != static_cast<std::size_t>(3 * img.width * img.height) || sum == 0xFFFFFFFFu) std::abort();
  });
}
