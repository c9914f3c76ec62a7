#include "braid/parallel/pipeline/schedule.h"

#include <algorithm>

#include "braid/base/error.h"

namespace braid::parallel::pipeline {

Schedule parse_schedule(std::string_view name) {
  if (name == "gpipe") return Schedule::gpipe;
  if (name == "1f1b") return Schedule::one_f_one_b;
  fail<ConfigError>("parallel.schedule = {} is not a pipeline schedule (known: gpipe, 1f1b)", name);
}

std::string_view name(Schedule s) { return s == Schedule::gpipe ? "gpipe" : "1f1b"; }

std::vector<Action> actions(Schedule schedule, int stages, int stage, int microbatches) {
  if (stages < 1 || stage < 0 || stage >= stages || microbatches < 1) {
    fail<ValueError>("pipeline schedule: stage {} of {} with {} micro-batches", stage, stages, microbatches);
  }
  std::vector<Action> out;
  if (schedule == Schedule::gpipe) {
    for (int i = 0; i < microbatches; ++i) out.push_back({Action::forward, i});
    for (int i = 0; i < microbatches; ++i) out.push_back({Action::backward, i});
    return out;
  }
  const int warmup = std::min(stages - stage - 1, microbatches);
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back({Action::forward, f});
  for (; f < microbatches; ++f, ++b) {
    out.push_back({Action::forward, f});
    out.push_back({Action::backward, b});
  }
  for (; b < microbatches; ++b) out.push_back({Action::backward, b});
  return out;
}

std::string check_actions(const std::vector<Action>& order, int microbatches) {
  int next_f = 0, next_b = 0;
  for (const Action& a : order) {
    if (a.kind == Action::forward) {
      if (a.microbatch != next_f) return "forward of micro-batch " + std::to_string(a.microbatch) + " out of order";
      ++next_f;
    } else {
      if (a.microbatch != next_b) return "backward of micro-batch " + std::to_string(a.microbatch) + " out of order";
      if (a.microbatch >= next_f) return "backward of micro-batch " + std::to_string(a.microbatch) + " before its forward";
      ++next_b;
    }
  }
  if (next_f != microbatches || next_b != microbatches) {
    return std::to_string(next_f) + " forwards and " + std::to_string(next_b) + " backwards for " +
           std::to_string(microbatches) + " micro-batches";
  }
  return {};
}

int max_live(const std::vector<Action>& order) {
  int live = 0, most = 0;
  for (const Action& a : order) {
    live += a.kind == Action::forward ? 1 : -1;
    most = std::max(most, live);
  }
  return most;
}

std::string to_string(const std::vector<Action>& order) {
  std::string s;
  for (const Action& a : order) {
    if (!s.empty()) s += ' ';
    s += (a.kind == Action::forward ? 'F' : 'B') + std::to_string(a.microbatch);
  }
  return s;
}

}  // namespace braid::parallel::pipeline
