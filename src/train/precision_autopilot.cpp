// The precision autopilot: per-layer statistics on sampled steps, the move rules, and the
// layer policy file.
#include "mixprec/train/precision_autopilot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "mixprec/runtime/node.h"
#include "mixprec/core/transfer.h"
#include "mixprec/core/error.h"
#include "mixprec/numerics/tensor_stats.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/nn/conv_layers.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/transformer.h"
#include "mixprec/numerics/formats.h"
#include "io/json_number.h"

namespace mixprec::train {
namespace {

using nlohmann::json;
using numerics::Format;
constexpr const char* kOp = "precision autopilot";
constexpr const char* kFormat = "mixprec-layer-policy";

double fp16_max() { return numerics::format_info(Format::fp16).max; }


DType parse_layer_dtype(const std::string& text, const std::string& where) {
  if (text == "fp16") return DType::f16;
  if (text == "bf16") return DType::bf16;
  if (text == "fp32") return DType::f32;
  // fp8 runs only: puts a Linear in the fp8 recipe (nn::Fp8Layers); auto-layer refuses it.
  if (text == "fp8") return DType::f8e4m3;
  MIXPREC_CHECK(false, ValueError, kOp,
                where << ": unknown dtype '" << text << "'; use fp16, bf16, fp32 (or fp8, in fp8 runs)");
  return DType::f32;
}

// One step up the ladder fp16 -> bf16 -> fp32 (fp32 stays).
DType up(DType d) { return d == DType::f16 ? DType::bf16 : DType::f32; }
DType down(DType d) { return d == DType::f32 ? DType::bf16 : DType::f16; }
int rank_of(DType d) { return d == DType::f16 ? 0 : d == DType::bf16 ? 1 : 2; }

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
std::string percent(double f) { return number(100 * f) + "%"; }

// What the rules read of a stream of values (a layer's outputs, or their gradients): a
// single pass that costs about a nanosecond per value, because it runs on sampled training
// steps (numerics::TensorStats, which also keeps binade histograms, costs ten times that).
// The thresholds are the exact rounding boundaries of numerics::cast_thresholds, so the
// counts agree with TensorStats and with numerics::quantize.
struct RangeCounts {
  std::int64_t count = 0, zeros = 0, nonfinite = 0;
  double amax = 0;                  // largest finite magnitude
  std::int64_t fp16_subnormal = 0;  // nonzero values fp16 holds as subnormals
  std::int64_t fp16_low = 0;        // ... as subnormals or flushes to zero
  std::int64_t bf16_low = 0;        // the same for bf16

  bool empty() const { return count == 0; }
  // Of the nonzero finite values (the zeros a ReLU or a mask makes say nothing about range).
  double fraction(std::int64_t n) const {
    return static_cast<double>(n) / static_cast<double>(std::max<std::int64_t>(1, count - zeros - nonfinite));
  }
  double low_fraction(Format f) const { return fraction(f == Format::fp16 ? fp16_low : bf16_low); }

