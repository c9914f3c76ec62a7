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

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace braid::trace {

using Clock = std::chrono::steady_clock;

class Recorder {
 public:
  // `pid` is the row group in the merged trace (the rank); `label` names it.
  Recorder(int pid, std::string label);

  // A complete event ("ph":"X") on the calling thread.
  void complete(const char* category, std::string name, Clock::time_point start, Clock::time_point end,
                nlohmann::json args = nullptr);
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
    nlohmann::json args;
  };
  int thread_id();  // small per-thread number, named after the thread (mu_ held)

  int pid_;
  std::string label_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
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
  Span& arg(const char* key, T&& value) {
    if (recorder_) args_[key] = std::forward<T>(value);
    return *this;
  }

 private:
  void start(const char* category, std::string_view name);
  void finish();
  Recorder* recorder_;
  const char* category_ = nullptr;
  std::string name_;
  Clock::time_point start_;
  nlohmann::json args_;
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
