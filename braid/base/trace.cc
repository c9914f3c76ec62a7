#include "braid/base/trace.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "braid/base/atomic_file.h"
#include "braid/base/error.h"
#include "braid/base/rank_files.h"

namespace braid::trace {

namespace {

std::atomic<Recorder*> g_active{nullptr};

int64_t micros(Clock::time_point t) {
  // The steady clock is CLOCK_MONOTONIC, shared by every process of a host,
  // so ranks on one host line up in the merged trace.
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// Per-thread row number, 1-based, stable for the thread's life (0: unset).
thread_local int t_tid = 0;
std::atomic<int> g_next_tid{1};

}  // namespace

void Arg::put(nlohmann::json& object) const {
  switch (kind) {
    case Kind::integer: object[key] = i; break;
    case Kind::real: object[key] = d; break;
    case Kind::boolean: object[key] = b; break;
    case Kind::text: object[key] = std::string_view(text, length); break;
  }
}

Arg& Args::find_or_add(const char* key) {
  for (int i = 0; i < size_; ++i)
    if (items_[i].key == key || std::strcmp(items_[i].key, key) == 0) return items_[i];
  BRAID_CHECK(size_ < kCapacity, "trace span argument '{}': a span keeps at most {}", key, kCapacity);
  items_[size_].key = key;
  return items_[size_++];
}

nlohmann::json Args::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const Arg& a : items()) a.put(j);
  return j;
}

Recorder* active() { return g_active.load(std::memory_order_relaxed); }

Session::Session(Recorder* recorder) : previous_(g_active.exchange(recorder)) {}
Session::~Session() { g_active.store(previous_); }

Recorder::Recorder(int pid, std::string label) : pid_(pid), label_(std::move(label)) {}

int Recorder::thread_id() {
  if (t_tid == 0) t_tid = g_next_tid.fetch_add(1);
  for (const auto& [tid, name] : threads_)
    if (tid == t_tid) return t_tid;
  char name[32] = {};
  ::pthread_getname_np(::pthread_self(), name, sizeof(name));
  threads_.emplace_back(t_tid, fmt::format("{} ({})", name, t_tid));
  return t_tid;
}

void Recorder::complete(const char* category, std::string name, Clock::time_point start, Clock::time_point end,
                        const Args& args) {
  std::lock_guard lock(mu_);
  const auto items = args.items();
  events_.push_back({category, std::move(name), 'X', thread_id(), micros(start), micros(end) - micros(start),
                     static_cast<uint32_t>(args_.size()), static_cast<uint32_t>(items.size()), nullptr});
  args_.insert(args_.end(), items.begin(), items.end());
}

void Recorder::instant(const char* category, std::string name, nlohmann::json args) {
  std::lock_guard lock(mu_);
  events_.push_back({category, std::move(name), 'i', thread_id(), micros(Clock::now()), 0, 0, 0, std::move(args)});
}

size_t Recorder::size() const {
  std::lock_guard lock(mu_);
  return events_.size();
}

nlohmann::json Recorder::to_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid_}, {"tid", 0}, {"args", {{"name", label_}}}});
  events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid_}, {"tid", 0},
                    {"args", {{"sort_index", pid_}}}});
  for (const auto& [tid, name] : threads_)
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid_}, {"tid", tid}, {"args", {{"name", name}}}});
  for (const Event& e : events_) {
    nlohmann::json j{{"ph", std::string(1, e.phase)}, {"cat", e.category}, {"name", e.name},
                     {"pid", pid_},                   {"tid", e.tid},      {"ts", e.ts_us}};
    if (e.phase == 'X') j["dur"] = e.dur_us;
    if (e.phase == 'i') j["s"] = "t";
    if (e.arg_count > 0) {
      nlohmann::json& args = j["args"] = nlohmann::json::object();
      for (uint32_t i = 0; i < e.arg_count; ++i) args_[e.arg_begin + i].put(args);
    }
    if (!e.detail.is_null()) j["args"] = e.detail;
    events.push_back(std::move(j));
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void Recorder::write(const std::string& path) const {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  AtomicFile f(path);
  f.write(to_json().dump());
  f.commit();
}

void Span::start(const char* category, std::string_view name) {
  category_ = category;
  name_ = name;
  start_ = Clock::now();
}

void Span::finish() { recorder_->complete(category_, std::move(name_), start_, Clock::now(), args_); }

Merged merge_folder(const std::string& dir, std::string out) {
  namespace fs = std::filesystem;
  const auto files = rank_files({fs::path(dir) / "trace", fs::path(dir)});
  if (files.empty()) fail<IoError>("no timelines (rank-<R>.json) in {}/trace or {}", dir, dir);
  Merged m;
  m.path = out.empty() ? (fs::path(dir) / "trace.json").string() : out;
  nlohmann::json events = nlohmann::json::array();
  for (const auto& [rank, path] : files) {
    std::ifstream in(path);
    auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array())
      fail<IoError>("{}: not a Chrome trace", path.string());
    for (auto& e : j["traceEvents"]) events.push_back(std::move(e));
    m.ranks.push_back(rank);
  }
  m.events = events.size();
  AtomicFile f(m.path);
  f.write(nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump());
  f.commit();
  return m;
}

}  // namespace braid::trace
