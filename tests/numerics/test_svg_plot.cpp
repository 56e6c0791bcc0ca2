// The SVG plot writer: well-formed output, one polyline per series, markers only inside the
// axes, escaping, and atomic writing with a clear error for unwritable paths.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/numerics/svg_plot.h"

namespace mixprec::numerics {
namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t pos = text.find(what); pos != std::string::npos;
       pos = text.find(what, pos + 1)) {
    ++n;
  }
  return n;
}

PlotSpec sample_spec() {
  PlotSpec spec;
  spec.title = "max relative error";
  spec.x_label = "|x|";
  spec.y_label = "error";
  spec.series.push_back({"fp16", {1e-3, 1e-2, 1e0, 1e5}, {1e-1, 5e-4, 4.9e-4, 4.9e-4}});
  spec.series.push_back({"a<b&c", {1e-3, 1e2}, {1e-2, 1e-2}, -1, true});
  // Non-positive and infinite points are skipped, not drawn at the axis edge.
  spec.series.push_back({"with gaps", {1e-3, 1e-2, 1e-1}, {0.0, INFINITY, 3e-3}});
  spec.markers.push_back({65504, "fp16 max", 0});
  spec.markers.push_back({1e-30, "outside", -1});
  return spec;
}

TEST(NumericsSvgPlot, IsWellFormedWithOnePolylinePerSeries) {
  const std::string svg = render_svg_plot(sample_spec());
  ASSERT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(count(svg, "<polyline"), 3);
  EXPECT_EQ(count(svg, "<svg"), count(svg, "</svg>"));
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  EXPECT_EQ(count(svg, "<g"), count(svg, "</g>"));
  EXPECT_EQ(count(svg, "<"), count(svg, ">"));
  EXPECT_NE(svg.find("a&lt;b&amp;c"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
  EXPECT_NE(svg.find("fp16 max"), std::string::npos);  // 65504 lies inside the 1e-3..1e5 axis
  EXPECT_EQ(svg.find("outside"), std::string::npos);
  EXPECT_NE(svg.find(">1e-3<"), std::string::npos);  // decade tick labels
  EXPECT_NE(svg.find(">1e5<"), std::string::npos);
  EXPECT_EQ(count(svg, "stroke-dasharray=\"6,4\""), 2);  // dashed series and its legend entry
  // The gappy series keeps only its one plottable point.
  const std::size_t last = svg.rfind("<polyline");
  const std::string points = svg.substr(last, svg.find("/>", last) - last);
  EXPECT_EQ(count(points, ","), 1);
  EXPECT_EQ(render_svg_plot(sample_spec()), svg);  // deterministic
}

TEST(NumericsSvgPlot, RejectsBadSpecs) {
  PlotSpec spec = sample_spec();
  spec.series[0].y.pop_back();
  EXPECT_THROW(render_svg_plot(spec), ValueError);
  PlotSpec tiny;
  tiny.width = 10;
  EXPECT_THROW(render_svg_plot(tiny), ValueError);
  EXPECT_EQ(render_svg_plot(PlotSpec{}).rfind("<svg", 0), 0u);  // an empty plot still renders
}

TEST(NumericsSvgPlot, WritesAtomicallyAndFailsClearly) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mixprec_svg_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "plot.svg").string();
  write_svg_plot(path, sample_spec());
  EXPECT_EQ(io::read_file(path), render_svg_plot(sample_spec()));
  try {
    write_svg_plot((dir / "missing" / "plot.svg").string(), sample_spec());
    ADD_FAILURE() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("missing/plot.svg"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mixprec::numerics
