// DataLoader. A batch is a pure function of (order of the epoch, batch index): the prefetch
// thread and the synchronous path call the same assemble(), so they produce identical batches.
//
// Prefetch: one producer thread per epoch feeds a fixed two-slot ring (no allocation while
// handing over, so the hand-over itself cannot fail). The producer waits for a free slot before
// assembling, so at most two finished batches wait for the caller. An error while assembling is
// put in the ring in place of that batch, so the caller sees it exactly where the synchronous
// path would have thrown it. start_epoch and the destructor set `stop` and join; every wait
// of the producer also wakes on `stop`, so joining cannot hang.
#include "mixprec/core/transfer.h"
#include "mixprec/data/dataloader.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "mixprec/core/error.h"
#include "data/epoch_order.h"

namespace mixprec::data {
namespace {

constexpr const char* kOp = "DataLoader";
constexpr std::size_t kDepth = 2;

// Branch-free so the compiler vectorises it; the row was just copied and is in L1.
bool row_finite(const float* row, std::int64_t n) {
  int bad = 0;
  for (std::int64_t j = 0; j < n; ++j) bad |= !(std::abs(row[j]) <= std::numeric_limits<float>::max());
  return bad == 0;
}

struct Item {
  Batch batch;
  std::exception_ptr error;
};

}  // namespace

struct DataLoader::State {
  Dataset data;  // images f32 contiguous [N, ...]
  DataLoaderOptions opts;
  Shape sample_shape;
  std::int64_t n = 0, features = 0, batches = 0;

  std::vector<std::int64_t> order;
  std::int64_t order_epoch = -1;  // the epoch `order` was drawn for
  std::int64_t epoch = -1;        // -1: start_epoch not called yet
  std::int64_t cursor = 0, end = 0;  // synchronous mode: next batch to assemble, one past last

  // Prefetch. Guarded by mu: ring, head, count, stop, producer_done.
  std::thread producer;
  std::mutex mu;
  std::condition_variable has_item, has_space;
  std::array<Item, kDepth> ring;
  std::size_t head = 0, count = 0;
  bool stop = false, producer_done = false;

  Batch assemble(std::int64_t b) const {
    const std::int64_t bs = opts.batch_size;
    const std::int64_t begin = b * bs, rows = std::min(bs, n - begin);
    Shape shape{rows};
    shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
    Batch out;
    out.index = b;
    Tensor host = Tensor::empty(shape, DType::f32, MemoryCategory::workspace, Device{});
    const bool regression = data.labels.empty();
    (regression ? out.values.resize(static_cast<std::size_t>(rows))
                : out.targets.resize(static_cast<std::size_t>(rows)));
    const float* src = data.images.data<float>();
    float* dst = host.data<float>();
    const std::size_t row_bytes = static_cast<std::size_t>(features) * sizeof(float);
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t s = order[static_cast<std::size_t>(begin + i)];
      float* row = dst + i * features;
      std::memcpy(row, src + s * features, row_bytes);
      if (!row_finite(row, features)) [[unlikely]] {
        std::int64_t j = 0;
        while (std::abs(row[j]) <= std::numeric_limits<float>::max()) ++j;
        MIXPREC_CHECK(false, ValueError, kOp,
                      "sample " << s << " feature " << j << " is "
                                << (std::isnan(row[j]) ? "NaN" : "Inf") << " (row " << i << " of batch "
                                << b << ", epoch " << epoch
                                << "); clean the data or drop the sample (data::check_finite "
                                   "finds every such sample before training)");
      }
      if (regression) {
        out.values[static_cast<std::size_t>(i)] = data.values[static_cast<std::size_t>(s)];
      } else {
        out.targets[static_cast<std::size_t>(i)] = data.labels[static_cast<std::size_t>(s)];
      }
    }
    stage_on_device(out, host);
    return out;
  }

  void produce(std::int64_t first, std::int64_t last) {
    for (std::int64_t b = first; b < last; ++b) {
      {
        std::unique_lock<std::mutex> lock(mu);
        has_space.wait(lock, [&] { return stop || count < kDepth; });
        if (stop) break;
      }
      Item item;
      try {
        item.batch = assemble(b);
      } catch (...) {
        item.error = std::current_exception();
      }
      const bool failed = item.error != nullptr;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop) break;
        ring[(head + count) % kDepth] = std::move(item);
        ++count;
      }
      has_item.notify_one();
      if (failed) break;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      producer_done = true;
    }
    has_item.notify_one();
  }

  void stop_producer() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    has_space.notify_all();
    if (producer.joinable()) producer.join();
    // The producer is gone: no lock needed from here on.
    for (Item& item : ring) item = Item{};
    head = count = 0;
    stop = false;
    producer_done = false;
  }
};

