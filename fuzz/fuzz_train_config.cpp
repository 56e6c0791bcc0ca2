// Fuzzes the training configuration's JSON reader (the "config" object of state.json) directly,
// so mutations are not spent on the rest of state.json. It is private API (src/train); its only
// caller turns nlohmann's json::exception into a ValueError, so that is accepted here too.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "train/config_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return mixprec::fuzz::run_one([&] {
    try {
      const nlohmann::json j = nlohmann::json::parse(mixprec::fuzz::as_view(data, size));
      const mixprec::train::TrainConfig c = mixprec::train::detail::config_from_json(j, "fuzz");
      (void)mixprec::train::detail::config_to_json(c);
    } catch (const nlohmann::json::exception&) {
    }
  });
}
