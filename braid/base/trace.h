// The timeline of one process (docs/reliability.md, "Timeline"): spans of
// named work per thread, written as Chrome trace-event JSON that Perfetto and
// chrome://tracing open; trace_merge.h joins the ranks' files into one.
//
// A Recorder is a value its owner (the trainer) creates; while a
// trace::Session installs it, the layers below record into it through
// trace::active(). That one process-wide pointer is deliberate: the timeline
// is one per process, like the log, and the code that records (collectives,
// parameter-server exchanges, the data loader) runs on threads that no
// options struct reaches. With no session installed every span costs one
// relaxed atomic load and a branch.
//
//   trace::Span span("comm", "allreduce #17");   // records when it goes out of scope
//   span.arg("bytes", 4 << 20);
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace braid::trace {

using Clock = std::chrono::steady_clock;

// One argument of a span, a plain value. Keys and text are not copied: they
// must live as long as the program (literals, enums' names).
struct Arg {
  enum class Kind : uint8_t { integer, real, boolean, text };
  const char* key;
  Kind kind;
  uint32_t length;  // text
  union {
    int64_t i;
    double d;
    bool b;
    const char* text;
  };
  void put(nlohmann::json& object) const;  // object[key] = the value
};

// A span's arguments, kept raw until the trace is written: setting one
// allocates nothing and recording copies only the ones set (a JSON object per
// span cost more than the rest of the span). Setting a key again replaces
// its value.
class Args {
 public:
  static constexpr int kCapacity = 8;

  template <class T>
  void set(const char* key, const T& value) {
    Arg& a = find_or_add(key);
    if constexpr (std::is_same_v<T, bool>) a.kind = Arg::Kind::boolean, a.b = value;
    else if constexpr (std::is_integral_v<T>) a.kind = Arg::Kind::integer, a.i = static_cast<int64_t>(value);
    else if constexpr (std::is_floating_point_v<T>) a.kind = Arg::Kind::real, a.d = static_cast<double>(value);
    else {
      static_assert(!std::is_same_v<T, std::string>, "a span keeps text by reference: pass static text");
      const std::string_view text(value);
      a.kind = Arg::Kind::text, a.text = text.data(), a.length = static_cast<uint32_t>(text.size());
    }
  }
  std::span<const Arg> items() const { return {items_.data(), static_cast<size_t>(size_)}; }
  bool empty() const { return size_ == 0; }
  nlohmann::json to_json() const;

 private:
  Arg& find_or_add(const char* key);
  int size_ = 0;
  std::array<Arg, kCapacity> items_;
};

class Recorder {
 public:
  // `pid` is the row group in the merged trace (the rank); `label` names it.
  Recorder(int pid, std::string label);

  // A complete event ("ph":"X") on the calling thread.
  void complete(const char* category, std::string name, Clock::time_point start, Clock::time_point end,
                const Args& args = {});
  // An instant event ("ph":"i"): a moment worth marking (a failure, a straggler).
  void instant(const char* category, std::string name, nlohmann::json args = nullptr);
  // {"traceEvents":[...], "displayTimeUnit":"ms"} with process and thread names.
  nlohmann::json to_json() const;
  // Atomically (base/atomic_file.h); creates the folder.
  void write(const std::string& path) const;
  size_t size() const;

 private:
  struct Event {
    const char* category;
    std::string name;
    char phase;
    int tid;
    int64_t ts_us, dur_us;
    uint32_t arg_begin, arg_count;  // a span's, in args_
    nlohmann::json detail;          // an instant's (rare: a straggler's figures)
  };
  int thread_id();  // small per-thread number, named after the thread (mu_ held)

  int pid_;
  std::string label_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::vector<Arg> args_;
  std::vector<std::pair<int, std::string>> threads_;  // tid -> name
};

// The installed recorder, or null (tracing off).
Recorder* active();

// Installs a recorder for its lifetime (one at a time per process).
class Session {
 public:
  explicit Session(Recorder* recorder);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  Recorder* previous_;
};

// Records [construction, destruction) on the calling thread, if a recorder is
// active at construction. Arguments are kept only then.
class Span {
 public:
  Span(const char* category, std::string_view name) : recorder_(active()) {
    if (recorder_) start(category, name);
  }
  ~Span() {
    if (recorder_) finish();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  explicit operator bool() const { return recorder_ != nullptr; }
  template <class T>
  Span& arg(const char* key, const T& value) {
    if (recorder_) args_.set(key, value);
    return *this;
  }

 private:
  void start(const char* category, std::string_view name);
  void finish();
  Recorder* recorder_;
  const char* category_ = nullptr;
  std::string name_;
  Clock::time_point start_;
  Args args_;
};

// Joins the timelines rank-<R>.json found in `dir` (or `dir`/trace) into one
// trace at `out` (default: `dir`/trace.json). Throws IoError when there are
// none or one is not a trace.
struct Merged {
  std::string path;
  size_t events = 0;
  std::vector<int> ranks;
};
Merged merge_folder(const std::string& dir, std::string out = {});

}  // namespace braid::trace