DataLoader::DataLoader(const Dataset& data, DataLoaderOptions opts, std::vector<std::int64_t> sample_shape)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  MIXPREC_CHECK(opts.batch_size >= 1, ValueError, kOp,
                "batch_size must be at least 1, got " << opts.batch_size);
  MIXPREC_CHECK(data.images.defined() && data.images.dim() >= 2, ValueError, kOp,
                "images must be a [N, features...] tensor, got "
                    << (data.images.defined() ? to_string(data.images.shape()) : "an undefined tensor"));
  s.n = data.images.size(0);
  MIXPREC_CHECK(s.n >= 1, ValueError, kOp, "the data set is empty (0 samples); nothing to iterate over");
  // Regression data carries values instead of labels (Dataset::values).
  const bool regression = data.labels.empty() && !data.values.empty();
  const std::size_t targets = regression ? data.values.size() : data.labels.size();
  MIXPREC_CHECK(static_cast<std::int64_t>(targets) == s.n, ValueError, kOp,
                "the data set has " << s.n << " samples but " << targets
                                    << (regression ? " target values" : " labels")
                                    << "; every sample needs exactly one");
  for (std::size_t i = 0; i < data.labels.size(); ++i) {
    MIXPREC_CHECK(data.labels[i] >= 0, ValueError, kOp,
                  "sample " << i << " has label " << data.labels[i] << "; class ids must be >= 0");
  }
  s.features = data.images.numel() / s.n;
  const Shape own(data.images.shape().begin() + 1, data.images.shape().end());
  if (sample_shape.empty()) sample_shape = own;
  for (const std::int64_t dim : sample_shape) {
    MIXPREC_CHECK(dim >= 1, ValueError, kOp,
                  "sample_shape " << to_string(sample_shape) << " has a dimension < 1");
  }
  MIXPREC_CHECK(numel(sample_shape) == s.features, ValueError, kOp,
                "sample_shape " << to_string(sample_shape) << " has " << numel(sample_shape)
                                << " elements but each sample has " << s.features << " (images "
                                << to_string(data.images.shape()) << ")");
  s.batches = opts.drop_last ? s.n / opts.batch_size : (s.n + opts.batch_size - 1) / opts.batch_size;
  MIXPREC_CHECK(s.batches >= 1, ValueError, kOp,
                "drop_last with batch_size " << opts.batch_size << " > " << s.n
                                             << " samples leaves no batch at all; lower the batch "
                                                "size or turn drop_last off");
  s.opts = opts;
  s.sample_shape = std::move(sample_shape);
  s.data.labels = data.labels;
  s.data.values = data.values;
  s.data.images = data.images;
  if (s.data.images.dtype() != DType::f32) s.data.images = s.data.images.detach().to(DType::f32);
  if (!s.data.images.is_contiguous()) s.data.images = s.data.images.detach().contiguous();
}

DataLoader::~DataLoader() { state_->stop_producer(); }

std::int64_t DataLoader::batches_per_epoch() const { return state_->batches; }
std::int64_t DataLoader::size() const { return state_->n; }
const DataLoaderOptions& DataLoader::options() const { return state_->opts; }

void DataLoader::start_epoch(std::int64_t epoch, std::int64_t first_batch) {
  State& s = *state_;
  detail::check_epoch_start("DataLoader::start_epoch", epoch, first_batch, s.batches);
  s.stop_producer();
  if (s.order_epoch != epoch || s.order.empty()) {
    if (s.opts.shuffle) {
      s.order = detail::epoch_permutation(s.n, s.opts.seed, epoch);
    } else if (s.order.empty()) {
      s.order.resize(static_cast<std::size_t>(s.n));
      std::iota(s.order.begin(), s.order.end(), std::int64_t{0});
    }
    s.order_epoch = epoch;
  }
  s.epoch = epoch;
  s.cursor = first_batch;
  s.end = s.batches;
  if (s.opts.prefetch) {
    try {
      s.producer = std::thread([&s, first_batch] { s.produce(first_batch, s.batches); });
    } catch (...) {
      s.epoch = -1;  // next() would otherwise wait for a producer that does not exist
      throw;
    }
  }
}

bool DataLoader::next(Batch& out) {
  State& s = *state_;
  MIXPREC_CHECK(s.epoch >= 0, StateError, "DataLoader::next",
                "no epoch started; call start_epoch(epoch) before next()");
  if (!s.opts.prefetch) {
    if (s.cursor >= s.end) return false;
    const std::int64_t b = s.cursor;
    s.cursor = s.end;  // an error ends the epoch, as in the prefetch path
    out = s.assemble(b);
    s.cursor = b + 1;
    return true;
  }
  Item item;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.has_item.wait(lock, [&] { return s.count > 0 || s.producer_done; });
    if (s.count == 0) {
      lock.unlock();
      if (s.producer.joinable()) s.producer.join();
      return false;
    }
    item = std::move(s.ring[s.head]);
    s.head = (s.head + 1) % kDepth;
    --s.count;
  }
  s.has_space.notify_one();
  if (item.error) {
    if (s.producer.joinable()) s.producer.join();  // it stopped after queueing the error
    std::rethrow_exception(item.error);
  }
  out = std::move(item.batch);
  return true;
}

}  // namespace mixprec::data
