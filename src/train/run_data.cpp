#include "train/run_data.h"

#include <sstream>

#include "mixprec/core/error.h"
#include "mixprec/data/dataloader.h"
#include "mixprec/data/dataset.h"
#include "mixprec/data/idx.h"
#include "mixprec/data/synthetic.h"
#include "mixprec/data/text_corpus.h"

namespace mixprec::train::detail {
namespace {

constexpr const char* kOp = "train";
constexpr std::int64_t kEvalBatch = 1000;
constexpr std::int64_t kSyntheticTrain = 8192, kSyntheticTest = 2048;

std::vector<std::string> split_paths(const std::string& list) {
  std::vector<std::string> paths;
  std::stringstream in(list);
  for (std::string p; std::getline(in, p, ',');) {
    if (!p.empty()) paths.push_back(p);
  }
  return paths;
}

RunData image_data(const models::ModelSpec& spec, const TrainConfig& c) {
  const bool synthetic = c.data == "synthetic" || (c.data.empty() && spec.synthetic_data);
  data::Dataset train, test;
  nlohmann::json d;
  if (synthetic) {
    MIXPREC_CHECK(spec.sample_shape.size() == 1, ValueError, kOp,
                  "--data synthetic makes flat feature vectors; model " << spec.name
                      << " takes " << to_string(spec.sample_shape));
    const std::int64_t features = spec.sample_shape[0];
    train = data::make_synthetic(c.limit_train > 0 ? c.limit_train : kSyntheticTrain, features,
                                 spec.num_classes, c.seed, 0);
    test = data::make_synthetic(c.limit_test > 0 ? c.limit_test : kSyntheticTest, features,
                                spec.num_classes, c.seed, 1);
    d["source"] = "synthetic";
  } else {
    const std::string dir = c.data_dir.empty() ? data::kFashionMnistDefaultDir : c.data_dir;
    train = data::load_fashion_mnist(dir, true, c.limit_train);
    test = data::load_fashion_mnist(dir, false, c.limit_test);
    data::check_finite(train, "training data in " + dir);
    data::check_finite(test, "test data in " + dir);
    d["source"] = "fashion-mnist";
  }
  data::check_labels(train, spec.num_classes, "training labels");
  data::check_labels(test, spec.num_classes, "test labels");
  d["train_samples"] = train.labels.size();
  d["test_samples"] = test.labels.size();

  data::DataLoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.seed = c.seed;
  data::DataLoaderOptions eo;
  eo.batch_size = kEvalBatch;
  eo.shuffle = false;
  eo.prefetch = false;
  RunData r;
  r.train = std::make_shared<data::DataLoader>(train, lo, spec.sample_shape);
  r.eval = std::make_shared<data::DataLoader>(test, eo, spec.sample_shape);
  r.description = std::move(d);
  return r;
}

RunData text_data(const models::ModelOptions& o, const TrainConfig& c) {
  std::string list = data::kFortunesDefaultDir;
  if (!c.data.empty()) list = c.data.substr(5);  // after "text:"
  const std::vector<std::string> paths = split_paths(list);
  MIXPREC_CHECK(!paths.empty(), ValueError, kOp,
                "--data text: names no file; give text:PATH[,PATH...] (files or directories)");
  const data::TextCorpus corpus = data::load_text_corpus(paths);
  data::TextSplit split = data::split_text(corpus, c.val_fraction);
  const std::int64_t need = o.context + 1;
  MIXPREC_CHECK(static_cast<std::int64_t>(split.train.size()) >= need &&
                    static_cast<std::int64_t>(split.validation.size()) >= need,
                ValueError, kOp,
                "the text in " << list << " has " << corpus.bytes.size() << " bytes: "
                               << split.train.size() << " for training and " << split.validation.size()
                               << " for validation, but a window of --context " << o.context
                               << " needs " << need << " bytes in each; give more text or a smaller --context");
  data::TextWindowsOptions to;
  to.context = o.context;
  to.batch_size = c.batch_size;
  to.seed = c.seed;
  to.random = true;
  if (c.limit_train > 0) to.batches_per_epoch = (c.limit_train + c.batch_size - 1) / c.batch_size;
  data::TextWindowsOptions vo = to;
  vo.random = false;
  vo.batches_per_epoch = 0;
  if (c.limit_test > 0) vo.max_batches = (c.limit_test + c.batch_size - 1) / c.batch_size;

  RunData r;
  auto train = std::make_shared<data::TextWindows>(std::move(split.train), to);
  auto eval = std::make_shared<data::TextWindows>(std::move(split.validation), vo);
  r.description = {{"source", "text"},
                   {"files", corpus.files},
                   {"bytes", corpus.bytes.size()},
                   {"val_fraction", c.val_fraction},
                   {"train_windows_per_epoch", train->windows_per_epoch()},
                   {"validation_windows", eval->windows_per_epoch()}};
  r.train = std::move(train);
  r.eval = std::move(eval);
  return r;
}

}  // namespace

RunData load_run_data(const models::ModelSpec& spec, const models::ModelOptions& resolved,
                      const TrainConfig& c) {
  const bool text = c.data.rfind("text:", 0) == 0;
  if (spec.task == models::TaskKind::language_model) {
    MIXPREC_CHECK(c.data.empty() || text, ValueError, kOp,
                  "model " << spec.name << " is a language model: --data must be text:PATH[,PATH...], got '"
                           << c.data << "'");
    return text_data(resolved, c);
  }
  MIXPREC_CHECK(!text, ValueError, kOp,
                "model " << spec.name << " is a classifier and cannot train on --data " << c.data
                         << "; text needs a language model (--model gpt-mini)");
  MIXPREC_CHECK(c.data.empty() || c.data == "fashion-mnist" || c.data == "synthetic", ValueError, kOp,
                "unknown --data '" << c.data << "'; choose fashion-mnist, synthetic or text:PATH");
  return image_data(spec, c);
}

}  // namespace mixprec::train::detail
