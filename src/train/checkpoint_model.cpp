#include "mixprec/train/checkpoint_model.h"

#include <map>

#include "mixprec/amp/precision.h"
#include "mixprec/core/error.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/io/safetensors.h"
#include "train/data_schema.h"
#include "train/train_checkpoint.h"

namespace mixprec::train {

CheckpointModel load_checkpoint_model(const std::string& path, const std::string& expect_task) {
  CheckpointModel out;
  out.path = io::resolve_checkpoint(path);
  const io::CheckpointFiles files = io::load_checkpoint(out.path);
  const detail::CheckpointHeader h = detail::read_checkpoint_header(files, out.path);
  out.config = h.config;
  out.precision = h.resolved_precision;
  out.spec = models::model_spec(h.config.model);
  MIXPREC_CHECK(expect_task.empty() || expect_task == models::name(out.spec.task), ValueError,
                "checkpoint",
                "'" << out.path << "' holds a " << out.spec.name << " (" << models::name(out.spec.task)
                    << "), not a " << expect_task << "; train one with --model gpt-mini");
  out.model = models::build_model(out.spec, models::resolve_options(out.spec, h.config.model_options()));
  const amp::PrecisionPolicy policy = amp::PrecisionPolicy::for_mode(amp::parse_precision_mode(out.precision));
  amp::apply_parameter_dtypes(*out.model, policy);
  out.autocast = policy.dtypes.compute != DType::f32;
  out.compute = out.autocast ? policy.dtypes.compute : DType::bf16;

  const auto it = files.files.find("model.safetensors");
  MIXPREC_CHECK(it != files.files.end(), ValueError, "checkpoint",
                "'" << out.path << "' has no model.safetensors; it is not a mixprec training checkpoint");
  io::SafetensorsFile weights = io::decode_safetensors(it->second, out.path + "/model.safetensors");
  std::map<std::string, Tensor> state;
  for (auto& [name, t] : weights.tensors) state.emplace(name, std::move(t));
  out.model->load_state_dict(state, /*strict=*/true);
  out.model->eval();
  if (h.data_schema.is_object() && h.data_schema.value("kind", "") == "csv") {
    out.tabular = detail::tabular_schema_from_json(h.data_schema, "checkpoint '" + out.path + "'");
  }
  return out;
}

}  // namespace mixprec::train
