// `mixprec formats`: the floating-point formats of mixed-precision training side by side, their
// representation error across magnitudes, and (--accumulation) what low-precision accumulators
// do to a dot product; optionally as SVG plots.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "mixprec/core/error.h"
#include "mixprec/numerics/formats.h"
#include "mixprec/numerics/svg_plot.h"

namespace mixprec::tools {
namespace {

using numerics::AccumulationResult;
using numerics::DecadeError;
using numerics::Format;
using numerics::FormatInfo;

constexpr const char* kRangeError = "--range must be LO:HI with LO < HI, both within -300..300";

struct Range {
  int lo = -12;
  int hi = 12;
};

Range parse_range(const std::string& text) {
  Range r;
  const std::size_t colon = text.find(':');
  bool ok = colon != std::string::npos;
  if (ok) {
    try {
      std::size_t used_lo = 0, used_hi = 0;
      const std::string lo = text.substr(0, colon), hi = text.substr(colon + 1);
      r.lo = std::stoi(lo, &used_lo);
      r.hi = std::stoi(hi, &used_hi);
      ok = used_lo == lo.size() && used_hi == hi.size();
    } catch (const std::exception&) {
      ok = false;
    }
  }
  ok = ok && r.lo < r.hi && r.lo >= -300 && r.hi <= 300;
  MIXPREC_CHECK(ok, ValueError, "formats",
                kRangeError << " (decimal exponents), got '" << text << "'; e.g. --range=-12:12");
  return r;
}

std::string num(double v) {
  if (std::isinf(v)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.5g", v);
  return buf;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

// One sweep cell: what dominates the decade, else its largest relative error.
std::string sweep_cell(const DecadeError& d) {
  if (d.overflow_fraction == 1) return "overflow";
  if (d.zero_fraction == 1) return "zero";
  if (d.overflow_fraction > 0)
    return "ovf " + std::to_string(std::lround(100 * d.overflow_fraction)) + "%";
  if (d.zero_fraction > 0)
    return "zero " + std::to_string(std::lround(100 * d.zero_fraction)) + "%";
  if (d.subnormal_fraction > 0) return "sub " + sci(d.max_rel_error);
  return sci(d.max_rel_error);
}

void write_plot(const std::string& path, const numerics::PlotSpec& spec) {
  try {
    numerics::write_svg_plot(path, spec);
  } catch (const Error& e) {
    MIXPREC_CHECK(false, ValueError, "formats",
                  "--svg: cannot write the plot to '" << path << "' (" << e.what()
                                                      << "); give a path in an existing, writable "
                                                         "directory");
  }
}

void print_format_table() {
  std::printf("%-9s %4s %4s %5s %5s %11s %11s %13s %10s %6s  %s\n", "format", "bits", "exp", "mant",
              "bias", "max", "min normal", "min subnormal", "epsilon", "digits", "overflow");
  for (const FormatInfo& f : numerics::all_formats()) {
    std::printf("%-9s %4d %4d %5d %5d %11s %11s %13s %10s %6.2f  %s\n", f.name, f.bits,
                f.exponent_bits, f.mantissa_bits, f.bias, num(f.max).c_str(),
                num(f.min_normal).c_str(), num(f.min_subnormal).c_str(), num(f.epsilon).c_str(),
                f.decimal_digits, f.has_inf ? "Inf" : "NaN (no Inf)");
  }
}

nlohmann::json finite_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

nlohmann::json format_json(const FormatInfo& f) {
  return {{"name", f.name},
          {"bits", f.bits},
          {"exponent_bits", f.exponent_bits},
          {"mantissa_bits", f.mantissa_bits},
          {"bias", f.bias},
          {"has_inf", f.has_inf},
          {"max", f.max},
          {"min_normal", f.min_normal},
          {"min_subnormal", f.min_subnormal},
          {"epsilon", f.epsilon},
          {"unit_roundoff", numerics::unit_roundoff(f)},
          {"decimal_digits", f.decimal_digits}};
}

numerics::PlotSpec sweep_plot(const std::vector<std::vector<DecadeError>>& sweeps) {
  const auto& formats = numerics::all_formats();
  numerics::PlotSpec spec;
  spec.title = "Representation error: max relative error of rounding, per decade";
  spec.x_label = "magnitude |x| (decade midpoints); dotted lines: max and min subnormal";
  spec.y_label = "max relative error";
  for (std::size_t k = 0; k < formats.size(); ++k) {
    numerics::PlotSeries series{formats[k].name, {}, {}, static_cast<int>(k), false};
    for (const DecadeError& d : sweeps[k]) {
      series.x.push_back(std::pow(10.0, d.exponent + 0.5));
      series.y.push_back(d.max_rel_error);
    }
    spec.series.push_back(series);
    spec.markers.push_back({formats[k].max,
                            std::string(formats[k].name) + " max " + num(formats[k].max),
                            static_cast<int>(k)});
    spec.markers.push_back(
        {formats[k].min_subnormal,
         std::string(formats[k].name) + " min sub " + num(formats[k].min_subnormal),
         static_cast<int>(k)});
  }
  return spec;
}

numerics::PlotSpec accumulation_plot(const FormatInfo& input, const Format (&accs)[3],
                                     const std::vector<std::vector<AccumulationResult>>& results) {
  numerics::PlotSpec spec;
  spec.title =
      std::string("Dot-product error vs n (") + input.name + " inputs): measured and gamma_n";
  spec.x_label = "n (number of products)";
  spec.y_label = "relative error";
  for (int a = 0; a < 3; ++a) {
    const std::string name = numerics::format_info(accs[a]).name;
    numerics::PlotSeries measured{name + " accumulator", {}, {}, a, false};
    numerics::PlotSeries bound{name + " gamma_n bound", {}, {}, a, true};
    for (const AccumulationResult& r : results[a]) {
      measured.x.push_back(r.n);
      measured.y.push_back(r.rel_error);
      bound.x.push_back(r.n);
      bound.y.push_back(r.gamma_defined ? r.gamma_n : 0.0);  // 0: not drawn on log axes
    }
    spec.series.push_back(measured);
    spec.series.push_back(bound);
    spec.markers.push_back(
        {1 / numerics::unit_roundoff(numerics::format_info(accs[a])), name + ": n u = 1", a});
  }
  return spec;
}

void run_sweep(const Range& range, bool json, const std::string& svg) {
  constexpr int kSamples = 1000;
  std::vector<std::vector<DecadeError>> sweeps;
  for (const FormatInfo& f : numerics::all_formats()) {
    sweeps.push_back(numerics::representation_error_sweep(f, range.lo, range.hi, kSamples));
  }
  const auto& formats = numerics::all_formats();
  // The plot is written first so that an unwritable --svg path fails before any output.
  if (!svg.empty()) write_plot(svg, sweep_plot(sweeps));
  if (json) {
    nlohmann::json out;
    out["formats"] = nlohmann::json::array();
    for (std::size_t k = 0; k < formats.size(); ++k) {
      nlohmann::json row = format_json(formats[k]);
      nlohmann::json decades = nlohmann::json::array();
      for (const DecadeError& d : sweeps[k]) {
        // JSON has no Inf: a fully overflowing decade has max_rel_error null.
        decades.push_back({{"decade", d.exponent},
                           {"max_rel_error", finite_or_null(d.max_rel_error)},
                           {"mean_rel_error", finite_or_null(d.mean_rel_error)},
                           {"overflow_fraction", d.overflow_fraction},
                           {"subnormal_fraction", d.subnormal_fraction},
                           {"zero_fraction", d.zero_fraction}});
      }
      row["sweep"] = decades;
      out["formats"].push_back(row);
    }
    out["samples_per_decade"] = kSamples;
    out["range"] = {range.lo, range.hi};
    std::puts(out.dump(2).c_str());
  } else {
    print_format_table();
    std::printf(
        "\nMax relative error of round-to-nearest-even per decade [10^e, 10^(e+1)), %d "
        "log-uniform samples each\n",
        kSamples);
    std::printf("%-7s", "decade");
    for (const FormatInfo& f : formats) std::printf(" %12s", f.name);
    std::printf("\n");
    for (std::size_t i = 0; i < sweeps[0].size(); ++i) {
      std::printf("%-7s", ("1e" + std::to_string(sweeps[0][i].exponent)).c_str());
      for (const auto& s : sweeps) std::printf(" %12s", sweep_cell(s[i]).c_str());
      std::printf("\n");
    }
    std::puts(
        "overflow: every sample became Inf/NaN; ovf N%: N% did. zero: every sample flushed to "
        "0 (error 1); zero N%: N% did.\nsub: some samples are subnormal (fewer significant "
        "bits, so the error grows as magnitudes shrink).");
  }
  if (!json && !svg.empty()) std::printf("wrote %s\n", svg.c_str());
}

void run_accumulation(const FormatInfo& input, std::uint64_t seed, bool json,
                      const std::string& svg) {
  const std::vector<int> sizes = numerics::geometric_sizes(10, 1000000, 2);
  const Format accs[] = {Format::fp16, Format::bf16, Format::fp32};
  std::vector<std::vector<AccumulationResult>> results(3);
  for (int a = 0; a < 3; ++a) {
    for (int n : sizes) {
      results[a].push_back(
          numerics::accumulation_experiment(n, input, numerics::format_info(accs[a]), seed));
    }
  }
  if (!svg.empty()) write_plot(svg, accumulation_plot(input, accs, results));
  if (json) {
    nlohmann::json out;
    out["input"] = input.name;
    out["seed"] = seed;
    out["rows"] = nlohmann::json::array();
    for (int a = 0; a < 3; ++a) {
      for (const AccumulationResult& r : results[a]) {
        out["rows"].push_back(
            {{"n", r.n},
             {"accumulator", numerics::format_info(r.accumulator).name},
             {"exact", r.exact},
             {"computed", finite_or_null(r.computed)},
             {"rel_error", finite_or_null(r.rel_error)},
             {"gamma_n", r.gamma_defined ? nlohmann::json(r.gamma_n) : nlohmann::json()}});
      }
    }
    std::puts(out.dump(2).c_str());
  } else {
    std::printf(
        "Dot product of n pairs uniform in [0,1), inputs rounded to %s, accumulator "
        "rounded after every add (seed %llu)\n",
        input.name, static_cast<unsigned long long>(seed));
    std::printf("%8s", "n");
    for (Format f : accs) {
      const std::string name = numerics::format_info(f).name;
      std::printf("  %12s %10s", (name + " rel err").c_str(), (name + " gamma").c_str());
    }
    std::printf("\n");
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      std::printf("%8d", sizes[i]);
      for (int a = 0; a < 3; ++a) {
        const AccumulationResult& r = results[a][i];
        std::printf("  %12s %10s", sci(r.rel_error).c_str(),
                    r.gamma_defined ? sci(r.gamma_n).c_str() : "undefined");
      }
      std::printf("\n");
    }
    std::printf(
        "gamma_n = n u / (1 - n u), u the accumulator's unit roundoff, bounds the relative "
        "error of a sum of\nnon-negative products; it is undefined once n u >= 1:");
    for (Format f : accs) {
      const FormatInfo& info = numerics::format_info(f);
      std::printf(" n >= %.0f for %s%s", 1 / numerics::unit_roundoff(info), info.name,
                  f == Format::fp32 ? ".\n" : ",");
    }
    std::puts(
        "A low-precision sum stagnates once its spacing exceeds twice the terms it adds: "
        "accumulate in fp32.");
  }
  if (!json && !svg.empty()) std::printf("wrote %s\n", svg.c_str());
}

}  // namespace

void add_formats_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "formats",
      "Compare floating-point formats (fp32, tf32, fp16, bf16, fp8 e4m3/e5m2): range, precision, "
      "representation error per decade, and (--accumulation) low-precision accumulation error");
  auto json = std::make_shared<bool>(false);
  auto svg = std::make_shared<std::string>();
  auto range = std::make_shared<std::string>("-12:12");
  auto accumulation = std::make_shared<bool>(false);
  auto input = std::make_shared<std::string>("fp16");
  auto seed = std::make_shared<std::uint64_t>(1);
  cmd->add_flag("--json", *json, "Print JSON instead of tables");
  cmd->add_option("--svg", *svg,
                  "Write an SVG plot: the max relative error per decade (or, with --accumulation, "
                  "the dot-product error vs n)");
  cmd->add_option("--range", *range, "Decades to sweep, as decimal exponents LO:HI")
      ->capture_default_str();
  cmd->add_flag("--accumulation", *accumulation,
                "Run the accumulation experiment instead: n = 10 .. 10^6 products accumulated in "
                "fp16, bf16 and fp32, against a double reference and the gamma_n bound");
  cmd->add_option("--input", *input, "With --accumulation: format the inputs are rounded to")
      ->capture_default_str();
  cmd->add_option("--seed", *seed, "With --accumulation: random seed")->capture_default_str();
  cmd->footer(
      "Examples: mixprec formats --range=-10:10 --svg error.svg\n"
      "          mixprec formats --accumulation --svg accumulation.svg\n"
      "fp8_e4m3 and fp8_e5m2 are also tensor dtypes (DType::f8e4m3, f8e5m2): stored in 1 "
      "byte,\ncast, and multiplied by an emulated matmul with f32 accumulation (docs/fp8.md).");
  cmd->callback([json, svg, range, accumulation, input, seed] {
    const Range r = parse_range(*range);
    if (*accumulation) {
      const FormatInfo* in = nullptr;
      try {
        in = &numerics::parse_format(*input);
      } catch (const ValueError&) {
        MIXPREC_CHECK(false, ValueError, "formats",
                      "--input must be a format name such as fp16 or bf16 (also fp32, tf32, "
                      "fp8_e4m3, fp8_e5m2), got '"
                          << *input << "'");
      }
      run_accumulation(*in, *seed, *json, *svg);
    } else {
      run_sweep(r, *json, *svg);
    }
  });
}

}  // namespace mixprec::tools
