// The cuDNN loader (cudnn_loader.h). Only dlopen/dlsym: no CUDA or cuDNN call but
// cudnnGetVersion, which needs no device, so `mixprec env` and the tests run it without a GPU.
#include "kernels/cuda/cudnn_loader.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "mixprec/core/gpu.h"
#include "mixprec/kernels/cudnn.h"

#if defined(MIXPREC_HAVE_CUDNN)
#include <cudnn_version.h>
#endif

namespace mixprec::kernels::cuda {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSoname = "libcudnn.so.9";

/// The symbols the frontend needs beside cudnnGetVersion: a file without them is not cuDNN 9.
constexpr const char* kRequiredSymbols[] = {"cudnnCreate", "cudnnDestroy", "cudnnSetStream",
                                            "cudnnGetErrorString", "cudnnBackendCreateDescriptor",
                                            "cudnnBackendExecute"};

int major_of(std::size_t v) { return static_cast<int>(v >= 90000 ? v / 10000 : v / 1000); }
int minor_of(std::size_t v) { return static_cast<int>(v >= 90000 ? (v / 100) % 100 : (v / 100) % 10); }

}  // namespace

std::string cudnn_required_text() {
  const std::size_t built = cudnn_built_version();
  return std::to_string(major_of(built)) + ".x >= " + std::to_string(major_of(built)) + "." +
         std::to_string(minor_of(built));
}

namespace {

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown error";
}

/// The file a handle came from (for a library opened by its soname).
std::string path_of(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return kSoname;
}

struct Attempt {
  CudnnLibrary lib;
  bool refused = false;  ///< the file existed (or opened) but was broken or the wrong version
};

/// Opens `file` (a path, or the bare soname for the loader's own search) and checks it. Unused
/// in a build without the cuDNN path (find_cudnn says why there is none there).
[[maybe_unused]] Attempt try_open(const std::string& file, bool keep_open) {
  Attempt a;
  dlerror();
  void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    a.lib.why_none = file + ": dlopen failed: " + dl_error();
    a.refused = file.find('/') != std::string::npos;  // a bare soname not found is "not found"
    return a;
  }
  a.refused = true;
  const std::string path = path_of(h);
  using GetVersion = std::size_t (*)();
  auto* get_version = reinterpret_cast<GetVersion>(dlsym(h, "cudnnGetVersion"));
  if (get_version == nullptr) {
    a.lib.why_none = path + ": not a cuDNN library (no cudnnGetVersion)";
    dlclose(h);
    return a;
  }
  for (const char* sym : kRequiredSymbols) {
    if (dlsym(h, sym) == nullptr) {
      a.lib.why_none = path + ": broken cuDNN library (symbol " + sym + " missing)";
      dlclose(h);
      return a;
    }
  }
  const std::size_t v = get_version();
  const std::size_t built = cudnn_built_version();
  if (major_of(v) != major_of(built) || minor_of(v) < minor_of(built)) {
    a.lib.why_none = "version " + cudnn_version_text(v) + " at " + path + ": need " + cudnn_required_text();
    dlclose(h);
    return a;
  }
  a.refused = false;
  a.lib.path = path;
  a.lib.version = v;
  if (keep_open) {
    a.lib.handle = h;
  } else {
    dlclose(h);
  }
  return a;
}

