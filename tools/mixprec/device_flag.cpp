// Where and how the commands that compute run: --device, --matmul-precision and
// --attention-precision (main.cpp adds them to each).
#include <string>

#include "commands.h"
#include "mixprec/runtime/attention_precision.h"
#include "mixprec/runtime/matmul_precision.h"
#include "mixprec/runtime/runtime.h"

namespace mixprec::tools {

void add_device_flag(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
      "--device", [](const std::string& device) { mixprec::set_device(device); },
      "Where to run: cpu (default; MIXPREC_BACKEND picks cpu or ref), devsim (the simulated "
      "device), cuda or cuda:N (an NVIDIA GPU; `mixprec env` lists them or says why there are "
      "none)");
}

void add_matmul_precision_flag(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
         "--matmul-precision",
         [](const std::string& p) { runtime::set_matmul_precision(runtime::parse_matmul_precision(p)); },
         "f32 GEMMs: highest (true f32; default, or MIXPREC_MATMUL_PRECISION), high (TF32 Tensor "
         "Cores on a GPU, as PyTorch's allow_tf32; a CPU has no TF32: as highest) or medium (bf16 "
         "products with f32 accumulation on CPUs with native bf16; TF32 on a GPU)")
      ->check(CLI::IsMember({"highest", "high", "medium"}));
}

void add_attention_precision_flag(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
         "--attention-precision",
         [](const std::string& p) {
           runtime::set_attention_precision(runtime::parse_attention_precision(p));
         },
         "attention's probabilities P and score gradients dS under bf16/f16: default (rounded to "
         "that dtype before the P V, P^T dO, dS K and dS^T Q products, as FlashAttention and "
         "cuDNN do; or MIXPREC_ATTENTION_PRECISION) or highest (kept f32); f32 runs are f32 "
         "either way")
      ->check(CLI::IsMember({"default", "highest"}));
}

}  // namespace mixprec::tools