  void add(const Tensor& t) {
    // On sampled steps only: the values cross to the host (one counted download) and the
    // counting runs there; a device keeps its tensors for every other step.
    const TransferReason why("autopilot statistics (sampled steps)");
    const std::vector<float> values = t.to_vector();
    const float* x = values.data();
    const auto n = static_cast<std::int64_t>(values.size());
    const numerics::CastThresholds& h = numerics::cast_thresholds(Format::fp16);
    const numerics::CastThresholds& b = numerics::cast_thresholds(Format::bf16);
    const float h_zero = static_cast<float>(h.zero_max), h_sub = static_cast<float>(h.subnormal_end);
    const float b_sub = static_cast<float>(b.subnormal_end);
    float amax_f = 0;
    std::int64_t z = 0, bad = 0, hs = 0, hl = 0, bl = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const float a = std::fabs(x[i]);
      const bool finite = a <= std::numeric_limits<float>::max();
      bad += !finite;
      z += a == 0.0f;
      amax_f = finite && a > amax_f ? a : amax_f;
      const bool nonzero = a > 0.0f;
      hl += nonzero && a < h_sub;
      hs += a > h_zero && a < h_sub;
      bl += nonzero && a < b_sub;
    }
    count += n;
    zeros += z;
    nonfinite += bad;
    amax = std::max(amax, static_cast<double>(amax_f));
    fp16_subnormal += hs;
    fp16_low += hl;
    bf16_low += bl;
  }
  // For combining over ranks: the counts (summed) and the largest magnitude (maxed).
  void append_counts(std::vector<double>& out) const {
    for (const std::int64_t c : {count, zeros, nonfinite, fp16_subnormal, fp16_low, bf16_low}) {
      out.push_back(static_cast<double>(c));
    }
  }
  const double* take_counts(const double* in) {
    for (std::int64_t* c : {&count, &zeros, &nonfinite, &fp16_subnormal, &fp16_low, &bf16_low}) {
      *c = static_cast<std::int64_t>(*in++);
    }
    return in;
  }
};

// What one layer showed on one sampled step.
struct Sample {
  bool seen = false;            // the layer ran in this step
  RangeCounts activation;       // its output, in its compute dtype
  RangeCounts gradient;         // its output's gradient as backward saw it (loss-scaled)
  bool nonfinite_from_finite = false;  // output non-finite although the input was finite
  double flops = 0;             // forward GEMM FLOPs of this step
};

struct Layer {
  std::string path;
  nn::Module* module = nullptr;
  DType dtype = DType::bf16;
  int clean = 0;                // consecutive samples that fit the dtype below
  int probation = 0;            // samples needed before moving down
  bool came_down = false;       // moved down before: a new move up doubles the probation
  double flops = 0;             // as last measured
  Sample sample;
};

bool is_gemm_layer(const nn::Module& m) {
  return m.children().empty() &&
         (dynamic_cast<const nn::Linear*>(&m) != nullptr || dynamic_cast<const nn::Conv2d*>(&m) != nullptr);
}

void collect(nn::Module& m, const std::string& path, std::vector<Layer>& out) {
  if (is_gemm_layer(m)) {
    Layer l;
    l.path = path;
    l.module = &m;
    out.push_back(std::move(l));
    return;
  }
  for (const auto& [name, child] : m.children()) collect(*child, nn::join_path(path, name), out);
}

json move_to_json(const LayerMove& m) {
  return json{{"step", m.step}, {"layer", m.layer}, {"from", layer_dtype_name(m.from)},
              {"to", layer_dtype_name(m.to)}, {"reason", m.reason}};
}

LayerMove move_from_json(const json& j, const std::string& where) {
  LayerMove m;
  MIXPREC_CHECK(j.is_object() && j.contains("step") && j.contains("layer") && j.contains("from") &&
                    j.contains("to"),
                ValueError, kOp, where << ": a move needs step, layer, from and to");
  m.step = io::json_integer<std::int64_t>(j.at("step"), kOp, where + ": a move's step");
  m.layer = j.at("layer").get<std::string>();
  m.from = parse_layer_dtype(j.at("from").get<std::string>(), where);
  m.to = parse_layer_dtype(j.at("to").get<std::string>(), where);
  m.reason = j.value("reason", "");
  return m;
}

}  // namespace

const char* layer_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::f8e4m3: return "fp8";
    default: return "fp32";
  }
}

// ---- the policy file ----

std::string LayerPolicy::to_json_text() const {
  json layers_json = json::object();
  for (const auto& [path, d] : layers) layers_json[path] = layer_dtype_name(d);
  json moves_json = json::array();
  for (const LayerMove& m : moves) moves_json.push_back(move_to_json(m));
  return json{{"format", kFormat}, {"version", 1}, {"model", model}, {"compute", layer_dtype_name(compute)},
              {"layers", layers_json}, {"moves", moves_json}}
             .dump(2) + "\n";
}

