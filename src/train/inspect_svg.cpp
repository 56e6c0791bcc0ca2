// `mixprec inspect --svg`: one row per layer, the magnitude range of its activations, gradients
// and updates on a log axis against the walls of fp16, bf16 and fp8, and its verdict. Plain SVG,
// deterministic (byte-identical for the same report).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/train/inspect.h"
#include "mixprec/io/atomic_file.h"

namespace mixprec::train {

using numerics::kMinBinade;
using numerics::kBinadeCount;
using numerics::TensorStats;
namespace {

using numerics::Format;

constexpr double kWidth = 1100, kLeft = 250, kRight = 900, kTop = 130, kRow = 46, kBar = 8;

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

struct Stream {
  const char* label;
  const char* colour;
};
// The order of the bars within a row.
constexpr Stream kStreams[] = {{"activation", "#1f77b4"},
                               {"output gradient (unscaled)", "#ff7f0e"},
                               {"parameter gradient (unscaled)", "#2ca02c"},
                               {"weight update", "#9467bd"}};

const TensorStats& stream_of(const LayerReport& l, int i) {
  switch (i) {
    case 0: return l.activation;
    case 1: return l.output_grad;
    case 2: return l.weight_grad;
    default: return l.weight_update;
  }
}

const char* verdict_colour(Verdict v) {
  switch (v) {
    case Verdict::safe_fp16: return "#2ca02c";
    case Verdict::needs_loss_scaling: return "#e08a00";
    case Verdict::bf16_fine: return "#1f77b4";
    case Verdict::keep_fp32: return "#d62728";
  }
  return "#555555";
}

// The magnitude below which a fraction p of the nonzero finite values lie, at binade resolution:
// the lower edge of the binade holding that quantile (upper edge when upper is true), clipped to
// the recorded range.
double binade_quantile(const TensorStats& s, double p, bool upper) {
  std::int64_t total = 0;
  for (std::int64_t c : s.binades) total += c;
  if (total == 0) return s.amax;
  const double target = p * static_cast<double>(total);
  std::int64_t seen = 0;
  for (std::size_t i = 0; i < kBinadeCount; ++i) {
    seen += s.binades[i];
    if (static_cast<double>(seen) >= target && s.binades[i] > 0) {
      const int b = static_cast<int>(i) + kMinBinade;
      return std::clamp(std::ldexp(1.0, upper ? b + 1 : b), s.amin_nonzero, s.amax);
    }
  }
  return s.amax;
}

struct Wall {
  double x;
  std::string label;
  const char* colour;
  const char* dash;  // "" solid
};

}  // namespace

std::string render_inspect_svg(const InspectReport& r) {
  // The axis: whole decades around the data and fp16's walls (fp8's lie inside those).
  const numerics::FormatInfo& fp16 = numerics::format_info(Format::fp16);
  double lo = fp16.min_subnormal, hi = fp16.max;
  for (const LayerReport& l : r.layers) {
    for (int i = 0; i < 4; ++i) {
      const TensorStats& s = stream_of(l, i);
      if (s.amax > 0) {
        hi = std::max(hi, s.amax);
        lo = std::min(lo, s.amin_nonzero);
      }
    }
  }
  const int dlo = static_cast<int>(std::floor(std::log10(lo)));
  const int dhi = std::max(dlo + 1, static_cast<int>(std::ceil(std::log10(hi))));
  auto xpos = [&](double v) {
    return kLeft + (std::log10(v) - dlo) / (dhi - dlo) * (kRight - kLeft);
  };
  const double bottom = kTop + kRow * static_cast<double>(std::max<std::size_t>(r.layers.size(), 1));
  const double height = bottom + 60;

  std::string svg;
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" +
         num(height) + "\" viewBox=\"0 0 " + num(kWidth) + " " + num(height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  char title[256];
  std::snprintf(title, sizeof title, "mixprec inspect: %s, %s, %d steps of batch %lld", r.model.c_str(),
                r.precision.c_str(), r.steps, static_cast<long long>(r.batch_size));
  svg += "<text x=\"20\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" + escape(title) + "</text>\n";
  svg += "<text x=\"20\" y=\"44\" fill=\"#555555\">Per layer, over all steps: |x| from the smallest "
         "nonzero value to the largest (dot); thick: the middle 98% of nonzero values (to a binade); "
         "vertical lines: format limits</text>\n";
  // Legend.
  double lx = 20;
  for (const Stream& s : kStreams) {
    svg += "<rect x=\"" + num(lx) + "\" y=\"56\" width=\"14\" height=\"8\" fill=\"" + s.colour + "\"/>";
    svg += "<text x=\"" + num(lx + 18) + "\" y=\"64\">" + escape(s.label) + "</text>\n";
    lx += 40 + 7.0 * static_cast<double>(std::string(s.label).size());
  }

  // Walls, labelled above the plot on staggered lines so neighbours do not collide.
  const numerics::FormatInfo& bf16 = numerics::format_info(Format::bf16);
  const numerics::FormatInfo& e4m3 = numerics::format_info(Format::fp8_e4m3);
  const numerics::FormatInfo& e5m2 = numerics::format_info(Format::fp8_e5m2);
  std::vector<Wall> walls = {
      {fp16.max, "fp16 max " + sci(fp16.max), "#d62728", ""},
      {fp16.min_normal, "fp16 min normal " + sci(fp16.min_normal), "#d62728", "6,3"},
      {fp16.min_subnormal, "fp16 min subnormal " + sci(fp16.min_subnormal), "#d62728", "2,3"},
      {bf16.max, "bf16 max " + sci(bf16.max), "#1f77b4", ""},
      {bf16.min_normal, "bf16 min normal " + sci(bf16.min_normal), "#1f77b4", "6,3"},
      {e4m3.max, "e4m3 max " + sci(e4m3.max), "#8c564b", ""},
      {e4m3.min_normal, "e4m3 min normal " + sci(e4m3.min_normal), "#8c564b", "6,3"},
      {e5m2.max, "e5m2 max " + sci(e5m2.max), "#7f7f7f", ""},
      {e5m2.min_normal, "e5m2 min normal " + sci(e5m2.min_normal), "#7f7f7f", "6,3"},
  };
  std::stable_sort(walls.begin(), walls.end(), [](const Wall& a, const Wall& b) { return a.x < b.x; });
  // fp16 and e5m2 share min normal: one line, both names.
  for (std::size_t i = 1; i < walls.size();) {
    if (walls[i].x == walls[i - 1].x) {
      walls[i - 1].label += " = " + walls[i].label.substr(0, walls[i].label.find(' ')) + "'s";
      walls.erase(walls.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  std::string off_axis;
  int stagger = 0;
  for (const Wall& w : walls) {
    if (w.x < std::pow(10.0, dlo) || w.x > std::pow(10.0, dhi)) {
      off_axis += (off_axis.empty() ? "" : "; ") + w.label;
      continue;
    }
    const double x = xpos(w.x);
    svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(kTop - 8) + "\" x2=\"" + num(x) + "\" y2=\"" +
           num(bottom) + "\" stroke=\"" + w.colour + "\" stroke-width=\"1.2\"" +
           (w.dash[0] != '\0' ? std::string(" stroke-dasharray=\"") + w.dash + "\"" : "") + "/>\n";
    const double ty = 82 + 10.0 * (stagger++ % 4);
    svg += "<text x=\"" + num(x) + "\" y=\"" + num(ty) + "\" font-size=\"9\" fill=\"" + w.colour +
           "\" text-anchor=\"middle\">" + escape(w.label) + "</text>\n";
  }
  if (!off_axis.empty()) {
    svg += "<text x=\"20\" y=\"" + num(height - 12) + "\" font-size=\"10\" fill=\"#555555\">off the axis: " +
           escape(off_axis) + "</text>\n";
  }

  // Decade ticks and the axis.
  const int step = std::max(1, (dhi - dlo + 15) / 16);
  for (int d = dlo; d <= dhi; ++d) {
    const double x = xpos(std::pow(10.0, d));
    svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(kTop - 4) + "\" x2=\"" + num(x) + "\" y2=\"" +
           num(bottom) + "\" stroke=\"#eeeeee\"/>\n";
    if ((d - dlo) % step == 0) {
      svg += "<text x=\"" + num(x) + "\" y=\"" + num(bottom + 16) +
             "\" font-size=\"10\" text-anchor=\"middle\">1e" + std::to_string(d) + "</text>\n";
    }
  }
  svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(bottom) + "\" x2=\"" + num(kRight) + "\" y2=\"" +
         num(bottom) + "\" stroke=\"#333333\"/>\n";
  svg += "<text x=\"" + num((kLeft + kRight) / 2) + "\" y=\"" + num(bottom + 34) +
         "\" text-anchor=\"middle\">|x| (log scale)</text>\n";

  // One row per layer.
  for (std::size_t li = 0; li < r.layers.size(); ++li) {
    const LayerReport& l = r.layers[li];
    const double y0 = kTop + kRow * static_cast<double>(li);
    if (li % 2 == 1) {
      svg += "<rect x=\"10\" y=\"" + num(y0) + "\" width=\"" + num(kWidth - 20) + "\" height=\"" +
             num(kRow) + "\" fill=\"#000000\" fill-opacity=\"0.03\"/>\n";
    }
    svg += "<text x=\"20\" y=\"" + num(y0 + 20) + "\" font-weight=\"bold\">" +
           escape(l.path.empty() ? "<root>" : l.path) + "</text>\n";
    svg += "<text x=\"20\" y=\"" + num(y0 + 34) + "\" fill=\"#555555\">" + escape(l.type) + "</text>\n";
    for (int i = 0; i < 4; ++i) {
      const TensorStats& s = stream_of(l, i);
      if (!(s.amax > 0)) continue;
      const double y = y0 + 6 + kBar * i + kBar / 2;
      const double x1 = xpos(s.amin_nonzero), x2 = xpos(s.amax);
      const double q1 = xpos(binade_quantile(s, 0.01, false)), q2 = xpos(binade_quantile(s, 0.99, true));
      svg += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y) + "\" x2=\"" + num(std::max(x2, x1 + 1)) +
             "\" y2=\"" + num(y) + "\" stroke=\"" + kStreams[i].colour + "\" stroke-width=\"1.5\"/>\n";
      svg += "<line x1=\"" + num(q1) + "\" y1=\"" + num(y) + "\" x2=\"" + num(std::max(q2, q1 + 1)) +
             "\" y2=\"" + num(y) + "\" stroke=\"" + kStreams[i].colour +
             "\" stroke-width=\"6\" stroke-opacity=\"0.6\"><title>" + escape(l.path) + " " +
             kStreams[i].label + ": " + sci(s.amin_nonzero) + " .. " + sci(s.amax) + "</title></line>\n";
      svg += "<circle cx=\"" + num(x2) + "\" cy=\"" + num(y) + "\" r=\"3.5\" fill=\"" +
             kStreams[i].colour + "\"/>\n";
    }
    svg += "<text x=\"" + num(kRight + 14) + "\" y=\"" + num(y0 + 26) + "\" font-weight=\"bold\" fill=\"" +
           verdict_colour(l.verdict) + "\">" + escape(name(l.verdict)) + "<title>" + escape(l.reason) +
           "</title></text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

void write_inspect_svg(const InspectReport& report, const std::string& path) {
  const std::string svg = render_inspect_svg(report);
  try {
    io::write_file_atomically(path, svg);
  } catch (const Error& e) {
    MIXPREC_CHECK(false, ValueError, "inspect",
                  "--svg: cannot write '" << path << "' (" << e.what()
                                          << "); give a path in an existing, writable directory");
  }
}

}  // namespace mixprec::train
