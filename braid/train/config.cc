#include "braid/train/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "braid/base/abridge.h"
#include "braid/base/error.h"

namespace braid::train {

namespace {

[[noreturn]] void unknown_key(const Schema& schema, std::string_view key, std::string_view where) {
  // No key is long: comparing a huge name with each would take minutes (edit distance is quadratic).
  auto close = key.size() <= 200 ? schema.close_matches(key) : std::vector<std::string>{};
  std::string hint = close.empty() ? std::string("no similar key")
                                   : fmt::format("did you mean {}?", fmt::join(close, ", "));
  fail<ConfigError>("{}: unknown config key '{}'; {} (`braid inspect config` lists every key)", where, abridge(key),
                    hint);
}

std::string toml_where(const std::string& name, const toml::node& node) {
  const auto& b = node.source().begin;
  return fmt::format("{}:{}:{}", name, b.line, b.column);
}

}  // namespace

Value parse_value(const KeyDef& def, std::string_view text, std::string_view where) {
  auto bad = [&]() -> Value {
    fail<ConfigError>("{}: {} expects a {}, got '{}'", where, def.name, type_name(def.type), abridge(text));
  };
  switch (def.type) {
    case ValueType::Bool:
      if (text == "true" || text == "yes" || text == "on" || text == "1") return true;
      if (text == "false" || text == "no" || text == "off" || text == "0") return false;
      return bad();
    case ValueType::Int: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return bad();
      return v;
    }
    case ValueType::Float: {
      double v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return bad();
      return v;
    }
    case ValueType::String:
      if (text.size() >= 2 && (text.front() == '"' || text.front() == '\'') && text.back() == text.front()) {
        text = text.substr(1, text.size() - 2);
      }
      return std::string(text);
  }
  return bad();
}

Config::Config(Schema schema) : schema_(std::move(schema)) {
  for (const auto& k : schema_.keys()) {
    values_[k.name] = k.default_value;
    sources_[k.name] = "default";
  }
}

const KeyDef& Config::def(std::string_view key, std::string_view where) const {
  const KeyDef* d = schema_.find(key);
  if (!d) unknown_key(schema_, key, where);
  return *d;
}

void Config::set_value(std::string_view key, const Value& v, const std::string& source) {
  const KeyDef& d = def(key, source);
  Schema::validate(d, v, source);
  values_[d.name] = v;
  sources_[d.name] = source;
}

void Config::set_text(std::string_view key, std::string_view text, const std::string& source) {
  set_value(key, parse_value(def(key, source), text, source), source);
}

void Config::set(std::string_view assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    fail<ConfigError>("--set {}: expected key=value, e.g. --set train.epochs=3", abridge(assignment));
  }
  auto trim = [](std::string_view s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    return b == std::string_view::npos ? std::string_view{} : s.substr(b, e - b + 1);
  };
  std::string key(trim(assignment.substr(0, eq)));
  set_text(key, trim(assignment.substr(eq + 1)), fmt::format("--set {}", abridge(assignment)));
  sources_[key] = "--set";
}

void Config::apply_env(const std::function<const char*(const char*)>& lookup) {
  for (const auto& k : schema_.keys()) {
    if (k.env.empty()) continue;
    const char* v = lookup ? lookup(k.env.c_str()) : std::getenv(k.env.c_str());
    if (v == nullptr) continue;
    set_text(k.name, v, "env " + k.env);
  }
}

void Config::load_toml_file(const std::string& path) {
  if (!std::filesystem::exists(path)) fail<ConfigError>("config file {} does not exist", path);
  // A folder opens as a stream that fails on the first read, with libstdc++'s words, not ours.
  if (std::filesystem::is_directory(path)) fail<ConfigError>("config file {} is a directory, not a TOML file", path);
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail<ConfigError>("cannot read config file {}", path);
  load_toml(text, path);
}

