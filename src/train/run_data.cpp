#include "train/run_data.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "mixprec/core/error.h"
#include "mixprec/core/random.h"
#include "mixprec/data/dataloader.h"
#include "mixprec/data/dataset.h"
#include "mixprec/data/idx.h"
#include "mixprec/data/image_folder.h"
#include "mixprec/data/synthetic.h"
#include "mixprec/data/tabular.h"
#include "mixprec/data/text_corpus.h"
#include "mixprec/io/sha256.h"
#include "train/data_schema.h"

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
  // The sample's shape under the options: an image model that takes any size (resnet50) has
  // the --image-size images.
  const std::vector<std::int64_t> shape =
      models::input_shape(spec, models::resolve_options(spec, c.model_options()));
  data::Dataset train, test;
  nlohmann::json d;
  if (synthetic) {
    MIXPREC_CHECK(shape.size() == 1 || spec.defaults.image_size > 0, ValueError, kOp,
                  "--data synthetic makes flat feature vectors or the images of a model that takes "
                  "any size; model " << spec.name << " takes " << to_string(shape));
    std::int64_t features = 1;
    for (const std::int64_t dim : shape) features *= dim;
    // Held in memory: large images get fewer samples by default (256 MiB of f32 for training),
    // enough to time steps and watch the loss move; --limit-train sets the count.
    const std::int64_t budget = std::max<std::int64_t>(64, (std::int64_t{256} << 20) / (4 * features));
    train = data::make_synthetic(c.limit_train > 0 ? c.limit_train : std::min(kSyntheticTrain, budget),
                                 features, spec.num_classes, c.seed, 0);
    test = data::make_synthetic(c.limit_test > 0 ? c.limit_test : std::min(kSyntheticTest, budget / 4 + 1),
                                features, spec.num_classes, c.seed, 1);
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
  r.train = std::make_shared<data::DataLoader>(train, lo, shape);
  r.eval = std::make_shared<data::DataLoader>(test, eo, shape);
  r.description = std::move(d);
  return r;
}

data::DataLoaderOptions eval_loader_options() {
  data::DataLoaderOptions eo;
  eo.batch_size = kEvalBatch;
  eo.shuffle = false;
  eo.prefetch = false;
  return eo;
}

data::DataLoaderOptions train_loader_options(const TrainConfig& c) {
  data::DataLoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.seed = c.seed;
  return lo;
}

RunData csv_data(const models::ModelSpec& spec, const TrainConfig& c) {
  MIXPREC_CHECK(spec.sized_by_data, ValueError, kOp,
                "--data " << c.data << " needs a model whose input and output widths follow the table "
                          << "(--model mlp); " << spec.name << " has a fixed shape");
  MIXPREC_CHECK(c.limit_train < 0 && c.limit_test < 0, ValueError, kOp,
                "--limit-train and --limit-test do not apply to --data csv:; cut the file instead");
  data::TabularOptions o;
  o.train_path = c.data.substr(4);
  if (!c.test_data.empty()) o.test_path = c.test_data.substr(4);
  MIXPREC_CHECK(!o.train_path.empty(), ValueError, kOp, "--data csv: names no file; give csv:PATH");
  MIXPREC_CHECK(c.test_data.empty() || !o.test_path.empty(), ValueError, kOp,
                "--test-data csv: names no file; give csv:PATH");
  o.target = c.target;
  o.regression = c.task == "regression";
  o.val_fraction = c.val_fraction;
  o.seed = c.seed;
  const data::TabularData t = data::load_tabular(o);
  const data::TabularSchema& sc = t.schema;

  RunData r;
  r.train = std::make_shared<data::DataLoader>(t.train, train_loader_options(c));
  r.eval = std::make_shared<data::DataLoader>(t.test, eval_loader_options());
  r.inputs = static_cast<std::int64_t>(sc.features.size());
  r.outputs = sc.regression ? 1 : sc.num_classes;
  if (sc.regression) {
    r.task = std::make_shared<RegressionTask>(sc.target_mean, sc.target_stddev);
  } else {
    r.task = std::make_shared<ClassificationTask>(sc.num_classes);
  }
  r.schema = tabular_schema_to_json(sc);
  nlohmann::json d{{"source", "csv"},
                   {"file", o.train_path},
                   {"train_samples", t.train.images.size(0)},
                   {"test_samples", t.test.images.size(0)},
                   {"features", r.inputs},
                   {"target", sc.target},
                   {"task", sc.regression ? "regression" : "classification"}};
  if (o.test_path.empty()) {
    d["val_fraction"] = c.val_fraction;
  } else {
    d["test_file"] = o.test_path;
  }
  if (!sc.regression) d["classes"] = sc.num_classes;
  r.description = std::move(d);
  return r;
}

