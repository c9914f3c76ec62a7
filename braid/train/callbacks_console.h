// The trainer's console output: a progress bar redrawn in place on a
// terminal, or plain periodic lines (logs, CI, pipes), plus evaluation and
// checkpoint notes and a final summary.
#pragma once

#include <cstdio>
#include <string>

#include "braid/train/callbacks.h"

namespace braid::train {

enum class ConsoleMode { bar, lines, off };

// "auto" -> bar when `out` is a terminal, else lines; "bar", "lines", "off".
ConsoleMode console_mode(const std::string& setting, std::FILE* out);

class ConsoleReporter final : public Callback {
 public:
  explicit ConsoleReporter(ConsoleMode mode, std::FILE* out = stdout) : mode_(mode), out_(out) {}
  void on_train_begin(int64_t start_step, int64_t total_steps) override;
  void on_step(const StepMetrics& m) override;
  void on_log(const StepMetrics& m) override;
  void on_eval(const EvalMetrics& m) override;
  void on_checkpoint(const std::string& stem, int64_t step) override;
  void on_message(const std::string& text) override;
  void on_train_end(const TrainSummary& s) override;

 private:
  void end_bar();
  ConsoleMode mode_;
  std::FILE* out_;
  bool bar_open_ = false;
  double last_draw_ = -1;  // seconds, monotonic
  double loss_ema_ = -1;   // smoothed loss shown on the bar
};

}  // namespace braid::train