/// Expands a glob pattern to the folders that exist, in sorted order (newest Python last).
std::vector<std::string> expand(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), GLOB_ONLYDIR | GLOB_NOSORT, nullptr, &g) == 0) {
    for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  std::sort(out.rbegin(), out.rend());  // python3.12 before python3.11, cuda-13.1 before 13.0
  return out;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

bool is_file(const std::string& p) {
  std::error_code ec;
  return fs::exists(p, ec) && !fs::is_directory(p, ec);
}

/// The toolkit's library folders, then the cuDNN wheels' (cudnn_loader.h), without duplicates.
std::vector<std::string> search_folders() {
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"}) {
    const std::string v = env_or_empty(var);
    if (!v.empty()) roots.push_back(v);
  }
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& d : expand("/usr/local/cuda-*")) roots.push_back(d);
  std::vector<std::string> folders;
  for (const std::string& r : roots) {
    for (const char* sub : {"/lib64", "/lib", "/targets/x86_64-linux/lib", "/targets/sbsa-linux/lib"}) {
      folders.push_back(r + sub);
    }
  }
  std::vector<std::string> site;
  std::string pythonpath = env_or_empty("PYTHONPATH");
  for (std::size_t start = 0; start <= pythonpath.size();) {
    const std::size_t end = std::min(pythonpath.find(':', start), pythonpath.size());
    if (end > start) site.push_back(pythonpath.substr(start, end - start));
    start = end + 1;
  }
  std::vector<std::string> prefixes;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const std::string v = env_or_empty(var);
    if (!v.empty()) prefixes.push_back(v);
  }
  // The environment of a python3 on PATH (an activated or merely listed venv: bin/..).
  const std::string path = env_or_empty("PATH");
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    if (!dir.empty() && is_file(dir + "/python3")) prefixes.push_back(dir + "/..");
    start = end + 1;
  }
  const std::string home = env_or_empty("HOME");
  if (!home.empty()) prefixes.push_back(home + "/.local");
  for (const char* p : {"/usr/local", "/usr", "/opt/conda"}) prefixes.emplace_back(p);
  // Venvs installed under /opt (the lent GPU machines keep PyTorch's in /opt/torch/.venv).
  for (const char* pattern : {"/opt/*/.venv", "/opt/*/venv"}) {
    for (const std::string& d : expand(pattern)) prefixes.push_back(d);
  }
  for (const std::string& p : prefixes) {
    for (const char* kind : {"site-packages", "dist-packages"}) {
      for (const std::string& d : expand(p + "/lib/python3*/" + kind)) site.push_back(d);
    }
  }
  site.emplace_back("/usr/lib/python3/dist-packages");
  for (const std::string& s : site) {
    folders.push_back(s + "/nvidia/cudnn/lib");  // nvidia-cudnn-cu12 / -cu13
    folders.push_back(s + "/nvidia/cu13/lib");   // CUDA 13 wheels' shared folder
  }
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (const std::string& f : folders) {
    if (seen.insert(f).second) unique.push_back(f);
  }
  return unique;
}

bool is_off(std::string_view s) { return s == "off" || s == "OFF" || s == "0" || s == "none"; }

}  // namespace

std::size_t cudnn_built_version() {
#if defined(MIXPREC_HAVE_CUDNN)
  return CUDNN_VERSION;
#else
  return 0;
#endif
}

std::string cudnn_version_text(std::size_t v) {
  return std::to_string(major_of(v)) + "." + std::to_string(minor_of(v)) + "." +
         std::to_string(v % 100);
}

CudnnLibrary find_cudnn(const char* setting, bool keep_open) {
  CudnnLibrary none;
#if !defined(MIXPREC_HAVE_CUDNN)
  (void)setting;
  (void)keep_open;
#if defined(MIXPREC_HAVE_CUDA)
  none.why_none = "built without the cuDNN frontend (MIXPREC_CUDNN_FRONTEND_DIR)";
#else
  none.why_none = "built without CUDA";
#endif
  return none;
#else
  const std::string set = setting != nullptr ? setting : "";
  if (is_off(set)) {
    none.why_none = "MIXPREC_CUDNN=" + set;
    return none;
  }
  if (!set.empty()) {
    std::error_code ec;
    const std::string file = fs::is_directory(set, ec) ? set + "/" + kSoname : set;
    if (!fs::exists(file, ec)) {
      none.why_none = "MIXPREC_CUDNN=" + set + ": no such file: " + file;
      return none;
    }
    Attempt a = try_open(file, keep_open);
    if (a.lib.handle == nullptr && !a.lib.why_none.empty()) {
      a.lib.why_none = "MIXPREC_CUDNN=" + set + ": " + a.lib.why_none;
    }
    return a.lib;
  }
  std::vector<std::string> refusals;
  std::set<std::string> tried;  // canonical paths: /usr/local/cuda and cuda-13.0 are one file
  Attempt first = try_open(kSoname, keep_open);
  if (!first.refused && first.lib.why_none.empty()) return first.lib;
  if (first.refused) refusals.push_back(first.lib.why_none);
  const std::vector<std::string> folders = search_folders();
  for (const std::string& folder : folders) {
    const std::string file = folder + "/" + kSoname;
    if (!is_file(file)) continue;
    std::error_code ec;
    const std::string canonical = fs::canonical(file, ec).string();
    if (!tried.insert(ec ? file : canonical).second) continue;
    Attempt a = try_open(file, keep_open);
    if (!a.refused) return a.lib;
    refusals.push_back(a.lib.why_none);
  }
  if (!refusals.empty()) {
    std::string why = refusals.front();
    for (std::size_t i = 1; i < refusals.size(); ++i) why += "; " + refusals[i];
    none.why_none = why;
    return none;
  }
  std::string where = "not found in: the loader's paths (" + first.lib.why_none + ")";
  for (const std::string& f : folders) {
    std::error_code ec;
    if (fs::is_directory(f, ec)) where += ", " + f;
  }
  where += " (set MIXPREC_CUDNN to the file or its folder)";
  none.why_none = where;
  return none;
#endif
}