void Config::load_toml(std::string_view text, const std::string& name) {
  toml::table root;
  try {
    root = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    fail<ConfigError>("{}:{}:{}: invalid TOML: {}", name, b.line, b.column, e.description());
  }
  std::function<void(const toml::table&, const std::string&)> walk = [&](const toml::table& t,
                                                                          const std::string& prefix) {
    for (auto&& [k, node] : t) {
      std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      std::string where = toml_where(name, node);
      if (const toml::table* sub = node.as_table()) {
        walk(*sub, key);
        continue;
      }
      const KeyDef& d = def(key, where);
      Value v;
      if (auto b = node.as_boolean()) v = b->get();
      else if (auto i = node.as_integer()) v = d.type == ValueType::Float ? Value(static_cast<double>(i->get())) : Value(i->get());
      else if (auto f = node.as_floating_point()) v = f->get();
      else if (auto s = node.as_string()) v = s->get();
      else fail<ConfigError>("{}: {} expects a {}, got a TOML {}", where, key, type_name(d.type),
                             node.is_array() ? "array" : "date/time");
      Schema::validate(d, v, where);
      values_[d.name] = v;
      sources_[d.name] = "file " + name;
    }
  };
  walk(root, "");
}

const Value& Config::value(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) unknown_key(schema_, key, "Config::value");
  read_->insert(it->first);
  return it->second;
}

bool Config::was_read(std::string_view key) const { return read_->count(key) > 0; }

namespace {

// Set by the user: a file or --set (not a default, not the environment).
bool user_set(const std::string& source) { return source != "default" && !source.starts_with("env "); }

// The keys whose values decide whether a key of `section` is used, besides
// model.name and parallel.strategy.
std::vector<std::string_view> selectors(std::string_view section) {
  if (section == "optim") return {"optim.name", "optim.schedule"};
  if (section == "data") return {"data.name"};
  if (section == "codec") return {"parallel.codec"};
  if (section == "parallel") return {"parallel.pipeline", "parallel.codec"};
  if (section == "ps") return {"ps.consistency"};
  if (section == "easgd") return {"easgd.mode"};
  if (section == "admm") return {"admm.mode"};
  if (section == "gossip") return {"gossip.mode"};
  if (section == "hybrid") return {"hybrid.via"};
  if (section == "train") return {"train.batch_schedule", "train.device"};
  return {};
}

}  // namespace

std::vector<std::string> Config::unread_keys() const {
  std::vector<std::string> out;
  for (const auto& k : schema_.keys()) {
    if (user_set(sources_.find(k.name)->second) && !read_->count(k.name)) out.push_back(k.name);
  }
  return out;
}

void Config::refuse_unread(std::string_view command) const {
  const std::vector<std::string> unread = unread_keys();
  if (unread.empty()) return;
  // Read straight from values_: naming the context must not count as reading it.
  auto show = [&](std::string_view key) {
    auto it = values_.find(key);
    return it == values_.end() ? std::string() : fmt::format("{} = {}", key, abridge(format_value(it->second)));
  };
  const std::string& first = unread.front();
  const std::string section = first.substr(0, first.find('.'));
  std::vector<std::string> context{std::string(command), show("model.name"), show("parallel.strategy")};
  for (std::string_view s : selectors(section)) {
    if (s != first && std::find(context.begin(), context.end(), show(s)) == context.end()) context.push_back(show(s));
  }
  std::string others;
  if (unread.size() > 1) {
    others = fmt::format(" (nor {}: {})", unread.size() - 1 == 1 ? "does" : "do",
                         fmt::join(unread.begin() + 1, unread.end(), ", "));
  }
  fail<ConfigError>("{} ({}) has no effect on this run ({}){}; a key a run does not use is refused, not ignored. "
                    "{}: {}", show(first), sources_.find(first)->second, fmt::join(context, ", "), others,
                    first, schema_.find(first)->help);
}

