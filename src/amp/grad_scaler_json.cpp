// GradScaler state <-> JSON, hand-written (no JSON library). Doubles are printed like %.17g but
// with std::to_chars, which ignores the C locale's decimal separator, and parsed back with
// std::from_chars: 17 significant digits identify every double, so the round trip is bit-exact.
// Version 2 added predictive loss scaling (options mode, predictive_history, predictive_margin;
// amax_history, extra_margin, pending_overflow_scale); version-1 text has none of them and reads
// as a dynamic state.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/core/error.h"

namespace mixprec::amp {
namespace {

constexpr const char* kOp = "GradScaler";
constexpr std::string_view kFormat = "mixprec.GradScaler";
constexpr std::int64_t kVersion = 2;

// ---- writing ----

void put_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "\"nan\"";  // JSON has no Inf/NaN literals
  } else if (std::isinf(v)) {
    out += v > 0 ? "\"inf\"" : "\"-inf\"";
  } else {
    char buf[40];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 17);
    out.append(buf, r.ptr);
  }
}

void put_doubles(std::string& out, const std::vector<double>& values) {
  out += '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i != 0) out += ',';
    put_double(out, values[i]);
  }
  out += ']';
}

template <class... Parts>
void put(std::string& out, const Parts&... parts) {
  (out.append(parts), ...);
}

// ---- parsing: a small JSON reader (objects, arrays, strings, numbers, literals) ----

