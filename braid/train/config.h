// The effective configuration of a run: every key of a Schema with its value
// and where that value came from.
//
// Precedence, lowest first: schema default < TOML file < environment override
// (the key's `env` variable) < `--set key=value`. load_config() applies them
// in that order. Errors are ConfigError naming the key, the value and the
// place (file:line:column, environment variable or --set).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "braid/train/schema.h"

namespace braid::train {

class Config {
 public:
  explicit Config(Schema schema);  // every key at its default

  const Schema& schema() const { return schema_; }

  // TOML: [section] tables of keys, or dotted keys. A syntax error names
  // file:line:column; an unknown key lists the closest declared keys.
  void load_toml_file(const std::string& path);
  void load_toml(std::string_view text, const std::string& name);
  // Applies each key's environment variable when set (lookup defaults to getenv).
  void apply_env(const std::function<const char*(const char*)>& lookup = nullptr);
  // "section.key=value", the value parsed as the key's type.
  void set(std::string_view assignment);
  // `text` parsed as the key's type; `source` is recorded and used in errors.
  void set_text(std::string_view key, std::string_view text, const std::string& source);
  void set_value(std::string_view key, const Value& v, const std::string& source);

  const Value& value(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  // "default", "file <path>", "env <VAR>" or "--set".
  const std::string& source(std::string_view key) const;

  // {"section": {"key": value, ...}, ...}; keys sorted, so dump() is canonical
  // and equal configs give equal strings (ranks compare them at startup).
  nlohmann::json to_json() const;
  // Reads values back from to_json() output (checkpoint sidecars); unknown keys
  // and wrong types are ConfigError naming `name`.
  void load_json(const nlohmann::json& j, const std::string& name);
  // A TOML document that loads back to the same values.
  std::string to_toml() const;
  // "key: <this> vs <other>" for each key whose values differ.
  std::vector<std::string> differences(const Config& other) const;

  // Every key is read or refused. A run reads each key it uses through
  // value()/get_*() at the point of use, and only there; after its setup the
  // command calls refuse_unread(), so a key the user set (in a file or with
  // --set) that the chosen model, plan, device or command never read is an
  // error instead of a silent no-op. Defaults and environment overrides are
  // exempt: an environment variable applies to every command run under it.
  // Copies share the record (an ensemble member's config is a copy of the
  // run's, and what it reads counts for the run).
  bool was_read(std::string_view key) const;
  // The keys set by a file or --set that nothing has read, in schema order.
  std::vector<std::string> unread_keys() const;
  // ConfigError naming the unread keys, what decided the run (model.name,
  // parallel.strategy, the key section's own selector) and each key's help.
  // `command` names the run ("braid train").
  void refuse_unread(std::string_view command) const;

 private:
  const KeyDef& def(std::string_view key, std::string_view where) const;
  Schema schema_;
  std::map<std::string, Value, std::less<>> values_;
  std::map<std::string, std::string, std::less<>> sources_;
  std::shared_ptr<std::set<std::string, std::less<>>> read_ = std::make_shared<std::set<std::string, std::less<>>>();
};

// Parses `text` as a value of `type` (bools: true/false/yes/no/on/off/1/0).
// ConfigError "<where>: <key> expects <type>, got '<text>'".
Value parse_value(const KeyDef& def, std::string_view text, std::string_view where);

// braid_schema() defaults, then `path` (skipped when empty), then the
// environment (when use_env), then each `sets` entry in order.
Config load_config(const std::string& path, const std::vector<std::string>& sets, bool use_env = true);

}  // namespace braid::train
