// ImageFolderSource: batches of decoded, augmented images, made by a pool of worker threads.
//
// A sample is a pure function of (file, options, epoch): load_sample() decodes and transforms
// it with the randomness of (seed, epoch, file index). The workers and the synchronous path both
// call it, and each writes its sample to the row the epoch's order gives it, so the batches are
// the same bits with any number of workers.
//
// Work is handed out per sample, not per batch, so that every worker helps with the batch the
// caller waits for. The samples of up to `prefetch_batches` batches past the one the caller
// takes next are claimed in order; each batch has a slot of the ring (batch b in slot b % depth,
// free again once the caller took batch b), which is allocated by the worker that claims the
// batch's first sample. A failing sample's exception is kept in its slot (the one of the lowest
// row, so the same error as the synchronous path) and rethrown by next().
//
// start_epoch and the destructor stop new claims and then wait for the samples in flight: a
// worker that decodes holds a pointer into its slot, so a slot is reset only when no worker is
// busy. `generation` tells a worker that finished a sample of a cancelled epoch to drop it.
#include "mixprec/data/image_folder.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "data/epoch_order.h"
#include "data/image_decode.h"
#include "data/image_transforms.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"

namespace mixprec::data {
namespace {

constexpr const char* kOp = "ImageFolderSource";
// Smaller images are nearly always placeholders or damaged files (icons, tracking pixels), and
// an 8x crop-and-resize of one would be mostly interpolation.
constexpr std::int64_t kMinImageSide = 8;

struct Slot {
  std::int64_t batch = -1;  // -1: free
  std::int64_t rows = 0, remaining = 0;  // samples in the batch; not yet finished
  Tensor host;                           // [rows, 3, H, W] f32 on the host
  std::vector<std::int64_t> targets;
  std::int64_t error_row = 0;
  std::exception_ptr error;
};

}  // namespace

int default_image_workers() {
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hw, 1u, 4u));
}

struct ImageFolderSource::State {
  std::vector<ImageFile> files;
  ImageFolderSourceOptions opts;
  std::int64_t n = 0, batches = 0, sample_elems = 0;
  std::vector<std::int64_t> order;
  std::int64_t order_epoch = -1;

  // Guarded by mu while workers run (written by the caller's thread only between claims).
  std::int64_t epoch = -1;              // -1: start_epoch not called yet
  std::int64_t deliver = 0, end = 0;    // the batch next() returns next; one past the last

  std::vector<std::thread> threads;
  std::mutex mu;
  std::condition_variable work, ready, idle;
  std::vector<Slot> ring;
  std::int64_t claim_batch = 0, claim_row = 0, claim_end = 0;  // the next sample to hand out
  std::uint64_t generation = 0;
  int busy = 0;  // workers decoding a sample
  bool stop = false;

  std::int64_t rows_of(std::int64_t b) const { return std::min(opts.batch_size, n - b * opts.batch_size); }

  Tensor allocate(std::int64_t rows) const {
    return Tensor::empty({rows, 3, opts.height, opts.width}, DType::f32, MemoryCategory::workspace, Device{});
  }

  void load_sample(std::int64_t i, std::int64_t ep, float* dst) const {
    const ImageFile& f = files[static_cast<std::size_t>(i)];
    const detail::RgbImage img = detail::decode_image_file(f.path);
    MIXPREC_CHECK(img.width >= kMinImageSide && img.height >= kMinImageSide, ValueError, kOp,
                  f.path << ": " << img.width << "x" << img.height << " pixels is smaller than the " << kMinImageSide
                         << "x" << kMinImageSide << " an image must have; remove it from the folder");
    if (opts.augment == ImageAugment::train) {
      detail::train_transform(img, opts.height, opts.width, opts.seed, ep, i, dst);
    } else {
      detail::eval_transform(img, opts.height, opts.width, dst);
    }
  }

  std::int64_t file_at(std::int64_t b, std::int64_t row) const {
    return order[static_cast<std::size_t>(b * opts.batch_size + row)];
  }