LayerPolicy LayerPolicy::parse(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    MIXPREC_CHECK(false, ValueError, kOp, "policy file '" << source << "' is not valid JSON: " << e.what());
  }
  const std::string where = "policy file '" + source + "'";
  // Compared as JSON values: j.value("format", "") would throw a json exception, not a
  // ValueError, for a "format" that is not a string (found by fuzz_layer_policy in CI).
  MIXPREC_CHECK(j.is_object() && j.contains("format") && j.at("format") == kFormat, ValueError, kOp,
                where << " is not a layer policy (its \"format\" must be \"" << kFormat
                      << "\"; write one with --policy-out)");
  // == on the json value, not value<int>(): that would cast a JSON 1e300 to int.
  MIXPREC_CHECK(j.contains("version") && j.at("version") == 1, ValueError, kOp, where << ": unsupported version; this mixprec reads 1");
  LayerPolicy p;
  try {
    p.model = j.value("model", "");
    p.compute = parse_layer_dtype(j.value("compute", "bf16"), where + ", \"compute\"");
    MIXPREC_CHECK(j.contains("layers") && j.at("layers").is_object(), ValueError, kOp,
                  where << ": \"layers\" must be an object of layer path -> fp16|bf16|fp32");
    for (const auto& [path, value] : j.at("layers").items()) {
      MIXPREC_CHECK(value.is_string(), ValueError, kOp,
                    where << ", layer '" << path << "': the dtype must be a string (fp16, bf16 or fp32)");
      p.layers.emplace_back(path, parse_layer_dtype(value.get<std::string>(), where + ", layer '" + path + "'"));
    }
    if (j.contains("moves")) {
      for (const json& m : j.at("moves")) p.moves.push_back(move_from_json(m, where));
    }
  } catch (const json::exception& e) {
    MIXPREC_CHECK(false, ValueError, kOp, where << ": " << e.what());
  }
  return p;
}

LayerPolicy LayerPolicy::read(const std::string& path) { return parse(io::read_file(path), path); }

void LayerPolicy::write(const std::string& path) const { io::write_file_atomically(path, to_json_text()); }

// ---- the autopilot ----

struct PrecisionAutopilot::State {
  std::string model_name;
  DType start = DType::bf16;
  AutopilotOptions options;
  std::vector<Layer> layers;
  std::unordered_map<const nn::Module*, std::size_t> index;
  std::vector<LayerMove> moves;
  std::deque<bool> skips;  // the last skip_window steps: true = skipped
  bool frozen = false;
  bool sample_next = true;  // the first step is always sampled
  std::unique_ptr<nn::ForwardObserver> observer;
  const dist::Communicator* comm = nullptr;  // data parallel: combine samples over its ranks

  // Data parallel: every layer's sample becomes the combination of all ranks' samples (two
  // collectives: the sums, then the maxima), so the rules decide alike everywhere. Counts stay
  // exact in double up to 2^53 values.
  void combine_samples() {
    std::vector<double> sums, maxima;
    for (const Layer& l : layers) {
      l.sample.activation.append_counts(sums);
      l.sample.gradient.append_counts(sums);
      sums.push_back(l.sample.flops);
      maxima.insert(maxima.end(), {l.sample.seen ? 1.0 : 0.0, l.sample.nonfinite_from_finite ? 1.0 : 0.0,
                                   l.sample.activation.amax, l.sample.gradient.amax});
    }
    comm->allreduce_sums(sums.data(), sums.size());
    comm->allreduce_maxima(maxima.data(), maxima.size());
    const double* in = sums.data();
    const double* mx = maxima.data();
    for (Layer& l : layers) {
      in = l.sample.activation.take_counts(in);
      in = l.sample.gradient.take_counts(in);
      l.sample.flops = *in++;
      l.sample.seen = mx[0] != 0.0;
      l.sample.nonfinite_from_finite = mx[1] != 0.0;
      l.sample.activation.amax = mx[2];
      l.sample.gradient.amax = mx[3];
      mx += 4;
    }
  }

