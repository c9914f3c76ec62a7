// The one registry of settings (docs/design.md, "One registry of settings"):
// every configuration key is declared once, with its type, default, help text
// and optional environment override, and everything else (TOML loading, --set,
// `braid inspect config`, JSON sidecars) works from these declarations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace braid::train {

enum class ValueType { Bool, Int, Float, String };
using Value = std::variant<bool, int64_t, double, std::string>;

std::string_view type_name(ValueType t);
ValueType type_of(const Value& v);
// For humans and TOML: true, 64, 0.05, "sgd".
std::string format_value(const Value& v);

struct KeyDef {
  // Every member has an initialiser so sections can use designated initialisers.
  std::string name = {};                  // "section.key"
  ValueType type = ValueType::String;
  Value default_value = {};
  std::string help = {};
  std::vector<std::string> choices = {};  // allowed strings; empty: any
  std::optional<double> min = {};         // inclusive bounds for numbers
  std::optional<double> max = {};
  std::string env = {};                   // environment variable that overrides it; empty: none
};

class Schema {
 public:
  // ConfigError on a duplicate name or a default that breaks the key's own rules.
  void add(KeyDef def);
  const KeyDef* find(std::string_view name) const;
  const std::vector<KeyDef>& keys() const { return keys_; }
  // Up to `max` declared keys closest to `name` by edit distance (on the full
  // name, or on the part after the dot), closest first.
  std::vector<std::string> close_matches(std::string_view name, size_t max = 3) const;
  // ConfigError when `v` is not allowed for `def` (type, choice, range); `what`
  // says where the value came from, for the message.
  static void validate(const KeyDef& def, const Value& v, std::string_view what);

 private:
  std::vector<KeyDef> keys_;
};

// Levenshtein distance.
size_t edit_distance(std::string_view a, std::string_view b);

// Each section's keys, declared in its own file (schema_<section>.cc) so the
// owners of nn/optim/parallel extend their section in one place.
void add_train_keys(Schema& s);
void add_model_keys(Schema& s);
void add_optim_keys(Schema& s);
void add_data_keys(Schema& s);
void add_parallel_keys(Schema& s);
void add_ps_keys(Schema& s);
void add_averaging_keys(Schema& s);
void add_pbt_keys(Schema& s);
void add_ensemble_keys(Schema& s);  // [ensemble] and [distill]
void add_gossip_keys(Schema& s);
void add_fault_tolerance_keys(Schema& s);  // parallel.fault_tolerance

// Every section: the schema `braid train` and `braid inspect config` use.
Schema braid_schema();

}  // namespace braid::train