const CudnnLibrary& cudnn_library() {
  static const CudnnLibrary lib = [] {
    const char* setting = std::getenv("MIXPREC_CUDNN");
    CudnnLibrary found = find_cudnn(setting, true);
    // A file that was there but unusable deserves one line; "off" and "not found" are choices
    // or the ordinary state of a machine without cuDNN, and `mixprec env` says them.
    const bool off = setting != nullptr && is_off(setting);
    const bool not_found = found.why_none.rfind("not found in:", 0) == 0 ||
                           found.why_none.rfind("built without", 0) == 0;
    if (found.handle == nullptr && !off && !not_found) {
      std::fprintf(stderr,
                   "mixprec: cuDNN not used: %s; attention and convolutions run on mixprec's own "
                   "kernels\n",
                   found.why_none.c_str());
    }
    return found;
  }();
  return lib;
}

std::string cudnn_preload_dependencies() {
  const CudnnLibrary& lib = cudnn_library();
  if (lib.handle == nullptr) return lib.why_none;
  const std::string folder = fs::path(lib.path).parent_path().string();
  // By full path, so that libcudnn.so.9's own dlopen by soname finds these already loaded.
  for (const char* sub : {"libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9",
                          "libcudnn_engines_runtime_compiled.so.9", "libcudnn_heuristic.so.9",
                          "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_adv.so.9"}) {
    const std::string file = folder + "/" + sub;
    if (!is_file(file)) {
      if (std::string_view(sub) == "libcudnn_graph.so.9") return "no " + file + " beside " + lib.path;
      continue;  // the loader's search may find it elsewhere; cuDNN reports what is missing
    }
    dlerror();
    if (dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) return file + ": " + dl_error();
  }
  // Libraries that are opened by soname and that we link statically or not at all, so they may
  // be nowhere on the loader's path: libcudart.so.13 (the frontend's dynamic mode uses it for a
  // few runtime calls: workspace memsets) and NVRTC (cuDNN compiles its runtime-compiled engines,
  // SDPA among them, with it). Opening one by full path makes its soname resolve. Best effort:
  // without them those engines or calls fail, and the caller falls back.
  std::vector<std::string> folders = search_folders();
  folders.insert(folders.begin(), folder);
  for (const char* soname : {"libcudart.so.13", "libnvrtc.so.13", "libnvrtc-builtins.so.13.0"}) {
    if (dlopen(soname, RTLD_NOW | RTLD_NOLOAD) != nullptr) continue;
    if (dlopen(soname, RTLD_NOW | RTLD_LOCAL) != nullptr) continue;
    bool opened = false;
    for (const std::string& f : folders) {
      for (const std::string& dir : {f, f + "/../../cuda_runtime/lib", f + "/../../cuda_nvrtc/lib"}) {
        const std::string file = dir + "/" + soname;
        if (is_file(file) && dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) {
          opened = true;
          break;
        }
      }
      if (opened) break;
    }
  }
  return "";
}

}  // namespace mixprec::kernels::cuda

namespace mixprec {

CudnnInfo cudnn_info() {
  using kernels::cuda::cudnn_library;
  CudnnInfo info;
#if defined(MIXPREC_HAVE_CUDNN)
  info.built_with_cudnn = true;
  info.required = kernels::cuda::cudnn_required_text();
#endif
  const kernels::cuda::CudnnLibrary& lib = cudnn_library();
  info.path = lib.path;
  if (lib.handle != nullptr) info.version = kernels::cuda::cudnn_version_text(lib.version);
  info.why_none = lib.why_none;
  return info;
}

}  // namespace mixprec