  // Records the samples: installed around the forward passes of a sampled step.
  class Observer final : public nn::ForwardObserver {
   public:
    explicit Observer(State& s) : s_(s) {}
    Tensor on_leaf_forward(nn::Module& module, const Tensor& input, const Tensor& output) override {
      auto it = s_.index.find(&module);
      if (it == s_.index.end()) return output;
      Layer& l = s_.layers[it->second];
      Sample& smp = l.sample;
      smp.seen = true;
      for (const auto& [name, p] : module.local_parameters()) {
        if (name == "weight" && p.dim() >= 2 && p.size(0) > 0) {
          smp.flops += 2.0 * static_cast<double>(output.numel()) * static_cast<double>(p.numel() / p.size(0));
        }
      }
      if (s_.frozen) return output;  // replaying a policy: the FLOPs are all it needs
      RangeCounts a;
      a.add(output);
      if (a.nonfinite > 0) {
        RangeCounts in;
        in.add(input);
        if (in.nonfinite == 0) smp.nonfinite_from_finite = true;
      }
      smp.activation.count += a.count;
      smp.activation.zeros += a.zeros;
      smp.activation.nonfinite += a.nonfinite;
      smp.activation.amax = std::max(smp.activation.amax, a.amax);
      const std::size_t layer = it->second;
      return runtime::observe_gradient(output, [this, layer](const Tensor& g) {
        s_.layers[layer].sample.gradient.add(g);
      });
    }

   private:
    State& s_;
  };

  void set(Layer& l, DType d) {
    l.dtype = d;
    l.module->set_compute_dtype(d);
  }
  void move(std::int64_t step, Layer& l, DType to, std::string reason, std::vector<LayerMove>& made) {
    LayerMove m{step, l.path, l.dtype, to, std::move(reason)};
    if (rank_of(to) > rank_of(l.dtype)) {
      // Back up after coming down: the statistics that let it down were not enough; wait longer.
      if (l.came_down) l.probation *= 2;
    } else {
      l.came_down = true;
    }
    l.clean = 0;
    set(l, to);
    moves.push_back(m);
    made.push_back(std::move(m));
  }
};

PrecisionAutopilot::PrecisionAutopilot(nn::Module& model, std::string model_name, DType start,
                                       AutopilotOptions options)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  MIXPREC_CHECK(start == DType::f16 || start == DType::bf16, ValueError, kOp,
                "--compute must be fp16 or bf16, got " << name(start));
  MIXPREC_CHECK(options.sample_every >= 1 && options.probation >= 1 && options.headroom >= 1 &&
                    options.skip_window >= 1 && options.skip_limit >= 1 && options.underflow > 0 &&
                    options.underflow < 1,
                ValueError, kOp, "invalid autopilot options");
  s.model_name = std::move(model_name);
  s.start = start;
  s.options = options;
  collect(model, "", s.layers);
  MIXPREC_CHECK(!s.layers.empty(), ValueError, kOp,
                "--precision auto-layer sets a compute dtype per Linear or Conv2d layer, and model '"
                    << s.model_name << "' has none; use --precision fp16 or bf16");
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    Layer& l = s.layers[i];
    l.probation = options.probation;
    s.index[l.module] = i;
    s.set(l, start);
  }
  s.observer = std::make_unique<State::Observer>(s);
}

PrecisionAutopilot::~PrecisionAutopilot() = default;

