// The trainer's timeline (train.trace; docs/reliability.md, "Timeline"): while
// one is open, this rank's spans (step phases, data waits, collectives,
// parameter-server exchanges, waits on peers) are recorded; close() writes
// them to <out_dir>/trace/rank-<R>.json, and after a successful run world rank
// 0 merges every rank's file into <out_dir>/trace.json. A timeline destroyed
// without close() (training threw) still writes this rank's file.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "braid/base/trace.h"

namespace braid::train {

class Timeline {
 public:
  // Off (records nothing, costs nothing) when `out_dir` is empty.
  Timeline(const std::string& out_dir, int rank);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  bool on() const { return recorder_ != nullptr; }
  trace::Recorder* recorder() { return recorder_.get(); }
  // Writes this rank's file; then `barrier()` (every rank has written), and
  // rank 0 merges. Returns the merged file's path on rank 0, else "".
  std::string close(const std::function<void()>& barrier);

 private:
  void write_own();
  std::string out_dir_;
  int rank_;
  std::unique_ptr<trace::Recorder> recorder_;
  std::optional<trace::Session> session_;
  bool written_ = false;
};

}  // namespace braid::train
