// Pipeline schedules: the order in which one stage runs the forwards and
// backwards of a step's micro-batches (pure functions; the stage runner in
// stage.h executes them).
//
//   gpipe  (Huang et al. 2019) every forward, then every backward: all M
//          micro-batches' activations are alive at once.
//   1f1b   (PipeDream-flush, Narayanan et al. 2021) stage s of P first runs
//          min(P - s - 1, M) forwards (warm-up), then alternates one forward
//          and one backward, then runs the remaining backwards (cool-down):
//          at most min(P - s, M) micro-batches alive, the same bubble as GPipe.
//
// Both have the ideal bubble (P - 1) / (M + P - 1) of the step.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace braid::parallel::pipeline {

enum class Schedule { gpipe, one_f_one_b };

// "gpipe" | "1f1b"; ConfigError otherwise.
Schedule parse_schedule(std::string_view name);
std::string_view name(Schedule s);

struct Action {
  enum Kind { forward, backward } kind;
  int microbatch;
  bool operator==(const Action&) const = default;
};

// The actions of stage `stage` of `stages` for `microbatches` micro-batches.
std::vector<Action> actions(Schedule schedule, int stages, int stage, int microbatches);

// Empty when `order` is a valid step for one stage: every micro-batch
// forwarded once, then backwarded once, each kind in micro-batch order;
// else what is wrong.
std::string check_actions(const std::vector<Action>& order, int microbatches);

// Most micro-batches whose forward ran and backward has not (activations held).
int max_live(const std::vector<Action>& order);

// "F0 F1 B0 F2 B1 B2"
std::string to_string(const std::vector<Action>& order);

}  // namespace braid::parallel::pipeline