void PrecisionAutopilot::replay(const LayerPolicy& policy, const std::string& source) {
  State& s = *s_;
  std::unordered_map<std::string, std::size_t> by_path;
  std::string known;
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    by_path[s.layers[i].path] = i;
    known += (i ? ", " : "") + s.layers[i].path;
  }
  std::set<std::string> seen;
  for (const auto& [path, d] : policy.layers) {
    const std::string fused = nn::fused_qkv_layer(path);
    MIXPREC_CHECK(by_path.count(path) != 0 || fused.empty() || by_path.count(fused) == 0, ValueError, kOp,
                  "policy file '" << source << "' names layer '" << path << "', one of the separate q, k "
                                  << "and v projections of older versions; they are one Linear now, '"
                                  << fused << "', with one dtype: name that instead");
    MIXPREC_CHECK(by_path.count(path) != 0, ValueError, kOp,
                  "policy file '" << source << "' names layer '" << path << "', which model '" << s.model_name
                                  << "' does not have (its Linear and Conv2d layers: " << known << ")");
    MIXPREC_CHECK(seen.insert(path).second, ValueError, kOp,
                  "policy file '" << source << "' names layer '" << path << "' twice");
    MIXPREC_CHECK(d != DType::f8e4m3, ValueError, kOp,
                  "policy file '" << source << "' puts layer '" << path
                                  << "' in fp8, which only --precision fp8 or fp8-delayed runs; "
                                     "give it fp16, bf16 or fp32 for auto-layer");
  }
  for (const auto& [path, d] : policy.layers) s.set(s.layers[by_path[path]], d);
  s.frozen = true;
  s.sample_next = true;  // once, for the FLOP share
}

void PrecisionAutopilot::combine_over(const dist::Communicator& comm) { s_->comm = &comm; }

bool PrecisionAutopilot::frozen() const { return s_->frozen; }
bool PrecisionAutopilot::sampling() const { return s_->sample_next; }
nn::ForwardObserver* PrecisionAutopilot::observer() { return s_->observer.get(); }
const std::vector<LayerMove>& PrecisionAutopilot::moves() const { return s_->moves; }

