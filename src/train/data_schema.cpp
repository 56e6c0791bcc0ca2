#include "train/data_schema.h"

#include "mixprec/core/error.h"
#include "io/json_number.h"

namespace mixprec::train::detail {

using nlohmann::json;

json tabular_schema_to_json(const data::TabularSchema& s) {
  return json{{"kind", "csv"},
              {"features", s.features},
              {"mean", s.mean},
              {"stddev", s.stddev},
              {"target", s.target},
              {"task", s.regression ? "regression" : "classification"},
              {"num_classes", s.num_classes},
              {"target_mean", s.target_mean},
              {"target_stddev", s.target_stddev}};
}

data::TabularSchema tabular_schema_from_json(const json& j, const std::string& what) {
  MIXPREC_CHECK(j.is_object() && j.contains("kind") && j.at("kind") == "csv", ValueError, "checkpoint",
                what << " was not trained on a table (--data csv:PATH), so it has no feature columns to "
                        "read new rows by");
  data::TabularSchema s;
  try {
    s.features = j.at("features").get<std::vector<std::string>>();
    s.mean = j.at("mean").get<std::vector<float>>();
    s.stddev = j.at("stddev").get<std::vector<float>>();
    s.target = j.at("target").get<std::string>();
    s.regression = j.at("task").get<std::string>() == "regression";
    s.num_classes = io::json_integer<std::int64_t>(j.at("num_classes"), "checkpoint", what + ": num_classes");
    s.target_mean = j.at("target_mean").get<float>();
    s.target_stddev = j.at("target_stddev").get<float>();
  } catch (const json::exception& e) {
    MIXPREC_CHECK(false, ValueError, "checkpoint", what << ": data_schema is malformed: " << e.what());
  }
  MIXPREC_CHECK(s.mean.size() == s.features.size() && s.stddev.size() == s.features.size() && !s.features.empty(),
                ValueError, "checkpoint",
                what << ": data_schema has " << s.features.size() << " features but " << s.mean.size()
                     << " means and " << s.stddev.size() << " standard deviations");
  return s;
}

}  // namespace mixprec::train::detail
