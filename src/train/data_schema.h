#pragma once
// How a run's inputs were derived from its files, as the JSON a checkpoint stores under
// "data_schema" in state.json: for csv, the data::TabularSchema (feature names, the training
// rows' mean and stddev per feature, the target column, the class count or the target's
// scaling); for idx, the image size, the pixel shift and scale and the class count. `mixprec
// predict` reads it to treat new rows exactly as the training rows were treated.
#include <string>

#include <nlohmann/json.hpp>

#include "mixprec/data/tabular.h"

namespace mixprec::train::detail {

/// {"kind": "csv", "features": [...], "mean": [...], "stddev": [...], "target": ..., "task":
/// "classification"|"regression", "num_classes": K, "target_mean": m, "target_stddev": s}.
nlohmann::json tabular_schema_to_json(const data::TabularSchema& schema);
/// The inverse; ValueError naming `what` if j is not a csv schema or is malformed.
data::TabularSchema tabular_schema_from_json(const nlohmann::json& j, const std::string& what);

}  // namespace mixprec::train::detail