std::vector<LayerMove> PrecisionAutopilot::end_step(std::int64_t step, bool applied, double loss_scale) {
  State& s = *s_;
  const AutopilotOptions& o = s.options;
  std::vector<LayerMove> made;
  const bool sampled = s.sample_next;
  if (!s.frozen) {
    s.skips.push_back(!applied);
    while (static_cast<int>(s.skips.size()) > o.skip_window) s.skips.pop_front();
  }
  if (sampled && s.comm != nullptr && s.comm->size() > 1) s.combine_samples();
  if (sampled) {
    for (Layer& l : s.layers) {
      if (l.sample.seen) l.flops = l.sample.flops;
    }
  }
  if (sampled && !s.frozen) {
    const double f16max = fp16_max();
    const int scale_log2 = loss_scale > 0 ? static_cast<int>(std::lround(std::log2(loss_scale))) : 0;
    bool raised = false;
    for (Layer& l : s.layers) {
      const Sample& smp = l.sample;
      if (!smp.seen) continue;
      const RangeCounts& a = smp.activation;
      const RangeCounts& g = smp.gradient;
      // up: overflow in forward.
      if (l.dtype != DType::f32 && smp.nonfinite_from_finite) {
        const std::string what = l.dtype == DType::f16 ? "beyond fp16's largest value 65504" : "beyond bf16's range";
        s.move(step, l, up(l.dtype),
               std::to_string(a.nonfinite) + " of its " + std::to_string(a.count) +
                   " activations were Inf/NaN from finite inputs (" + what + "; largest finite |x| " +
                   number(a.amax) + ")",
               made);
        raised = true;
        continue;
      }
      // up: fp16 gradients running off fp16's bottom at the shared loss scale.
      if (l.dtype == DType::f16 && !g.empty()) {
        const double sub = g.fraction(g.fp16_subnormal);
        if (sub > o.underflow) {
          s.move(step, l, DType::bf16,
                 percent(sub) + " of its nonzero output gradients were fp16 subnormals at loss scale 2^" +
                     std::to_string(scale_log2) + " (below 6.1e-5 precision is lost, below 6e-8 they flush to zero)",
                 made);
          raised = true;
          continue;
        }
      }
      // down: fits the dtype below with room to spare, for `probation` samples in a row.
      if (rank_of(l.dtype) > rank_of(s.start)) {
        const DType lower = down(l.dtype);
        const bool finite = a.nonfinite == 0 && g.nonfinite == 0;
        const Format f = lower == DType::f16 ? Format::fp16 : Format::bf16;
        const double limit = lower == DType::f16 ? f16max / o.headroom : numerics::format_info(Format::bf16).max;
        const double low = g.empty() ? 0.0 : g.low_fraction(f);
        const bool fits = finite && a.amax <= limit && g.amax <= limit && low <= o.underflow / 4;
        l.clean = fits ? l.clean + 1 : 0;
        if (l.clean >= l.probation) {
          s.move(step, l, lower,
                 "over its last " + std::to_string(l.clean) + " sampled steps its largest |activation| " +
                     number(a.amax) + " and |output gradient| " + number(g.amax) + " stayed within " +
                     layer_dtype_name(lower) + "'s range with " + number(o.headroom) + "x to spare, and " +
                     percent(low) + " of its gradients would be " + layer_dtype_name(lower) + " subnormals",
                 made);
        }
      }
    }
    // up: the scaler keeps skipping although no layer overflowed in forward.
    const auto skipped = std::count(s.skips.begin(), s.skips.end(), true);
    if (!raised && skipped >= o.skip_limit) {
      Layer* worst = nullptr;
      double worst_amax = -1;
      for (Layer& l : s.layers) {
        if (l.dtype != DType::f16 || !l.sample.seen) continue;
        const double amax = std::max(l.sample.activation.amax, l.sample.gradient.amax);
        if (amax > worst_amax) {
          worst_amax = amax;
          worst = &l;
        }
      }
      if (worst != nullptr) {
        s.move(step, *worst, DType::bf16,
               "the GradScaler skipped " + std::to_string(skipped) + " of the last " +
                   std::to_string(s.skips.size()) + " steps, and of the fp16 layers this one's values came closest to 65504 (largest |x| " +
                   number(worst_amax) + ")",
               made);
        s.skips.clear();
      }
    }
  }
  for (Layer& l : s.layers) l.sample = Sample{};
  s.sample_next = !s.frozen && ((step + 1) % o.sample_every == 0 || !applied);
  return made;
}

LayerPolicy PrecisionAutopilot::policy() const {
  LayerPolicy p;
  p.model = s_->model_name;
  p.compute = s_->start;
  for (const Layer& l : s_->layers) p.layers.emplace_back(l.path, l.dtype);
  p.moves = s_->moves;
  return p;
}

double PrecisionAutopilot::sixteen_bit_flop_share() const {
  double total = 0, low = 0;
  for (const Layer& l : s_->layers) {
    total += l.flops;
    if (l.dtype != DType::f32) low += l.flops;
  }
  return total > 0 ? low / total : 0.0;
}

std::string PrecisionAutopilot::state() const {
  const State& s = *s_;
  json layers = json::array();
  for (const Layer& l : s.layers) {
    layers.push_back({{"path", l.path}, {"dtype", layer_dtype_name(l.dtype)}, {"clean", l.clean},
                      {"probation", l.probation}, {"came_down", l.came_down}, {"flops", l.flops}});
  }
  json moves = json::array();
  for (const LayerMove& m : s.moves) moves.push_back(move_to_json(m));
  return json{{"start", layer_dtype_name(s.start)}, {"frozen", s.frozen}, {"sample_next", s.sample_next},
              {"skips", std::vector<bool>(s.skips.begin(), s.skips.end())},
              {"layers", layers}, {"moves", moves}}
      .dump();
}