RunData idx_data(const models::ModelSpec& spec, const TrainConfig& c) {
  const std::string dir = c.data.substr(4);
  MIXPREC_CHECK(!dir.empty(), ValueError, kOp, "--data idx: names no directory; give idx:DIR");
  data::IdxDataset train = data::load_idx_dataset(dir, true, c.limit_train);
  data::IdxDataset test = data::load_idx_dataset(dir, false, c.limit_test);
  MIXPREC_CHECK(train.rows == test.rows && train.cols == test.cols, ValueError, kOp,
                dir << ": the training images are " << train.rows << "x" << train.cols << " but the test images "
                    << test.rows << "x" << test.cols);
  std::vector<bool> seen(256, false);
  std::int64_t distinct = 0, top = 0;
  for (const std::int64_t l : train.data.labels) {
    distinct += seen[static_cast<std::size_t>(l)] ? 0 : 1;
    seen[static_cast<std::size_t>(l)] = true;
    top = std::max(top, l);
  }
  MIXPREC_CHECK(distinct >= 2, ValueError, kOp,
                dir << ": the training labels hold a single class (" << top << "); classification needs at least two");
  const std::int64_t classes = top + 1;
  data::check_labels(test.data, classes, "test labels in " + dir + " (the training labels have classes 0.." +
                                             std::to_string(top) + ")");
  // One scalar shift and scale from the training pixels only, as Fashion-MNIST's constants:
  // per-pixel statistics would zero the always-blank border pixels and add nothing.
  double sum = 0, sq = 0;
  const std::vector<float> px = train.data.images.to_vector();
  for (const float v : px) sum += v;
  const double mean = sum / static_cast<double>(px.size());
  for (const float v : px) sq += (v - mean) * (v - mean);
  const double stddev = std::sqrt(sq / static_cast<double>(px.size()));
  MIXPREC_CHECK(stddev > 0, ValueError, kOp, dir << ": every training pixel has the same value");
  for (data::Dataset* d : {&train.data, &test.data}) {
    float* x = d->images.data<float>();
    for (std::int64_t i = 0; i < d->images.numel(); ++i) x[i] = static_cast<float>((x[i] - mean) / stddev);
  }

  const std::int64_t pixels = train.rows * train.cols;
  RunData r;
  std::vector<std::int64_t> shape;  // a flat model takes the data's own [B, pixels]
  if (spec.sized_by_data) {
    r.outputs = classes;
  } else {
    const std::vector<std::int64_t> takes = models::input_shape(spec, models::resolve_options(spec, {}));
    const bool fits = takes == std::vector<std::int64_t>{1, train.rows, train.cols} ||
                      takes == std::vector<std::int64_t>{pixels};
    MIXPREC_CHECK(fits, ValueError, kOp,
                  dir << " holds " << train.rows << "x" << train.cols << " images, but model " << spec.name
                      << " takes " << to_string(spec.sample_shape) << "; --model mlp follows the data's shape");
    MIXPREC_CHECK(classes <= spec.num_classes, ValueError, kOp,
                  dir << " has " << classes << " classes, but model " << spec.name << " has "
                      << spec.num_classes << " outputs; --model mlp follows the data's classes");
    r.outputs = spec.num_classes;
    shape = spec.sample_shape;
  }
  r.inputs = pixels;
  r.train = std::make_shared<data::DataLoader>(train.data, train_loader_options(c), shape);
  r.eval = std::make_shared<data::DataLoader>(test.data, eval_loader_options(), shape);
  r.task = std::make_shared<ClassificationTask>(r.outputs);
  r.schema = {{"kind", "idx"},          {"rows", train.rows},      {"cols", train.cols},
              {"pixel_mean", mean},     {"pixel_stddev", stddev},  {"num_classes", classes}};
  r.description = {{"source", "idx"},
                   {"dir", dir},
                   {"image_rows", train.rows},
                   {"image_cols", train.cols},
                   {"classes", classes},
                   {"train_samples", train.data.labels.size()},
                   {"test_samples", test.data.labels.size()}};
  return r;
}

