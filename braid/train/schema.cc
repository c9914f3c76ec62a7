#include "braid/train/schema.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "braid/base/abridge.h"
#include "braid/base/error.h"

namespace braid::train {

std::string_view type_name(ValueType t) {
  switch (t) {
    case ValueType::Bool: return "bool";
    case ValueType::Int: return "int";
    case ValueType::Float: return "float";
    case ValueType::String: return "string";
  }
  return "?";
}

ValueType type_of(const Value& v) { return static_cast<ValueType>(v.index()); }

std::string format_value(const Value& v) {
  switch (type_of(v)) {
    case ValueType::Bool: return std::get<bool>(v) ? "true" : "false";
    case ValueType::Int: return fmt::format("{}", std::get<int64_t>(v));
    case ValueType::Float: {
      std::string s = fmt::format("{}", std::get<double>(v));
      // Keep floats recognisable as floats in TOML ("1" would read back as an int).
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
      return s;
    }
    case ValueType::String: return fmt::format("\"{}\"", std::get<std::string>(v));
  }
  return "?";
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

void Schema::validate(const KeyDef& def, const Value& v, std::string_view what) {
  if (type_of(v) != def.type) {
    fail<ConfigError>("{}: {} expects a {}, got {}", what, def.name, type_name(def.type), abridge(format_value(v)));
  }
  if (def.type == ValueType::String && !def.choices.empty()) {
    const auto& s = std::get<std::string>(v);
    if (std::find(def.choices.begin(), def.choices.end(), s) == def.choices.end()) {
      fail<ConfigError>("{}: {} = \"{}\" is not one of: {}", what, def.name, abridge(s), fmt::join(def.choices, ", "));
    }
  }
  if (def.type == ValueType::Float && !std::isfinite(std::get<double>(v))) {
    // TOML and JSON both spell nan and inf; no key means either, and a NaN
    // would slip past every range check below (comparisons with it are false).
    fail<ConfigError>("{}: {} = {} is not a finite number", what, def.name, format_value(v));
  }
  if (def.type == ValueType::Int || def.type == ValueType::Float) {
    double x = def.type == ValueType::Int ? static_cast<double>(std::get<int64_t>(v)) : std::get<double>(v);
    if ((def.min && x < *def.min) || (def.max && x > *def.max)) {
      fail<ConfigError>("{}: {} = {} is outside [{}, {}]", what, def.name, format_value(v),
                        def.min ? fmt::format("{}", *def.min) : "-inf", def.max ? fmt::format("{}", *def.max) : "inf");
    }
  }
}

void Schema::add(KeyDef def) {
  if (def.name.find('.') == std::string::npos) {
    fail<ConfigError>("schema: key '{}' must be section.name", def.name);
  }
  if (find(def.name)) fail<ConfigError>("schema: key {} declared twice", def.name);
  validate(def, def.default_value, "schema default");
  keys_.push_back(std::move(def));
}

const KeyDef* Schema::find(std::string_view name) const {
  for (const auto& k : keys_) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::vector<std::string> Schema::close_matches(std::string_view name, size_t max) const {
  std::vector<std::pair<size_t, std::string>> scored;
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  const bool dotted = name.find('.') != std::string_view::npos;
  for (const auto& k : keys_) {
    size_t d = edit_distance(name, k.name);
    std::string_view leaf = std::string_view(k.name).substr(k.name.find('.') + 1);
    if (!dotted) d = std::min(d, edit_distance(name, leaf));
    // A right leaf in the wrong section ("train.lr" for "optim.lr") is close too.
    std::string_view qleaf = dotted ? name.substr(name.find('.') + 1) : name;
    if (qleaf == leaf) d = std::min<size_t>(d, 1);
    if (d <= limit) scored.emplace_back(d, k.name);
  }
  std::stable_sort(scored.begin(), scored.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < max; ++i) out.push_back(scored[i].second);
  return out;
}

Schema braid_schema() {
  Schema s;
  add_train_keys(s);
  add_model_keys(s);
  add_optim_keys(s);
  add_data_keys(s);
  add_parallel_keys(s);
  add_ps_keys(s);
  add_averaging_keys(s);
  add_pbt_keys(s);
  add_ensemble_keys(s);
  add_gossip_keys(s);
  add_fault_tolerance_keys(s);
  return s;
}

}  // namespace braid::train
