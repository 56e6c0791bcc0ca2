// Fuzzes amp::GradScaler::from_json (the loss scaler's state in a checkpoint's state.json).
#include "fuzz_util.h"
#include "mixprec/amp/grad_scaler.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return mixprec::fuzz::run_one([&] {
    const mixprec::amp::GradScalerState s =
        mixprec::amp::GradScaler::from_json(mixprec::fuzz::as_view(data, size));
    (void)mixprec::amp::to_json(s);
  });
}
