// The cuda attention path choice (attention_path.h). Empty in a build without CUDA: the paths it
// chooses among are .cu kernels.
#include "kernels/cuda/attention_path.h"

#ifdef MIXPREC_HAVE_CUDA

#include <cstdlib>

#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/attention_flash.h"
#include "kernels/cuda/attention_gemm.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels::cuda {

const char* attention_path_name(AttentionPath p) {
  switch (p) {
    case AttentionPath::cudnn: return "cuDNN fused SDPA (P and dS rounded)";
    case AttentionPath::flash: return "cuda tensor-core flash (mma.sync, P and dS rounded)";
    case AttentionPath::gemm: return "cuda batched cuBLASLt GEMMs";
    default: return "cuda f32 flash tiles";
  }
}

AttentionPath parse_attention_path(std::string_view text) {
  if (text == "auto" || text == "cudnn") return AttentionPath::cudnn;
  if (text == "flash") return AttentionPath::flash;
  if (text == "gemm") return AttentionPath::gemm;
  MIXPREC_CHECK(text == "tiles", ValueError, "attention",
                "MIXPREC_ATTENTION must be auto, cudnn, flash, gemm or tiles, got '" << text << "'");
  return AttentionPath::tiles;
}

AttentionPath first_attention_path() {
  static const AttentionPath first = [] {
    const char* env = std::getenv("MIXPREC_ATTENTION");
    return parse_attention_path(env != nullptr ? env : "auto");
  }();
  return first;
}

AttentionChoice choose_attention_path(const AttentionDesc& d,
                                      std::initializer_list<const void*> buffers,
                                      AttentionPath from, bool reasons) {
  std::string skipped = reasons && from != AttentionPath::cudnn ? "the faster paths (MIXPREC_ATTENTION)" : "";
  const auto refused = [&](const char* path, const char* why) {
    if (!reasons) return;
    skipped += (skipped.empty() ? "" : ", ") + std::string(path) + " (" + why + ")";
  };
  if (from == AttentionPath::cudnn) {
    const char* why = cudnn_attention_refusal(d);
    if (why == nullptr) return {AttentionPath::cudnn, skipped};
    refused("cudnn", why);
  }
  if (from <= AttentionPath::flash) {
    const char* why = flash_attention_refusal(d, buffers);
    if (why == nullptr) return {AttentionPath::flash, skipped};
    refused("flash", why);
  }
  if (from <= AttentionPath::gemm) {
    if (attention_takes_gemms(d)) return {AttentionPath::gemm, skipped};
    refused("gemm", d.mask != nullptr ? "an additive mask" : "under 4096 scores per batch-head");
  }
  return {AttentionPath::tiles, skipped};
}

}  // namespace mixprec::kernels::cuda
#endif  // MIXPREC_HAVE_CUDA
