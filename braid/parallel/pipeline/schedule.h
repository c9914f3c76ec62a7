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
//   interleaved (Megatron-LM's interleaved 1F1B, Narayanan et al. 2021) each
//          rank holds V chunks of the model, rank p chunks p, p + P, ...
//          (virtual stage c * P + p); micro-batches go round in groups of P,
//          chunk by chunk: the bubble shrinks to (P - 1) / (V M) of the work
//          at the price of V times the messages. M must be a multiple of P.
//   zero_bubble (ZB-H1, Qi et al. 2024) each backward split into B (the
//          gradient of the stage's input, which the previous stage waits for)
//          and W (the weights' gradients, which nobody waits for); stage s
//          runs 1F1B's order on B and lets W trail B by s micro-batches, so the
//          W's fill the cool-down: bubble (P - 1)(F + B - W) instead of
//          (P - 1)(F + B + W), at most min(P, M) micro-batches alive on any
//          stage, 1F1B's peak (stage 0's).
//
// gpipe and 1f1b have the ideal bubble (P - 1) / (M + P - 1) of the step.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace braid::parallel::pipeline {

enum class Schedule { gpipe, one_f_one_b, interleaved, zero_bubble };

// "gpipe" | "1f1b" | "interleaved" | "zero_bubble"; ConfigError otherwise.
Schedule parse_schedule(std::string_view name);
std::string_view name(Schedule s);

// Whether the schedule splits backwards into B (input gradient) and W
// (weight gradients).
bool splits_backward(Schedule s);

// ConfigError (one line naming the keys) when `schedule` cannot run P stages
// of `chunks` chunks each over M micro-batches.
void check_schedule(Schedule schedule, int stages, int chunks, int microbatches);

struct Action {
  // backward: the whole backward, or only the input gradient (B) where the
  // schedule splits it; weight: the weights' gradients (W) of a split backward.
  enum Kind { forward, backward, weight } kind;
  int microbatch;
  int chunk = 0;  // which of the rank's chunks (interleaved), else 0
  bool operator==(const Action&) const = default;
};

// The actions of stage `stage` of `stages` for `microbatches` micro-batches
// (`chunks` per rank: interleaved only).
std::vector<Action> actions(Schedule schedule, int stages, int stage, int microbatches, int chunks = 1);

// Empty when `order` is a valid step for one stage: every (micro-batch,
// chunk) forwarded once, then backwarded once, then (where the order has W
// actions) its weight gradients once, each kind of each chunk in micro-batch
// order; else what is wrong.
std::string check_actions(const std::vector<Action>& order, int microbatches);

// Most micro-batch chunks whose forward ran and whose backward has not (the
// W, where the order splits backwards): activations held.
int max_live(const std::vector<Action>& order);

// "F0 F1 B0 F2 B1 B2"; with chunks "F0.0 F1.0 F0.1 ..." (micro-batch.chunk).
std::string to_string(const std::vector<Action>& order);

// Each action's duration for a timeline: per chunk of a rank, in any unit.
// `backward` is the whole backward, or B's share where the schedule splits.
struct Costs {
  double forward = 1, backward = 2, weight = 0;
  double transfer = 0;  // an activation or gradient between ranks
};

struct Timed {
  Action action;
  double start = 0, end = 0;
};

// Every rank's actions placed in time: each runs once its rank is free and
// what it receives has arrived (the forward of a virtual stage after the one
// before, a backward after the one after). Error when the ranks' orders
// deadlock. With `splits_backward`, a B costs costs.backward and a W
// costs.weight.
std::vector<std::vector<Timed>> timeline(Schedule schedule, int stages, int microbatches, int chunks,
                                         const Costs& costs);

struct Bubble {
  double makespan = 0;  // the step, first start to last end
  double busy = 0;      // work of one rank (every rank has the same)
  double idle = 0;      // makespan - busy, on the rank that idles most
  double fraction() const { return makespan > 0 ? idle / makespan : 0; }
  double ratio() const { return busy > 0 ? idle / busy : 0; }  // Megatron's bubble: idle over work
};
Bubble bubble(const std::vector<std::vector<Timed>>& timeline);

// The idle time over the work of one rank that the schedule's definition
// gives for costs F, B (whole backward, or B's share) and W per chunk:
// gpipe, 1f1b (P-1)/M; interleaved (P-1)/(V M); zero_bubble
// (P-1)(F+B-W) / (M (F+B+W)).
double bubble_ratio_formula(Schedule schedule, int stages, int microbatches, int chunks, const Costs& costs);

// The timeline as text, one line per rank, one column per `slot` of time:
// "F3" where micro-batch 3's forward starts, '.' idle; chunks as "F3.1".
std::string timeline_text(const std::vector<std::vector<Timed>>& timeline, double slot);

}  // namespace braid::parallel::pipeline
