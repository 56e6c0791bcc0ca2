// Listing an image folder (torchvision's ImageFolder layout). Every problem is found here,
// before training starts, except what only decoding can tell (a corrupt file): a missing
// format library, an empty class and a layout mistake would otherwise surface hours in.
#include "mixprec/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <system_error>

#include "data/image_decode.h"
#include "mixprec/core/error.h"
#include "mixprec/data/tabular.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;
using detail::ImageFormat;
constexpr const char* kOp = "image_folder";

std::optional<ImageFormat> format_of(const fs::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".jpg" || ext == ".jpeg") return ImageFormat::jpeg;
  if (ext == ".png") return ImageFormat::png;
  return std::nullopt;
}

bool is_folder(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);  // follows links; an error reads as "not a folder"
}

// The subfolders of dir (links to folders included), sorted by name.
std::vector<std::string> class_folders(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) names.push_back(it->path().filename().string());
  }
  MIXPREC_CHECK(!ec, ValueError, kOp, dir.string() << ": cannot list the folder (" << ec.message() << ")");
  MIXPREC_CHECK(!names.empty(), ValueError, kOp,
                dir.string() << " has no class folders; put each class's images in a subfolder named after "
                                "the class (DIR/cat/1.jpg, DIR/dog/2.png, ...)");
  std::sort(names.begin(), names.end());
  return names;
}

// The image files under one class folder, recursively, sorted by path. A file of a format this
// build cannot decode is refused here, naming the file and the library, not at its first batch.
std::vector<std::string> images_in(const fs::path& dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  const auto opts = fs::directory_options::follow_directory_symlink;
  for (fs::recursive_directory_iterator it(dir, opts, ec), end; !ec && it != end; it.increment(ec)) {
    const std::optional<ImageFormat> format = format_of(it->path());
    std::error_code type_ec;
    if (!format || !it->is_regular_file(type_ec)) continue;
    MIXPREC_CHECK(detail::format_available(*format), ValueError, kOp,
                  it->path().string() << ": " << detail::missing_format_message(*format));
    paths.push_back(it->path().string());
  }
  MIXPREC_CHECK(!ec, ValueError, kOp, dir.string() << ": cannot list the folder (" << ec.message() << ")");
  MIXPREC_CHECK(!paths.empty(), ValueError, kOp,
                dir.string() << " holds no .jpg, .jpeg or .png file; add the class's images or remove the folder");
  std::sort(paths.begin(), paths.end());
  return paths;
}

void append_class(const fs::path& dir, std::int64_t label, std::vector<ImageFile>& out) {
  for (std::string& p : images_in(dir)) out.push_back({std::move(p), label});
}

}  // namespace

ImageFolder list_image_folder(const std::string& root, double val_fraction, std::uint64_t seed) {
  MIXPREC_CHECK(val_fraction > 0 && val_fraction < 1, ValueError, kOp,
                "the held-out fraction must be in (0, 1), got " << val_fraction);
  std::error_code ec;
  const fs::file_status status = fs::status(root, ec);
  MIXPREC_CHECK(status.type() != fs::file_type::not_found, ValueError, kOp,
                root << ": no such folder; give a folder of class subfolders (or of train/ and val/)");
  MIXPREC_CHECK(!ec, ValueError, kOp, root << ": cannot access the folder (" << ec.message() << ")");
  MIXPREC_CHECK(fs::is_directory(status), ValueError, kOp,
                root << " is a file, not a folder; give a folder of class subfolders (or of train/ and val/)");
  const fs::path dir(root);
  const bool has_train = is_folder(dir / "train"), has_val = is_folder(dir / "val");
  MIXPREC_CHECK(has_train == has_val, ValueError, kOp,
                root << " has a " << (has_train ? "train/" : "val/") << " folder but no "
                     << (has_train ? "val/" : "train/")
                     << " folder; give both (each with the class subfolders), or put the class folders "
                        "directly in "
                     << root << " to hold out --val-fraction of the images");
  ImageFolder f;
  if (has_train) {
    f.split_on_disk = true;
    f.classes = class_folders(dir / "train");
    for (std::size_t c = 0; c < f.classes.size(); ++c) {
      append_class(dir / "train" / f.classes[c], static_cast<std::int64_t>(c), f.train);
    }
    // Ids come from train/'s sorted names: numbering val/ on its own (as two separate
    // torchvision ImageFolders would) silently mislabels it when one class is missing there.
    for (const std::string& name : class_folders(dir / "val")) {
      const auto it = std::lower_bound(f.classes.begin(), f.classes.end(), name);
      MIXPREC_CHECK(it != f.classes.end() && *it == name, ValueError, kOp,
                    (dir / "val" / name).string() << " is a class that " << (dir / "train").string()
                                                  << " does not have; the classes of val/ must be among train/'s");
      append_class(dir / "val" / name, it - f.classes.begin(), f.val);
    }
    return f;
  }
  f.classes = class_folders(dir);
  std::vector<ImageFile> all;
  for (std::size_t c = 0; c < f.classes.size(); ++c) append_class(dir / f.classes[c], static_cast<std::int64_t>(c), all);
  MIXPREC_CHECK(all.size() >= 2, ValueError, kOp,
                root << " holds a single image; holding some out for validation needs at least two");
  const std::vector<std::int64_t> held = held_out_rows(static_cast<std::int64_t>(all.size()), val_fraction, seed);
  std::size_t h = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (h < held.size() && held[h] == static_cast<std::int64_t>(i)) {
      f.val.push_back(std::move(all[i]));
      ++h;
    } else {
      f.train.push_back(std::move(all[i]));
    }
  }
  return f;
}

}  // namespace mixprec::data
