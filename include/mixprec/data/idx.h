#pragma once
/// IDX files (the MNIST / Fashion-MNIST format: a big-endian header, then unsigned bytes), read
/// gzip-compressed or raw, validated with errors that name the file and what is wrong with it;
/// and Fashion-MNIST loaded as a normalised f32 tensor.
///
/// Format: magic 0x00000803 (u8 data, 3 dims) + count, rows, cols, then count*rows*cols pixels
/// for images; magic 0x00000801 (u8 data, 1 dim) + count, then count labels for labels. Every
/// header field is a big-endian 32-bit integer.
///
/// Extra bytes after the data the header declares are an error: they mean the header's count
/// is wrong or the file is not what its name says, and silently dropping them would hide that.
/// (Bytes after the end of a gzip member that are not another gzip member are ignored by zlib
/// itself and cannot be seen here.) Every error is a ValueError whose message starts "read_idx:"
/// and names the file.
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::data {

/// Largest count accepted in an IDX header (MNIST-like sets hold 10^4..10^5 items).
inline constexpr std::int64_t kIdxMaxCount = 10'000'000;
/// Largest image side accepted in an IDX header.
inline constexpr std::int64_t kIdxMaxSide = 4096;
/// Largest count * rows * cols accepted in an images header (1 GiB of pixels, 4 GiB once
/// widened to f32); Fashion-MNIST's training set is 47 MB. Checked before anything is read.
inline constexpr std::int64_t kIdxMaxPixelBytes = std::int64_t{1} << 30;

/// count images of rows x cols unsigned bytes, row-major, image after image.
struct IdxImages {
  std::int64_t count = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<std::uint8_t> pixels;  ///< count * rows * cols bytes
};

/// One unsigned byte per item.
struct IdxLabels {
  std::vector<std::uint8_t> labels;
};

/// Reads an images file (magic 0x00000803), gzip or raw; ValueError naming the file if it is
/// missing, unreadable, corrupt gzip, has another magic, absurd dimensions (rows/cols 0 or >
/// kIdxMaxSide, count > kIdxMaxCount, more than kIdxMaxPixelBytes pixels), fewer or more bytes
/// than the header declares. An uncompressed file's size is checked against the header before
/// the data buffer is allocated; a gzip file's buffer grows only with the bytes that arrive.
IdxImages read_idx_images(const std::string& path);

/// Reads a labels file (magic 0x00000801), gzip or raw, with the same validation as
/// read_idx_images.
IdxLabels read_idx_labels(const std::string& path);

/// Per-pixel normalisation of Fashion-MNIST: (x / 255 - mean) / std over the training set.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;
/// Where Debian's dataset-fashion-mnist package installs the four files.
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

/// A classification data set held in memory.
struct Dataset {
  /// [N, 784] f32, each pixel (x / 255 - kFashionMnistMean) / kFashionMnistStd. Filed under
  /// MemoryCategory::workspace so it is not mistaken for activations in memory statistics.
  Tensor images;
  /// N class indices in [0, 10) (Fashion-MNIST), in [0, K) for other classification data;
  /// empty when the targets are real values.
  std::vector<std::int64_t> labels;
  /// N real-valued regression targets (f32); empty for classification. A data set has one
  /// kind of target: labels or values.
  std::vector<float> values;
};

/// Loads Fashion-MNIST's training (train = true: train-*) or test (t10k-*) split from dir, which
/// holds "<split>-images-idx3-ubyte" and "<split>-labels-idx1-ubyte", each either gzipped
/// (".gz", preferred) or raw. Keeps the first `limit` samples (-1: all; otherwise >= 1).
/// ValueError "read_idx: ..." if a file is missing, unreadable or invalid; ValueError
/// "load_fashion_mnist: ..." if the images are not 28x28, the image and label counts differ
/// (naming both files), a label is >= 10, or limit is invalid.
Dataset load_fashion_mnist(const std::string& dir, bool train, std::int64_t limit = -1);

/// Any MNIST-format split (train = true: train-*, else t10k-*; each file gzipped or raw) from
/// dir: images [N, rows * cols] f32 holding pixel / 255 (in [0, 1]; normalising is the caller's
/// choice), labels as stored (0..255), rows and cols from the file. Same file validation and
/// `limit` as load_fashion_mnist; ValueError "load_idx: ..." naming both files if the image and
/// label counts differ.
struct IdxDataset {
  Dataset data;
  std::int64_t rows = 0, cols = 0;
};
IdxDataset load_idx_dataset(const std::string& dir, bool train, std::int64_t limit = -1);

}  // namespace mixprec::data
