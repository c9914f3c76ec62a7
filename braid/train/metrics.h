// Training metrics to files: JSON Lines (one object per event, for scripts)
// and TensorBoard event files (for curves), both under train.out_dir.
//
// metrics.jsonl records, one per line, all with "event", "time" (Unix seconds):
//   {"event":"train","step","epoch","loss","lr","samples_per_s","step_ms"}
//     plus, with parallel.codec, "codec": {"codec","raw_bytes","wire_bytes",
//     "ratio","encode_ms","decode_ms","calls"} summed over the window, and
//     for sequence models "tokens_per_s" (the job's) and "mfu" (a fraction)
//   {"event":"eval","step","epoch","loss","top1","top5","examples","seconds"}
//     plus "ppl" (exp of the per-token loss) for sequence models
//   {"event":"end","steps","epochs","train_seconds","samples_per_s","final_loss"}
//     plus "tokens_per_s" and "mfu" for sequence models
//   {"event":"straggler","step","rank","own_ms","others_median_ms","ratio","windows","window_steps","all_ms"}
// TensorBoard scalars: train/loss, train/lr, train/samples_per_s,
// train/step_ms, eval/loss, eval/top1, eval/top5, against the step (and
// train/tokens_per_s, train/mfu, eval/ppl for sequence models).
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "braid/train/callbacks.h"
#include "braid/train/tensorboard.h"

namespace braid::train {

// Appends one JSON object per line and flushes it, so a crash loses at most
// the record being written and `tail -f` follows the run.
class JsonlWriter {
 public:
  // Opens `path` for appending (a resumed run continues the same file).
  explicit JsonlWriter(const std::string& path);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

struct MetricsOptions {
  std::string out_dir;       // metrics.jsonl and the TensorBoard file go here
  bool jsonl = true;
  bool tensorboard = true;
};

// The trainer callback that records on_log / on_eval / on_train_end.
class MetricsLogger final : public Callback {
 public:
  explicit MetricsLogger(const MetricsOptions& options);
  void on_log(const StepMetrics& m) override;
  void on_eval(const EvalMetrics& m) override;
  void on_train_end(const TrainSummary& s) override;
  void on_straggler(const StragglerReport& r) override;
  void on_membership(const nlohmann::json& change) override;

  const JsonlWriter* jsonl() const { return jsonl_.get(); }
  const TensorBoardWriter* tensorboard() const { return tb_.get(); }

 private:
  std::unique_ptr<JsonlWriter> jsonl_;
  std::unique_ptr<TensorBoardWriter> tb_;
};

// Wall-clock Unix time in seconds.
double unix_seconds();

}  // namespace braid::train
