// --device for the commands that compute (main.cpp adds it to each).
#include <string>

#include "commands.h"
#include "mixprec/runtime/runtime.h"

namespace mixprec::tools {

void add_device_flag(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
      "--device", [](const std::string& device) { mixprec::set_device(device); },
      "Where to run: cpu (default; MIXPREC_BACKEND picks cpu or ref), devsim (the simulated "
      "device), cuda or cuda:N (an NVIDIA GPU; `mixprec env` lists them or says why there are "
      "none)");
}

}  // namespace mixprec::tools
