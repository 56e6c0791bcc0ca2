#pragma once
/// A tiny SVG line-plot writer with log-log axes, for the numeric-format exploration commands:
/// several series in distinct colours, a legend, decade ticks with labels, and labelled vertical
/// marker lines (e.g. a format's overflow and underflow walls).
#include <string>
#include <vector>

namespace mixprec::numerics {

/// One line of the plot. Points with a non-finite or non-positive x or y cannot be placed on log
/// axes and are skipped; the remaining points form one polyline (in the given order).
struct PlotSeries {
  std::string name;       ///< legend text
  std::vector<double> x;  ///< same length as y
  std::vector<double> y;
  int colour = -1;      ///< index into the palette; -1: the series' own index
  bool dashed = false;  ///< e.g. for bounds drawn next to measurements
};

/// A vertical line at x with a label, drawn only if x lies inside the plotted x range.
struct PlotMarker {
  double x = 1;
  std::string label;
  int colour = -1;  ///< index into the palette; -1: grey
};

/// Everything a plot shows.
struct PlotSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<PlotSeries> series;
  std::vector<PlotMarker> markers;
  int width = 900;   ///< pixels
  int height = 560;  ///< pixels
};

/// The plot as an SVG document (starts with "<svg", one <polyline> per series, in order).
/// Axes span whole decades around the positive finite data; ValueError if a series' x and y
/// differ in length or the size is below 200x150.
std::string render_svg_plot(const PlotSpec& spec);

/// Writes render_svg_plot(spec) to path atomically (io::write_file_atomically); ValueError naming
/// the path if it cannot be written.
void write_svg_plot(const std::string& path, const PlotSpec& spec);

}  // namespace mixprec::numerics