namespace {
template <class T>
const T& typed(const Config& c, std::string_view key, ValueType want) {
  const Value& v = c.value(key);
  if (type_of(v) != want) {
    fail<ConfigError>("config key {} is a {}, read as a {}", key, type_name(type_of(v)), type_name(want));
  }
  return std::get<T>(v);
}
}  // namespace

bool Config::get_bool(std::string_view key) const { return typed<bool>(*this, key, ValueType::Bool); }
int64_t Config::get_int(std::string_view key) const { return typed<int64_t>(*this, key, ValueType::Int); }
double Config::get_float(std::string_view key) const { return typed<double>(*this, key, ValueType::Float); }
const std::string& Config::get_string(std::string_view key) const {
  return typed<std::string>(*this, key, ValueType::String);
}

const std::string& Config::source(std::string_view key) const {
  auto it = sources_.find(key);
  if (it == sources_.end()) unknown_key(schema_, key, "Config::source");
  return it->second;
}

nlohmann::json Config::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, v] : values_) {
    size_t dot = key.find('.');
    auto& slot = j[key.substr(0, dot)][key.substr(dot + 1)];
    std::visit([&](const auto& x) { slot = x; }, v);
  }
  return j;
}

void Config::load_json(const nlohmann::json& j, const std::string& name) {
  if (!j.is_object()) fail<ConfigError>("{}: config must be a JSON object of sections", name);
  for (const auto& [section, keys] : j.items()) {
    if (!keys.is_object()) fail<ConfigError>("{}: config section {} is not an object", name, section);
    for (const auto& [k, x] : keys.items()) {
      std::string key = section + "." + k;
      const KeyDef& d = def(key, name);
      Value v;
      if (x.is_boolean()) v = x.get<bool>();
      else if (x.is_number_integer()) v = d.type == ValueType::Float ? Value(x.get<double>()) : Value(x.get<int64_t>());
      else if (x.is_number()) v = x.get<double>();
      else if (x.is_string()) v = x.get<std::string>();
      else fail<ConfigError>("{}: {} expects a {}, got {}", name, key, type_name(d.type), abridge(x.dump()));
      set_value(key, v, name);
    }
  }
}

std::string Config::to_toml() const {
  // One table per section in the order sections first appear: a schema may
  // interleave sections (codec.* among parallel.*), and TOML forbids opening
  // a table twice.
  std::vector<std::pair<std::string, std::string>> tables;  // section, its lines
  for (const auto& k : schema_.keys()) {
    size_t dot = k.name.find('.');
    std::string s = k.name.substr(0, dot);
    auto it = std::find_if(tables.begin(), tables.end(), [&](const auto& t) { return t.first == s; });
    if (it == tables.end()) it = tables.insert(tables.end(), {s, ""});
    it->second += fmt::format("{} = {}\n", k.name.substr(dot + 1), format_value(values_.find(k.name)->second));
  }
  std::string out;
  for (const auto& [s, lines] : tables) out += fmt::format("{}[{}]\n{}", out.empty() ? "" : "\n", s, lines);
  return out;
}

std::vector<std::string> Config::differences(const Config& other) const {
  std::vector<std::string> out;
  for (const auto& [key, v] : values_) {
    auto it = other.values_.find(key);
    if (it == other.values_.end()) out.push_back(fmt::format("{}: {} vs (not declared)", key, format_value(v)));
    else if (it->second != v) out.push_back(fmt::format("{}: {} vs {}", key, format_value(v), format_value(it->second)));
  }
  for (const auto& [key, v] : other.values_) {
    if (!values_.count(key)) out.push_back(fmt::format("{}: (not declared) vs {}", key, format_value(v)));
  }
  return out;
}

Config load_config(const std::string& path, const std::vector<std::string>& sets, bool use_env) {
  Config c(braid_schema());
  if (!path.empty()) c.load_toml_file(path);
  if (use_env) c.apply_env();
  for (const auto& s : sets) c.set(s);
  return c;
}

}  // namespace braid::train