// --limit-train/--limit-test on an image folder: n files chosen by the seed across every class
// (the first n of the sorted list would be the first classes alone), kept in folder order.
std::vector<data::ImageFile> limit_files(std::vector<data::ImageFile> files, std::int64_t limit, std::uint64_t seed) {
  const auto n = static_cast<std::int64_t>(files.size());
  if (limit <= 0 || limit >= n) return files;
  std::vector<data::ImageFile> kept;
  for (const std::int64_t i : data::held_out_rows(n, static_cast<double>(limit) / static_cast<double>(n), seed)) {
    kept.push_back(std::move(files[static_cast<std::size_t>(i)]));
  }
  return kept;
}

RunData images_data(const models::ModelSpec& spec, const models::ModelOptions& resolved, const TrainConfig& c) {
  const std::string dir = c.data.substr(7);  // after "images:"
  MIXPREC_CHECK(!dir.empty(), ValueError, kOp, "--data images: names no folder; give images:DIR");
  const std::vector<std::int64_t> shape = models::input_shape(spec, resolved);
  MIXPREC_CHECK(shape.size() == 3 && shape[0] == 3, ValueError, kOp,
                "--data images: makes RGB images [3, H, W], but model " << spec.name << " takes "
                                                                       << to_string(shape)
                                                                       << "; train an image model (--model resnet50)");
  data::ImageFolder folder = data::list_image_folder(dir, c.val_fraction, c.seed);
  const auto classes = static_cast<std::int64_t>(folder.classes.size());
  // As idx: with a fixed-size classifier: its outputs stay, and the data may use fewer of them.
  MIXPREC_CHECK(classes <= spec.num_classes, ValueError, kOp,
                dir << " has " << classes << " class folders, but model " << spec.name << " has "
                    << spec.num_classes << " outputs; merge classes or train a model with more outputs");
  // Disjoint from the validation split's stream (held_out_rows with c.seed itself).
  folder.train = limit_files(std::move(folder.train), c.limit_train, splitmix64(c.seed ^ 0x7472'6169'6eull));
  folder.val = limit_files(std::move(folder.val), c.limit_test, splitmix64(c.seed ^ 0x7465'7374ull));

  data::ImageFolderSourceOptions to;
  to.batch_size = c.batch_size;
  to.height = shape[1];
  to.width = shape[2];
  to.seed = c.seed;
  to.workers = c.data_workers;
  data::ImageFolderSourceOptions eo = to;
  eo.augment = data::ImageAugment::eval;
  eo.shuffle = false;
  RunData r;
  auto train = std::make_shared<data::ImageFolderSource>(folder.train, to);
  auto eval = std::make_shared<data::ImageFolderSource>(folder.val, eo);
  r.outputs = spec.num_classes;
  r.task = std::make_shared<ClassificationTask>(r.outputs);
  // The class names decide what each output means: a resume or an evaluation must find the same
  // ones. Stored as a digest (names are file-system bytes, not necessarily valid UTF-8 for JSON).
  std::string names;
  for (const std::string& name : folder.classes) names += name + '\n';
  r.schema = {{"kind", "images"}, {"num_classes", classes}, {"class_names_sha256", io::sha256_hex(names)}};
  nlohmann::json d{{"source", "images"},
                   {"dir", dir},
                   {"classes", classes},
                   {"image_size", shape[1]},
                   {"train_samples", train->size()},
                   {"test_samples", eval->size()}};
  if (folder.split_on_disk) {
    d["split"] = "train/ and val/ folders";
  } else {
    d["val_fraction"] = c.val_fraction;
  }
  r.description = std::move(d);
  r.train = std::move(train);
  r.eval = std::move(eval);
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
  if (c.data.rfind("csv:", 0) == 0) return csv_data(spec, c);
  if (c.data.rfind("idx:", 0) == 0) return idx_data(spec, c);
  if (c.data.rfind("images:", 0) == 0) return images_data(spec, resolved, c);
  MIXPREC_CHECK(c.data.empty() || c.data == "fashion-mnist" || c.data == "synthetic", ValueError, kOp,
                "unknown --data '" << c.data
                                   << "'; choose fashion-mnist, synthetic, csv:PATH, idx:DIR, images:DIR or text:PATH");
  return image_data(spec, c);
}

}  // namespace mixprec::train::detail
