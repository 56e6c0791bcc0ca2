// `mixprec inspect` output: the report as JSON (stable keys, docs/diagnostics.md) and as aligned
// text.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "mixprec/train/inspect.h"

namespace mixprec::train {

using numerics::kInspectFormats;
using numerics::kInspectFormatCount;
using numerics::kMinBinade;
using numerics::kBinadeCount;
using numerics::TensorStats;
namespace {

using nlohmann::json;
using numerics::Format;

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json stats_json(const TensorStats& s) {
  if (s.empty()) return nullptr;
  json j{{"count", s.count},
         {"zeros", s.zeros},
         {"nan", s.nan},
         {"inf", s.inf},
         {"amax", s.amax},
         {"amin_nonzero", s.amin_nonzero}};
  for (std::size_t i = 0; i < kInspectFormatCount; ++i) {
    j[numerics::format_info(kInspectFormats[i]).name] = {
        {"overflow", s.fraction(s.cast[i].overflow)},
        {"underflow", s.fraction(s.cast[i].underflow)},
        {"subnormal", s.fraction(s.cast[i].subnormal)}};
  }
  // The binade histogram, trimmed to its nonzero range: counts[i] is binade lo + i.
  std::size_t first = kBinadeCount, last = 0;
  for (std::size_t i = 0; i < kBinadeCount; ++i) {
    if (s.binades[i] != 0) {
      first = std::min(first, i);
      last = i;
    }
  }
  json hist{{"lo", nullptr}, {"counts", json::array()}};
  if (first < kBinadeCount) {
    hist["lo"] = static_cast<int>(first) + kMinBinade;
    for (std::size_t i = first; i <= last; ++i) hist["counts"].push_back(s.binades[i]);
  }
  j["log2_histogram"] = hist;
  return j;
}

json layer_json(const LayerReport& l) {
  json lost = nullptr;
  if (l.lost_updates.considered > 0) {
    lost = {{"considered", l.lost_updates.considered},
            {"bf16", l.lost_updates.bf16_fraction()},
            {"fp16", l.lost_updates.fp16_fraction()}};
  }
  return {{"path", l.path},
          {"type", l.type},
          {"output_shape", l.output_shape},
          {"parameters", l.parameters},
          {"verdict", name(l.verdict)},
          {"reason", l.reason},
          {"activation", stats_json(l.activation)},
          {"output_grad", stats_json(l.output_grad)},
          {"output_grad_scaled", stats_json(l.output_grad_scaled)},
          {"weight_grad", stats_json(l.weight_grad)},
          {"weight_grad_scaled", stats_json(l.weight_grad_scaled)},
          {"weight_update", stats_json(l.weight_update)},
          {"lost_updates", lost},
          {"fp16_grad_underflow_at_reference_scale", l.fp16_grad_underflow_at_reference}};
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// A magnitude in 3 significant digits; "-" for nothing recorded.
std::string mag(double v, bool present = true) {
  if (!present) return "-";
  return fmt("%.3g", v);
}

// A fraction as a percentage: "0", "100%", "37.5%", "0.0123%".
std::string pct(double f, bool present = true) {
  if (!present) return "-";
  if (f == 0) return "0";
  return fmt("%.3g%%", 100 * f);
}

std::string bytes(double b) {
  if (b >= 1 << 20) return fmt("%.1f MiB", b / (1 << 20));
  if (b >= 1 << 10) return fmt("%.1f KiB", b / (1 << 10));
  return fmt("%.0f B", b);
}

std::string pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}
// Right-aligned in width, and always at least one space from the previous column.
std::string rpad(const std::string& s, std::size_t width) {
  return std::string(s.size() >= width ? 1 : width - s.size(), ' ') + s;
}

std::string display_path(const std::string& path) { return path.empty() ? "<root>" : path; }

double max_grad_amax(const LayerReport& l) { return std::max(l.output_grad.amax, l.weight_grad.amax); }

double max_grad_underflow(const LayerReport& l) {
  return std::max(l.output_grad.underflow_fraction(Format::fp16),
                  l.weight_grad.underflow_fraction(Format::fp16));
}

}  // namespace

std::string to_json(const InspectReport& r, int indent) {
  json formats = json::array();
  for (Format f : kInspectFormats) {
    const numerics::FormatInfo& info = numerics::format_info(f);
    formats.push_back({{"name", info.name}, {"max", info.max}, {"min_normal", info.min_normal},
                       {"min_subnormal", info.min_subnormal}});
  }
  json losses = json::array();
  for (double v : r.losses) losses.push_back(number_or_null(v));
  json layers = json::array();
  for (const LayerReport& l : r.layers) layers.push_back(layer_json(l));
  json fp8 = json::array();
  for (const nn::Fp8LayerReport& l : r.fp8) {
    for (const nn::Fp8RoleReport& role : l.roles) {
      fp8.push_back({{"layer", l.path}, {"role", role.role}, {"amax", number_or_null(role.amax)},
                     {"amax_history", number_or_null(role.history_amax)}, {"scale", role.scale},
                     {"saturated", role.observed ? json(role.saturated) : json(nullptr)},
                     {"flushed", role.observed ? json(role.flushed) : json(nullptr)}});
    }
  }
  json alignment = json::array();
  for (const AlignmentWarning& w : r.alignment) {
    alignment.push_back({{"layer", w.layer}, {"dimension", w.dimension}, {"size", w.size},
                         {"multiple", w.multiple}, {"message", w.message}});
  }
  json model_rows = json::array();
  for (const MemoryModelRow& m : r.memory) {
    model_rows.push_back({{"mode", m.mode},
                          {"persistent_bytes_per_parameter", m.persistent},
                          {"transient_bytes_per_parameter", m.transient},
                          {"total_bytes", (m.persistent + m.transient) * static_cast<double>(r.parameter_count)},
                          {"breakdown", m.breakdown}});
  }
  const double per_sample = r.batch_size > 0 ? static_cast<double>(r.measured.activation_peak) /
                                                   static_cast<double>(r.batch_size)
                                             : 0.0;
  json j{{"schema", "mixprec.inspect.v1"},
         {"model", r.model},
         {"data", r.data},
         {"precision", r.precision},
         {"steps", r.steps},
         {"batch_size", r.batch_size},
         {"seed", r.seed},
         {"threads", r.threads},
         {"optimizer", {{"name", "adam"}, {"lr", r.lr}}},
         {"losses", losses},
         {"loss_scaling", r.loss_scaling},
         {"loss_scales", r.loss_scales},
         {"skipped_steps", r.skipped_steps},
         {"reference_loss_scale",
          {{"log2", r.reference_scale_log2}, {"value", std::ldexp(1.0, r.reference_scale_log2)}}},
         {"thresholds",
          {{"overflow", r.thresholds.overflow},
           {"underflow", r.thresholds.underflow},
           {"lost_updates", r.thresholds.lost_updates}}},
         {"formats", formats},
         {"layers", layers},
         {"alignment", alignment},
         {"fp8", fp8},
         {"memory",
          {{"parameters", r.parameter_count},
           {"model", model_rows},
           {"measured",
            {{"mode", r.precision},
             {"persistent_bytes_per_parameter", r.measured.persistent_per_parameter},
             {"activation_peak_bytes", r.measured.activation_peak},
             {"activation_bytes_per_sample", per_sample},
             {"source", "memory tracker: peak of the activation category over one step's forward "
                        "and backward, above the level before the step"}}}}}};
  return j.dump(indent);
}

std::string to_text(const InspectReport& r) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "mixprec inspect: %s on %s, precision %s, %d steps of batch %lld, Adam lr %g, seed "
                "%llu, %d threads\n",
                r.model.c_str(), r.data.c_str(), r.precision.c_str(), r.steps,
                static_cast<long long>(r.batch_size), static_cast<double>(r.lr),
                static_cast<unsigned long long>(r.seed), r.threads);
  out += line;
  out += "loss per step:";
  for (double v : r.losses) out.append(" ").append(fmt("%.4g", v));
  out += "\n";
  if (r.loss_scaling) {
    out += "loss scaling: GradScaler, scale";
    for (double s : r.loss_scales) out.append(" ").append(fmt("%g", s));
    out += " (one per step); skipped " + std::to_string(r.skipped_steps) + " of " +
           std::to_string(r.steps) + " steps; gradients below are unscaled unless marked xS\n";
  } else {
    out += "loss scaling: none\n";
  }
  std::snprintf(line, sizeof line,
                "reference loss scale: 2^%d = %g (the largest power of two at which no unscaled "
                "gradient of any layer overflows fp16)\n\n",
                r.reference_scale_log2, std::ldexp(1.0, r.reference_scale_log2));
  out += line;

  std::size_t pw = 5, tw = 4;
  for (const LayerReport& l : r.layers) {
    pw = std::max(pw, display_path(l.path).size());
    tw = std::max(tw, l.type.size());
  }
  const std::string at = "@2^" + std::to_string(r.reference_scale_log2);
  out += pad("layer", pw) + "  " + pad("type", tw) + rpad("act amax", 10) + rpad("act>fp16", 10) +
         rpad("grad amax", 11) + rpad("grad<fp16", 11) + rpad(at, 9) + rpad("upd amax", 10) +
         rpad("lost bf16", 11) + rpad("lost fp16", 11) + "  verdict\n";
  for (const LayerReport& l : r.layers) {
    const bool has_grad = !l.output_grad.empty() || !l.weight_grad.empty();
    const bool has_lost = l.lost_updates.considered > 0;
    out += pad(display_path(l.path), pw) + "  " + pad(l.type, tw) +
           rpad(mag(l.activation.amax), 10) +
           rpad(pct(l.activation.overflow_fraction(Format::fp16)), 10) +
           rpad(mag(max_grad_amax(l), has_grad), 11) + rpad(pct(max_grad_underflow(l), has_grad), 11) +
           rpad(pct(l.fp16_grad_underflow_at_reference, has_grad), 9) +
           rpad(mag(l.weight_update.amax, !l.weight_update.empty()), 10) +
           rpad(pct(l.lost_updates.bf16_fraction(), has_lost), 11) +
           rpad(pct(l.lost_updates.fp16_fraction(), has_lost), 11) + "  " + name(l.verdict) + "\n";
  }
  out += "\nwhy:\n";
  for (const LayerReport& l : r.layers) {
    out += "  " + pad(display_path(l.path), pw) + "  " + name(l.verdict) + ": " + l.reason + "\n";
  }

  out += "\nper tensor: fraction of values a cast would overflow (ovf), flush to zero (unf) or make "
         "subnormal (sub)\n";
  out += pad("layer", pw) + "  " + pad("tensor", 13) + rpad("amax", 10) + rpad("min|x|>0", 10) +
         rpad("zeros", 8);
  for (Format f : kInspectFormats) {
    const std::string n = numerics::format_info(f).name;
    out += " |" + rpad(n + " ovf", 13) + rpad("unf", 9) + rpad("sub", 9);
  }
  out += "\n";
  for (const LayerReport& l : r.layers) {
    const std::pair<const char*, const TensorStats*> rows[] = {
        {"act", &l.activation},
        {"grad out", &l.output_grad},
        {"grad out xS", &l.output_grad_scaled},
        {"grad param", &l.weight_grad},
        {"grad param xS", &l.weight_grad_scaled},
        {"update", &l.weight_update}};
    bool first = true;
    for (const auto& [what, s] : rows) {
      if (s->empty()) continue;
      out += pad(first ? display_path(l.path) : "", pw) + "  " + pad(what, 13) + rpad(mag(s->amax), 10) +
             rpad(mag(s->amin_nonzero), 10) + rpad(pct(s->fraction(s->zeros)), 8);
      for (std::size_t i = 0; i < kInspectFormatCount; ++i) {
        out += " |" + rpad(pct(s->fraction(s->cast[i].overflow)), 13) +
               rpad(pct(s->fraction(s->cast[i].underflow)), 9) +
               rpad(pct(s->fraction(s->cast[i].subnormal)), 9);
      }
      out += "\n";
      first = false;
    }
  }

  if (!r.fp8.empty()) {
    out += "\nfp8 layers (amax, history max and scale after the last step; saturated: largest "
           "fraction of elements beyond the format's max before the clip, flushed: of nonzero "
           "elements cast to 0, over the steps):\n";
    std::size_t w = 5;
    for (const nn::Fp8LayerReport& l : r.fp8) w = std::max(w, display_path(l.path).size());
    out += "  " + pad("layer", w) + "  " + pad("role", 6) + rpad("amax", 11) + rpad("hist max", 11) +
           rpad("scale", 11) + rpad("saturated", 11) + rpad("flushed", 11) + "\n";
    for (const nn::Fp8LayerReport& l : r.fp8) {
      for (const nn::Fp8RoleReport& role : l.roles) {
        out += "  " + pad(display_path(l.path), w) + "  " + pad(role.role, 6) +
               rpad(fmt("%.4g", role.amax), 11) + rpad(fmt("%.4g", role.history_amax), 11) +
               rpad(fmt("%.4g", role.scale), 11) + rpad(pct(role.saturated, role.observed), 11) +
               rpad(pct(role.flushed, role.observed), 11) + "\n";
      }
    }
  }

  out += "\nalignment";
  if (r.alignment.empty()) {
    out += ": every Linear/Conv2d dimension and the batch are multiples of 8 (and of 16 for bf16)\n";
  } else {
    out += " (" + std::to_string(r.alignment.size()) + (r.alignment.size() == 1 ? " warning" : " warnings") + "):\n";
    for (const AlignmentWarning& w : r.alignment) out += "  " + w.message + "\n";
  }

  const double n = static_cast<double>(r.parameter_count);
  std::snprintf(line, sizeof line, "\nmemory per parameter with Adam (%lld parameters):\n",
                static_cast<long long>(r.parameter_count));
  out += line;
  std::size_t mw = 4;
  for (const MemoryModelRow& m : r.memory) mw = std::max(mw, m.mode.size());
  out += "  " + pad("mode", mw) + rpad("B/param", 10) + rpad("total", 12) + "  what\n";
  for (const MemoryModelRow& m : r.memory) {
    const std::string b = m.transient > 0 ? fmt("%g", m.persistent) + "+" + fmt("%g", m.transient)
                                          : fmt("%g", m.persistent);
    out += "  " + pad(m.mode, mw) + rpad(b, 10) + rpad(bytes((m.persistent + m.transient) * n), 12) +
           "  " + m.breakdown + "\n";
  }
  const double per_sample = r.batch_size > 0 ? static_cast<double>(r.measured.activation_peak) /
                                                   static_cast<double>(r.batch_size)
                                             : 0.0;
  std::snprintf(line, sizeof line,
                "measured (%s, memory tracker): %.2f B/param held in parameters + gradients + "
                "optimizer state; activations peak at %s over a step = %s per sample (the rise of "
                "the activation category over forward and backward; includes autocast's 16-bit "
                "weight copies)\n",
                r.precision.c_str(), r.measured.persistent_per_parameter,
                bytes(static_cast<double>(r.measured.activation_peak)).c_str(), bytes(per_sample).c_str());
  out += line;
  out += "\nverdict rule and columns: docs/diagnostics.md\n";
  return out;
}

}  // namespace mixprec::train