  std::vector<std::int64_t> targets_of(std::int64_t b) const {
    std::vector<std::int64_t> t(static_cast<std::size_t>(rows_of(b)));
    for (std::size_t r = 0; r < t.size(); ++r) {
      t[r] = files[static_cast<std::size_t>(file_at(b, static_cast<std::int64_t>(r)))].label;
    }
    return t;
  }

  // The synchronous path (workers == 0).
  Batch assemble(std::int64_t b) const {
    Batch out;
    out.index = b;
    const std::int64_t rows = rows_of(b);
    Tensor host = allocate(rows);
    for (std::int64_t r = 0; r < rows; ++r) load_sample(file_at(b, r), epoch, host.data<float>() + r * sample_elems);
    out.targets = targets_of(b);
    stage_on_device(out, host);
    return out;
  }

  // Called with mu held, for the first sample of batch b: the slot is free (its previous batch
  // was taken). An allocation failure becomes the batch's error, with nothing left to decode.
  void open_slot(Slot& slot, std::int64_t b) {
    slot = Slot{};
    slot.batch = b;
    slot.rows = slot.remaining = rows_of(b);
    try {
      slot.targets = targets_of(b);
      slot.host = allocate(slot.rows);
    } catch (...) {
      slot.error = std::current_exception();
      slot.remaining = 0;
      ++claim_batch;
      claim_row = 0;
      ready.notify_all();
    }
  }

  void work_loop() {
    std::unique_lock<std::mutex> lock(mu);
    const auto depth = static_cast<std::int64_t>(ring.size());
    for (;;) {
      work.wait(lock, [&] { return stop || (claim_batch < claim_end && claim_batch < deliver + depth); });
      if (stop) return;
      const std::int64_t b = claim_batch, r = claim_row, ep = epoch;
      const std::uint64_t gen = generation;
      Slot& slot = ring[static_cast<std::size_t>(b % depth)];
      if (r == 0) {
        open_slot(slot, b);
        if (slot.error) continue;
      }
      if (++claim_row == slot.rows) {
        claim_row = 0;
        ++claim_batch;
      }
      // A sample after an earlier failure in its batch cannot change what next() throws.
      const bool skip = slot.error != nullptr && r > slot.error_row;
      const std::int64_t file = file_at(b, r);
      float* dst = slot.host.data<float>() + r * sample_elems;
      ++busy;
      lock.unlock();
      std::exception_ptr error;
      if (!skip) {
        try {
          load_sample(file, ep, dst);
        } catch (...) {
          error = std::current_exception();
        }
      }
      lock.lock();
      --busy;
      if (gen == generation) {
        if (error && (slot.error == nullptr || r < slot.error_row)) {
          slot.error = error;
          slot.error_row = r;
        }
        if (--slot.remaining == 0) ready.notify_all();
      }
      if (busy == 0) idle.notify_all();
    }
  }

  // Stops handing out samples and waits for the ones in flight; then no worker touches a slot.
  void cancel() {
    std::unique_lock<std::mutex> lock(mu);
    ++generation;
    claim_end = claim_batch;
    idle.wait(lock, [&] { return busy == 0; });
    for (Slot& s : ring) s = Slot{};
  }
};

