#pragma once
/// A folder of JPEG/PNG images, one subfolder per class (torchvision's ImageFolder layout), as
/// mini-batches of [B, 3, H, W] f32 images decoded and augmented by background workers.
///
///   ImageFolder folder = list_image_folder("imagenet", 0.1, 42);  // train/ and val/, or split
///   ImageFolderSourceOptions o;
///   o.batch_size = 256;
///   o.seed = 42;                                    // shuffling and augmentation
///   ImageFolderSource train(folder.train, o);       // RandomResizedCrop(224) + flip
///   o.augment = ImageAugment::eval;                 // resize 256, centre crop 224
///   o.shuffle = false;
///   ImageFolderSource val(folder.val, o);
///
/// JPEG needs libjpeg-turbo and PNG libpng at build time; a build without one refuses that
/// format's files with a message naming the library.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/data/batch_source.h"

namespace mixprec::data {

/// One image file and its class id.
struct ImageFile {
  std::string path;
  std::int64_t label = 0;
};

/// A listed image folder: class names (sorted; the id of a class is its position) and files.
struct ImageFolder {
  std::vector<std::string> classes;
  std::vector<ImageFile> train, val;
  /// true: the files came from root/train and root/val; false: val was held out of root's
  /// class folders with val_fraction.
  bool split_on_disk = false;
};

/// Lists `root`. With both root/train and root/val folders, their class subfolders hold the two
/// splits (val's classes must be among train's); otherwise root's class subfolders hold every
/// file and round(val_fraction * N) of them (clamped to [1, N - 1]) are held out for validation
/// by data::held_out_rows(N, val_fraction, seed) over the sorted list. Class folders are sorted
/// by name (byte order, as Python's sorted()) and numbered from 0; inside each, files ending in
/// .jpg, .jpeg or .png (any case) are collected recursively, following links, in path order.
/// Other files are ignored. ValueError naming the folder when root is missing or not a folder,
/// has no class folders, a class folder holds no image, only one of train/ and val/ exists, val/
/// has a class train/ lacks, N < 2 without a val/ folder, or a file's format is not built in
/// (naming the file and the missing library). val_fraction must be in (0, 1).
ImageFolder list_image_folder(const std::string& root, double val_fraction, std::uint64_t seed);

/// Which of torchvision's standard transforms a source applies.
enum class ImageAugment {
  /// RandomResizedCrop(H, W) (area 8-100%, aspect 3/4-4/3, bilinear) + horizontal flip p = 0.5,
  /// drawn from (seed, epoch, sample index).
  train,
  /// Shorter side resized to floor(max(H, W) * 256 / 224), then the centre H x W.
  eval,
};

/// How an ImageFolderSource cuts, orders and transforms the images.
struct ImageFolderSourceOptions {
  std::int64_t batch_size = 128;  ///< samples per batch, >= 1; the last may be smaller unless drop_last
  std::int64_t height = 224;      ///< output image size, each in [8, 4096]
  std::int64_t width = 224;
  ImageAugment augment = ImageAugment::train;
  bool shuffle = true;            ///< a fresh order per epoch, the same permutation as DataLoader's
  std::uint64_t seed = 0;         ///< of the order and of the augmentation
  bool drop_last = false;         ///< skip a last batch smaller than batch_size
  /// Background decoding threads, in [0, 256]; -1 = default_image_workers(). 0 decodes on the
  /// caller's thread inside next(). The batches are the same bits whatever the count.
  int workers = -1;
  /// Batches decoded ahead of the caller, in [1, 64] (with workers > 0): each holds one batch
  /// of f32 images in memory.
  int prefetch_batches = 2;
};

/// min(std::thread::hardware_concurrency(), 4), at least 1: enough to keep up with a CPU
/// training step, without taking the cores that step needs.
int default_image_workers();

/// Batches of an image folder's files. Each sample is decoded (8-bit RGB, alpha dropped),
/// transformed (ImageAugment) and normalised with the ImageNet mean and standard deviation into
/// Batch::inputs [B, 3, H, W] f32; Batch::targets are the files' labels. A batch is a pure
/// function of (files, options, epoch, batch index).
///
/// Workers decode samples of the next prefetch_batches batches in parallel; next() hands the
/// batches over in order. An error met on a sample (an unreadable or corrupt file, an image
/// under 8x8 pixels) is thrown by the next() that would have returned its batch, as the same
/// exception type with the same message as without workers (the first failing sample of the
/// batch); the epoch then counts as finished. start_epoch cancels the work in flight (waiting
/// at most for the images being decoded) and the destructor joins the workers. Used from one
/// thread at a time; not copyable or movable.
class ImageFolderSource : public BatchSource {
 public:
  /// ValueError if files is empty, a label is negative, an option is out of range, or
  /// drop_last leaves no batch. The files are read only when their batches are made.
  ImageFolderSource(std::vector<ImageFile> files, ImageFolderSourceOptions opts);
  ~ImageFolderSource() override;
  ImageFolderSource(const ImageFolderSource&) = delete;
  ImageFolderSource& operator=(const ImageFolderSource&) = delete;

  /// ceil(N / batch_size), or floor with drop_last.
  std::int64_t batches_per_epoch() const override;
  /// The number of files N.
  std::int64_t size() const;
  /// The options in effect (workers resolved).
  const ImageFolderSourceOptions& options() const;
  /// Begins epoch `epoch` at batch first_batch (0 <= first_batch <= batches_per_epoch()), also
  /// mid-epoch. ValueError on a negative epoch or an out-of-range first_batch.
  void start_epoch(std::int64_t epoch, std::int64_t first_batch = 0) override;
  /// The next batch (true) or the end of the epoch (false). StateError before start_epoch.
  bool next(Batch& out) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mixprec::data
