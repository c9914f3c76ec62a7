#include "braid/train/timeline.h"

#include <fmt/format.h>

#include "braid/base/log.h"

namespace braid::train {

Timeline::Timeline(const std::string& out_dir, int rank) : out_dir_(out_dir), rank_(rank) {
  if (out_dir_.empty()) return;
  recorder_ = std::make_unique<trace::Recorder>(rank, fmt::format("rank {}", rank));
  session_.emplace(recorder_.get());
}

void Timeline::write_own() {
  if (!recorder_ || written_) return;
  written_ = true;
  session_.reset();  // nothing records into a file already written
  recorder_->write(fmt::format("{}/trace/rank-{}.json", out_dir_, rank_));
}

std::string Timeline::close(const std::function<void()>& barrier) {
  if (!recorder_) return "";
  write_own();
  barrier();
  if (rank_ != 0) return "";
  return trace::merge_folder(out_dir_).path;
}

Timeline::~Timeline() {
  try {
    write_own();
  } catch (const std::exception& e) {
    // Training already failed; losing its timeline must not hide why.
    logging::warn("could not write the timeline: {}", e.what());
  }
}

}  // namespace braid::train