namespace {

/// The checkpoint's layer entries with each merge's layers made one (load_state's contract).
json merge_layers(const json& layers, const std::vector<nn::StateMerge>& merges) {
  json out = layers;
  for (const nn::StateMerge& m : merges) {
    std::vector<std::size_t> at;
    for (const std::string& from : m.from) {
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i].at("path").get<std::string>() == from) at.push_back(i);
      }
    }
    if (at.empty()) continue;  // none of them was a layer the autopilot tracked
    MIXPREC_CHECK(at.size() == m.from.size(), StateError, kOp,
                  "the checkpoint's autopilot state has only some of the layers that became '"
                      << m.into << "'; it cannot be mapped onto this model");
    json merged = out[at[0]];
    merged["path"] = m.into;
    DType widest = DType::f16;
    int clean = std::numeric_limits<int>::max(), probation = 0;
    bool came_down = false;
    double flops = 0;
    for (const std::size_t i : at) {
      const DType d = parse_layer_dtype(out[i].at("dtype").get<std::string>(), "autopilot state");
      if (rank_of(d) > rank_of(widest)) widest = d;
      clean = std::min(clean, io::json_integer<int>(out[i].at("clean"), kOp, "autopilot state: clean"));
      probation = std::max(probation, io::json_integer<int>(out[i].at("probation"), kOp, "autopilot state: probation"));
      came_down = came_down || out[i].at("came_down").get<bool>();
      flops += out[i].at("flops").get<double>();
    }
    merged["dtype"] = layer_dtype_name(widest);
    merged["clean"] = clean;
    merged["probation"] = probation;
    merged["came_down"] = came_down;
    merged["flops"] = flops;
    out[at[0]] = merged;
    std::sort(at.begin() + 1, at.end(), std::greater<>());
    for (auto it = at.begin() + 1; it != at.end(); ++it) out.erase(*it);
  }
  return out;
}

}  // namespace

void PrecisionAutopilot::load_state(const std::string& text, const std::vector<nn::StateMerge>& merges) {
  State& s = *s_;
  try {
    json j = json::parse(text);
    if (!merges.empty()) j["layers"] = merge_layers(j.at("layers"), merges);
    const json& layers = j.at("layers");
    MIXPREC_CHECK(layers.size() == s.layers.size(), StateError, kOp,
                  "the checkpoint's autopilot state has " << layers.size() << " layers, the model "
                                                          << s.layers.size());
    MIXPREC_CHECK(parse_layer_dtype(j.at("start").get<std::string>(), "autopilot state") == s.start, StateError,
                  kOp, "the checkpoint's autopilot started in " << j.at("start").get<std::string>()
                                                                << ", this run in " << layer_dtype_name(s.start));
    for (std::size_t i = 0; i < layers.size(); ++i) {
      Layer& l = s.layers[i];
      const json& lj = layers[i];
      MIXPREC_CHECK(lj.at("path").get<std::string>() == l.path, StateError, kOp,
                    "the checkpoint's autopilot state names layer " << lj.at("path") << " where the model has '"
                                                                    << l.path << "'");
      s.set(l, parse_layer_dtype(lj.at("dtype").get<std::string>(), "autopilot state"));
      l.clean = io::json_integer<int>(lj.at("clean"), kOp, "autopilot state: clean");
      l.probation = io::json_integer<int>(lj.at("probation"), kOp, "autopilot state: probation");
      l.came_down = lj.at("came_down").get<bool>();
      l.flops = lj.at("flops").get<double>();
    }
    s.frozen = j.at("frozen").get<bool>();
    s.sample_next = j.at("sample_next").get<bool>();
    const auto skips = j.at("skips").get<std::vector<bool>>();
    s.skips.assign(skips.begin(), skips.end());
    s.moves.clear();
    for (const json& m : j.at("moves")) s.moves.push_back(move_from_json(m, "autopilot state"));
  } catch (const json::exception& e) {
    MIXPREC_CHECK(false, StateError, kOp, "the checkpoint's autopilot state is malformed: " << e.what());
  }
}

}  // namespace mixprec::train