struct Value {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool flag = false;
  std::string text;               ///< a number's literal, or a string's decoded contents
  std::vector<Value> items;       ///< array elements, or object values
  std::vector<std::string> keys;  ///< object keys, parallel to items
};

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  Value document() {
    Value v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    detail::throw_error<ValueError>(kOp, "from_json: " + what + " at offset " +
                                             std::to_string(pos_) +
                                             "; pass the text to_json() wrote");
  }
  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }

  Value value(int depth) {
    if (depth > 32) fail("nesting too deep");
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end of text");
    Value v;
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = Value::Kind::object;
      ++pos_;
      if (eat('}')) return v;
      do {
        skip_space();
        v.keys.push_back(string());
        expect(':');
        v.items.push_back(value(depth + 1));
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      v.kind = Value::Kind::array;
      ++pos_;
      if (eat(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Value::Kind::string;
      v.text = string();
    } else if (literal("true") || literal("false")) {
      v.kind = Value::Kind::boolean;
      v.flag = c == 't';
    } else if (literal("null")) {
      v.kind = Value::Kind::null;
    } else {
      v.kind = Value::Kind::number;
      const std::size_t start = pos_;
      while (pos_ < s_.size() &&
             std::string_view("+-.0123456789eE").find(s_[pos_]) != std::string_view::npos)
        ++pos_;
      if (pos_ == start) fail("expected a JSON value");
      v.text = std::string(s_.substr(start, pos_ - start));
    }
    return v;
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  /// A string token; only the escapes to_json could need (and \uXXXX below 0x80) are accepted.
  std::string string() {
    if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      const char e = s_[pos_++];
      if (e == 'u') {
        unsigned code = 0;
        const char* first = s_.data() + pos_;
        const auto r = std::from_chars(first, s_.data() + std::min(pos_ + 4, s_.size()), code, 16);
        if (r.ptr != first + 4 || code >= 0x80) fail("unsupported \\u escape");
        pos_ += 4;
        out += static_cast<char>(code);
        continue;
      }
      static constexpr std::string_view kEscaped = "\"\\/bfnrt";
      static constexpr std::string_view kMeaning = "\"\\/\b\f\n\r\t";
      const std::size_t k = kEscaped.find(e);
      if (k == std::string_view::npos) fail("bad escape");
      out += kMeaning[k];
    }
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

// ---- typed access ----

[[noreturn]] void bad(const std::string& key, const char* what) {
  detail::throw_error<ValueError>(
      kOp, "from_json: '" + key + "' " + what + "; pass the text to_json() wrote");
}

/// The members of object `v` named `key` in order; every key of v must be one of them.
std::vector<const Value*> members(const Value& v, const std::string& where,
                                  const std::vector<std::string_view>& names) {
  if (v.kind != Value::Kind::object) bad(where, "must be an object");
  std::vector<const Value*> out(names.size(), nullptr);
  for (std::size_t k = 0; k < v.keys.size(); ++k) {
    std::size_t j = 0;
    while (j < names.size() && names[j] != v.keys[k]) ++j;
    if (j == names.size()) bad(where + "." + v.keys[k], "is not a known key");
    if (out[j] != nullptr) bad(where + "." + v.keys[k], "appears twice");
    out[j] = &v.items[k];
  }
  for (std::size_t j = 0; j < names.size(); ++j) {
    if (out[j] == nullptr) bad(where + "." + std::string(names[j]), "is missing");
  }
  return out;
}

double as_double(const Value& v, const std::string& key) {
  if (v.kind == Value::Kind::string) {
    if (v.text == "inf") return std::numeric_limits<double>::infinity();
    if (v.text == "-inf") return -std::numeric_limits<double>::infinity();
    if (v.text == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  double d = 0.0;
  const char* end = v.text.data() + v.text.size();
  if (v.kind != Value::Kind::number || std::from_chars(v.text.data(), end, d).ptr != end) {
    bad(key, "must be a number (or \"inf\", \"-inf\", \"nan\")");
  }
  return d;
}

std::int64_t as_int(const Value& v, const std::string& key) {
  std::int64_t i = 0;
  const char* end = v.text.data() + v.text.size();
  const auto r = std::from_chars(v.text.data(), end, i);
  if (v.kind != Value::Kind::number || r.ptr != end || r.ec != std::errc())
    bad(key, "must be an integer");
  return i;
}

bool as_bool(const Value& v, const std::string& key) {
  if (v.kind != Value::Kind::boolean) bad(key, "must be true or false");
  return v.flag;
}

}  // namespace

std::string to_json(const GradScalerState& s) {
  const GradScalerOptions& o = s.options;
  const auto b = [](bool x) { return x ? "true" : "false"; };
  std::string out;
  put(out, "{\"format\":\"", kFormat, "\",\"version\":", std::to_string(kVersion), ",\"scale\":");
  put_double(out, s.scale);
  put(out, ",\"growth_tracker\":", std::to_string(s.growth_tracker),
      ",\"hysteresis_left\":", std::to_string(s.hysteresis_left), ",\"options\":{\"init_scale\":");
  put_double(out, o.init_scale);
  put(out, ",\"growth_factor\":");
  put_double(out, o.growth_factor);
  put(out, ",\"backoff_factor\":");
  put_double(out, o.backoff_factor);
  put(out, ",\"growth_interval\":", std::to_string(o.growth_interval),
      ",\"enabled\":", b(o.enabled), ",\"hysteresis\":", std::to_string(o.hysteresis),
      ",\"consecutive_hysteresis\":", b(o.consecutive_hysteresis), ",\"min_scale\":");
  put_double(out, o.min_scale);
  put(out, ",\"max_scale\":");
  put_double(out, o.max_scale);
  put(out, ",\"allow_16bit_grads\":", b(o.allow_16bit_grads),
      ",\"history_limit\":", std::to_string(o.history_limit), ",\"mode\":\"", name(o.mode),
      "\",\"predictive_history\":", std::to_string(o.predictive_history),
      ",\"predictive_margin\":");
  put_double(out, o.predictive_margin);
  put(out, "},\"stats\":{\"steps\":", std::to_string(s.stats.steps),
      ",\"skipped_steps\":", std::to_string(s.stats.skipped_steps),
      ",\"last_overflow_step\":", std::to_string(s.stats.last_overflow_step),
      ",\"scale_history\":");
  put_doubles(out, s.stats.scale_history);
  put(out, "},\"amax_history\":");
  put_doubles(out, s.amax_history);
  put(out, ",\"extra_margin\":");
  put_double(out, s.extra_margin);
  put(out, ",\"pending_overflow_scale\":");
  put_double(out, s.pending_overflow_scale);
  out += '}';
  return out;
}

std::vector<double> as_doubles(const Value& v, const std::string& key) {
  if (v.kind != Value::Kind::array) bad(key, "must be an array");
  std::vector<double> out;
  for (const Value& item : v.items) out.push_back(as_double(item, key));
  return out;
}

/// The version of a state document, read before its keys are checked (they depend on it).
std::int64_t version_of(const Value& doc) {
  if (doc.kind != Value::Kind::object) bad("state", "must be an object");
  for (std::size_t k = 0; k < doc.keys.size(); ++k) {
    if (doc.keys[k] == "version") return as_int(doc.items[k], "version");
  }
  bad("state.version", "is missing");
}

GradScalerState GradScaler::from_json(std::string_view json) {
  const Value doc = Reader(json).document();
  const std::int64_t version = version_of(doc);
  if (version != 1 && version != kVersion) {
    bad("version", "must be 1 or 2 (2 is written now; 1 predates predictive scaling)");
  }
  const bool v2 = version == 2;
  std::vector<std::string_view> top_keys = {"format",          "version", "scale",
                                            "growth_tracker",  "hysteresis_left",
                                            "options",         "stats"};
  if (v2) {
    top_keys.insert(top_keys.end(), {"amax_history", "extra_margin", "pending_overflow_scale"});
  }
  const auto top = members(doc, "state", top_keys);
  if (top[0]->kind != Value::Kind::string || top[0]->text != kFormat) {
    bad("format", "must be \"mixprec.GradScaler\"");
  }
  GradScalerState s;
  s.scale = as_double(*top[2], "scale");
  s.growth_tracker = as_int(*top[3], "growth_tracker");
  const std::int64_t hl = as_int(*top[4], "hysteresis_left");
  if (hl < 1 || hl > std::numeric_limits<int>::max()) bad("hysteresis_left", "is out of range");
  s.hysteresis_left = static_cast<int>(hl);

  std::vector<std::string_view> option_keys = {
      "init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled", "hysteresis",
      "consecutive_hysteresis", "min_scale", "max_scale", "allow_16bit_grads", "history_limit"};
  if (v2) {
    option_keys.insert(option_keys.end(), {"mode", "predictive_history", "predictive_margin"});
  }
  const auto o = members(*top[5], "options", option_keys);
  GradScalerOptions& opt = s.options;
  opt.init_scale = as_double(*o[0], "options.init_scale");
  opt.growth_factor = as_double(*o[1], "options.growth_factor");
  opt.backoff_factor = as_double(*o[2], "options.backoff_factor");
  opt.growth_interval = as_int(*o[3], "options.growth_interval");
  opt.enabled = as_bool(*o[4], "options.enabled");
  const std::int64_t h = as_int(*o[5], "options.hysteresis");
  if (h < 1 || h > std::numeric_limits<int>::max()) bad("options.hysteresis", "is out of range");
  opt.hysteresis = static_cast<int>(h);
  opt.consecutive_hysteresis = as_bool(*o[6], "options.consecutive_hysteresis");
  opt.min_scale = as_double(*o[7], "options.min_scale");
  opt.max_scale = as_double(*o[8], "options.max_scale");
  opt.allow_16bit_grads = as_bool(*o[9], "options.allow_16bit_grads");
  const std::int64_t limit = as_int(*o[10], "options.history_limit");
  if (limit < 0) bad("options.history_limit", "must be >= 0");
  opt.history_limit = static_cast<std::size_t>(limit);
  if (v2) {
    if (o[11]->kind != Value::Kind::string) bad("options.mode", "must be a string");
    if (o[11]->text != "dynamic" && o[11]->text != "predictive") {
      bad("options.mode", "must be \"dynamic\" or \"predictive\"");
    }
    opt.mode = parse_scaling_mode(o[11]->text);
    const std::int64_t ph = as_int(*o[12], "options.predictive_history");
    if (ph < 1) bad("options.predictive_history", "must be >= 1");
    opt.predictive_history = static_cast<std::size_t>(ph);
    opt.predictive_margin = as_double(*o[13], "options.predictive_margin");
  }

  const auto st =
      members(*top[6], "stats", {"steps", "skipped_steps", "last_overflow_step", "scale_history"});
  s.stats.steps = as_int(*st[0], "stats.steps");
  s.stats.skipped_steps = as_int(*st[1], "stats.skipped_steps");
  s.stats.last_overflow_step = as_int(*st[2], "stats.last_overflow_step");
  s.stats.scale_history = as_doubles(*st[3], "stats.scale_history");
  if (v2) {
    s.amax_history = as_doubles(*top[7], "amax_history");
    s.extra_margin = as_double(*top[8], "extra_margin");
    s.pending_overflow_scale = as_double(*top[9], "pending_overflow_scale");
  }

  // Validate the whole state exactly as load_state will (a scaler built from its own options).
  GradScaler probe(s.options);
  probe.load_state(s);
  return s;
}

}  // namespace mixprec::amp
