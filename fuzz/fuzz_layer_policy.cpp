// Fuzzes train::LayerPolicy::parse (--policy files), and writes back what it accepted.
#include "fuzz_util.h"
#include "mixprec/train/precision_autopilot.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return mixprec::fuzz::run_one([&] {
    const mixprec::train::LayerPolicy p =
        mixprec::train::LayerPolicy::parse(std::string(mixprec::fuzz::as_view(data, size)), "fuzz.json");
    (void)p.to_json_text();
  });
}