ImageFolderSource::ImageFolderSource(std::vector<ImageFile> files, ImageFolderSourceOptions opts)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  MIXPREC_CHECK(!files.empty(), ValueError, kOp, "no image files given; nothing to iterate over");
  for (const ImageFile& f : files) {
    MIXPREC_CHECK(f.label >= 0, ValueError, kOp, f.path << " has label " << f.label << "; class ids must be >= 0");
  }
  MIXPREC_CHECK(opts.batch_size >= 1, ValueError, kOp, "batch_size must be at least 1, got " << opts.batch_size);
  MIXPREC_CHECK(opts.height >= kMinImageSide && opts.height <= 4096 && opts.width >= kMinImageSide &&
                    opts.width <= 4096,
                ValueError, kOp, "the output size must be in [8, 4096] per side, got " << opts.height << "x" << opts.width);
  if (opts.workers == -1) opts.workers = default_image_workers();
  MIXPREC_CHECK(opts.workers >= 0 && opts.workers <= 256, ValueError, kOp,
                "workers must be in [0, 256] (or -1 for the default), got " << opts.workers);
  MIXPREC_CHECK(opts.prefetch_batches >= 1 && opts.prefetch_batches <= 64, ValueError, kOp,
                "prefetch_batches must be in [1, 64], got " << opts.prefetch_batches);
  s.n = static_cast<std::int64_t>(files.size());
  s.batches = opts.drop_last ? s.n / opts.batch_size : (s.n + opts.batch_size - 1) / opts.batch_size;
  MIXPREC_CHECK(s.batches >= 1, ValueError, kOp,
                "drop_last with batch_size " << opts.batch_size << " > " << s.n
                                             << " images leaves no batch at all; lower the batch size or turn "
                                                "drop_last off");
  s.files = std::move(files);
  s.opts = opts;
  s.sample_elems = 3 * opts.height * opts.width;
  s.ring.resize(static_cast<std::size_t>(opts.prefetch_batches));
  try {
    for (int w = 0; w < opts.workers; ++w) s.threads.emplace_back([&s] { s.work_loop(); });
  } catch (...) {
    {
      const std::lock_guard<std::mutex> lock(s.mu);
      s.stop = true;
    }
    s.work.notify_all();
    for (std::thread& t : s.threads) t.join();
    throw;
  }
}

ImageFolderSource::~ImageFolderSource() {
  State& s = *state_;
  {
    const std::lock_guard<std::mutex> lock(s.mu);
    s.stop = true;
  }
  s.work.notify_all();
  for (std::thread& t : s.threads) t.join();  // each finishes at most the image it decodes
}

std::int64_t ImageFolderSource::batches_per_epoch() const { return state_->batches; }
std::int64_t ImageFolderSource::size() const { return state_->n; }
const ImageFolderSourceOptions& ImageFolderSource::options() const { return state_->opts; }

void ImageFolderSource::start_epoch(std::int64_t epoch, std::int64_t first_batch) {
  State& s = *state_;
  detail::check_epoch_start("ImageFolderSource::start_epoch", epoch, first_batch, s.batches);
  s.cancel();
  // No worker reads the order until the claims below are opened under the lock.
  if (s.order.empty() || (s.opts.shuffle && s.order_epoch != epoch)) {
    if (s.opts.shuffle) {
      s.order = detail::epoch_permutation(s.n, s.opts.seed, epoch);
    } else {
      s.order.resize(static_cast<std::size_t>(s.n));
      std::iota(s.order.begin(), s.order.end(), std::int64_t{0});
    }
    s.order_epoch = epoch;
  }
  {
    const std::lock_guard<std::mutex> lock(s.mu);
    s.epoch = epoch;
    s.deliver = s.claim_batch = first_batch;
    s.claim_row = 0;
    s.end = s.claim_end = s.batches;
  }
  s.work.notify_all();
}

bool ImageFolderSource::next(Batch& out) {
  State& s = *state_;
  MIXPREC_CHECK(s.epoch >= 0, StateError, "ImageFolderSource::next",
                "no epoch started; call start_epoch(epoch) before next()");
  if (s.threads.empty()) {
    if (s.deliver >= s.end) return false;
    const std::int64_t b = s.deliver;
    s.deliver = s.end;  // an error ends the epoch, as on the workers' path
    out = s.assemble(b);
    s.deliver = b + 1;
    return true;
  }
  Batch batch;
  Tensor host;
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    if (s.deliver >= s.end) return false;
    Slot& slot = s.ring[static_cast<std::size_t>(s.deliver % static_cast<std::int64_t>(s.ring.size()))];
    s.ready.wait(lock, [&] { return slot.batch == s.deliver && slot.remaining == 0; });
    batch.index = s.deliver;
    batch.targets = std::move(slot.targets);
    host = std::move(slot.host);
    error = slot.error;
    slot = Slot{};
    ++s.deliver;
    if (error) s.deliver = s.end = s.claim_end = s.claim_batch;  // nothing more this epoch
  }
  s.work.notify_all();  // a slot is free: the workers may claim one more batch
  if (error) std::rethrow_exception(error);
  stage_on_device(batch, host);
  out = std::move(batch);
  return true;
}

}  // namespace mixprec::data
