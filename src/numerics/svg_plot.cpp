// A minimal log-log SVG line plot: no dependencies, deterministic output (byte-identical for the
// same spec), so plots can be diffed and tested.
#include "mixprec/numerics/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"

namespace mixprec::numerics {
namespace {

// Tableau 10: distinct, colour-blind-friendly hues.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

const char* colour_of(int index) { return index < 0 ? "#555555" : kPalette[index % kPaletteSize]; }

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

bool plottable(double v) { return std::isfinite(v) && v > 0; }

// Whole decades [lo, hi] (as exponents) covering the positive finite values; at least one decade.
struct DecadeRange {
  int lo = 0;
  int hi = 1;
};

DecadeRange decade_range(const std::vector<double>& values) {
  double mn = std::numeric_limits<double>::infinity();
  double mx = -mn;
  for (double v : values) {
    if (!plottable(v)) continue;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  if (!(mn <= mx)) return {};
  DecadeRange r{static_cast<int>(std::floor(std::log10(mn))),
                static_cast<int>(std::ceil(std::log10(mx)))};
  if (r.hi <= r.lo) r.hi = r.lo + 1;
  return r;
}

std::string decade_label(int e) {
  if (e == 0) return "1";
  if (e == 1) return "10";
  return "1e" + std::to_string(e);
}

}  // namespace

std::string render_svg_plot(const PlotSpec& spec) {
  MIXPREC_CHECK(
      spec.width >= 200 && spec.height >= 150, ValueError, "render_svg_plot",
      "the plot must be at least 200x150 pixels, got " << spec.width << "x" << spec.height);
  std::vector<double> xs, ys;
  for (const PlotSeries& s : spec.series) {
    MIXPREC_CHECK(s.x.size() == s.y.size(), ValueError, "render_svg_plot",
                  "series '" << s.name << "' has " << s.x.size() << " x values but " << s.y.size()
                             << " y values; give one y per x");
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (plottable(s.x[i]) && plottable(s.y[i])) {
        xs.push_back(s.x[i]);
        ys.push_back(s.y[i]);
      }
    }
  }
  const DecadeRange xr = decade_range(xs);
  const DecadeRange yr = decade_range(ys);
  // The legend sits right of the plot area; the left margin holds the y tick labels.
  const double left = 78, right = spec.width - 190.0, top = 40, bottom = spec.height - 56.0;
  const auto px = [&](double x) {
    return left + (std::log10(x) - xr.lo) / (xr.hi - xr.lo) * (right - left);
  };
  const auto py = [&](double y) {
    return bottom - (std::log10(y) - yr.lo) / (yr.hi - yr.lo) * (bottom - top);
  };

  std::string svg = fmt(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f "
      "%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
      spec.width, spec.height, spec.width, spec.height);
  svg += fmt("<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", spec.width,
             spec.height);
  svg += fmt("<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">",
             (left + right) / 2) +
         escape(spec.title) + "</text>\n";

  // Grid and ticks at decades; thinned so that at most about a dozen labels show per axis.
  const int xstep = std::max(1, (xr.hi - xr.lo + 11) / 12);
  const int ystep = std::max(1, (yr.hi - yr.lo + 9) / 10);
  svg += "<g stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
  for (int e = xr.lo; e <= xr.hi; e += xstep) {
    const double x = px(std::pow(10.0, e));
    svg += fmt("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, top, x, bottom);
  }
  for (int e = yr.lo; e <= yr.hi; e += ystep) {
    const double y = py(std::pow(10.0, e));
    svg += fmt("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", left, y, right, y);
  }
  svg += "</g>\n";
  svg +=
      fmt("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
          "stroke=\"black\"/>\n",
          left, top, right - left, bottom - top);
  for (int e = xr.lo; e <= xr.hi; e += xstep) {
    const double x = px(std::pow(10.0, e));
    svg += fmt("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"black\"/>\n", x,
               bottom, x, bottom + 5);
    svg += fmt("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">", x, bottom + 18) +
           decade_label(e) + "</text>\n";
  }
  for (int e = yr.lo; e <= yr.hi; e += ystep) {
    const double y = py(std::pow(10.0, e));
    svg += fmt("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"black\"/>\n",
               left - 5, y, left, y);
    svg += fmt("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\">", left - 8, y + 4) +
           decade_label(e) + "</text>\n";
  }
  svg +=
      fmt("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">", (left + right) / 2, bottom + 40) +
      escape(spec.x_label) + "</text>\n";
  svg += fmt("<text x=\"16\" y=\"%.2f\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.2f)\">",
             (top + bottom) / 2, (top + bottom) / 2) +
         escape(spec.y_label) + "</text>\n";

  // Markers, sorted by x; labels in four staggered rows so that near-coincident walls stay legible.
  std::vector<const PlotMarker*> markers;
  for (const PlotMarker& m : spec.markers) {
    if (plottable(m.x) && std::log10(m.x) >= xr.lo && std::log10(m.x) <= xr.hi) {
      markers.push_back(&m);
    }
  }
  std::stable_sort(markers.begin(), markers.end(),
                   [](const PlotMarker* a, const PlotMarker* b) { return a->x < b->x; });
  for (std::size_t i = 0; i < markers.size(); ++i) {
    const PlotMarker& m = *markers[i];
    const double x = px(m.x);
    const char* colour = colour_of(m.colour);
    svg += fmt("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" ", x, top, x, bottom) +
           "stroke=\"" + colour + "\" stroke-dasharray=\"2,3\"/>\n";
    svg += fmt("<text x=\"%.2f\" y=\"%.2f\" font-size=\"10\" ", x + 3,
               top + 12 + static_cast<double>(i % 4) * 12) +
           "fill=\"" + colour + "\">" + escape(m.label) + "</text>\n";
  }

  // Series and legend.
  for (std::size_t k = 0; k < spec.series.size(); ++k) {
    const PlotSeries& s = spec.series[k];
    const char* colour = colour_of(s.colour < 0 ? static_cast<int>(k) : s.colour);
    std::string points;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!plottable(s.x[i]) || !plottable(s.y[i])) continue;
      if (!points.empty()) points += ' ';
      points += fmt("%.2f,%.2f", px(s.x[i]), py(s.y[i]));
    }
    const std::string dash = s.dashed ? " stroke-dasharray=\"6,4\"" : "";
    svg += "<polyline fill=\"none\" stroke=\"" + std::string(colour) + "\" stroke-width=\"2\"" +
           dash + " points=\"" + points + "\"/>\n";
    const double ly = top + 10 + static_cast<double>(k) * 18;
    svg += fmt("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" ", right + 12, ly, right + 36,
               ly) +
           "stroke=\"" + colour + "\" stroke-width=\"2\"" + dash + "/>\n";
    svg += fmt("<text x=\"%.2f\" y=\"%.2f\">", right + 42, ly + 4) + escape(s.name) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

void write_svg_plot(const std::string& path, const PlotSpec& spec) {
  io::write_file_atomically(path, render_svg_plot(spec));
}

}  // namespace mixprec::numerics
