#include "braid/parallel/pipeline/schedule.h"

#include <algorithm>
#include <map>

#include "braid/base/error.h"

namespace braid::parallel::pipeline {

Schedule parse_schedule(std::string_view name) {
  if (name == "gpipe") return Schedule::gpipe;
  if (name == "1f1b") return Schedule::one_f_one_b;
  if (name == "interleaved") return Schedule::interleaved;
  if (name == "zero_bubble") return Schedule::zero_bubble;
  fail<ConfigError>("parallel.schedule = {} is not a pipeline schedule (known: gpipe, 1f1b, interleaved, zero_bubble)",
                    name);
}

std::string_view name(Schedule s) {
  switch (s) {
    case Schedule::gpipe: return "gpipe";
    case Schedule::one_f_one_b: return "1f1b";
    case Schedule::interleaved: return "interleaved";
    case Schedule::zero_bubble: return "zero_bubble";
  }
  return "?";
}

bool splits_backward(Schedule s) { return s == Schedule::zero_bubble; }

void check_schedule(Schedule schedule, int stages, int chunks, int microbatches) {
  if (schedule == Schedule::interleaved) {
    if (chunks < 2) {
      fail<ConfigError>("parallel.schedule = interleaved needs parallel.virtual_stages >= 2 chunks per rank, got {}",
                        chunks);
    }
    if (microbatches % stages != 0) {
      fail<ConfigError>("parallel.schedule = interleaved sends micro-batches round in groups of parallel.pipeline = "
                        "{}: parallel.microbatches = {} must be a multiple of it",
                        stages, microbatches);
    }
  } else if (chunks != 1) {
    fail<ConfigError>("parallel.virtual_stages = {} needs parallel.schedule = interleaved (got {})", chunks,
                      name(schedule));
  }
}

namespace {

// Megatron-LM's interleaved 1F1B (forward_backward_pipelining_with_interleaving):
// the k-th forward of a rank runs micro-batch (k / (P V)) P + k mod P on chunk
// (k mod P V) / P; the k-th backward the same micro-batch on chunk V - 1 minus
// that. Warm-up: 2 (P - p - 1) + (V - 1) P forwards (all when M = P).
std::vector<Action> interleaved(int stages, int stage, int microbatches, int chunks) {
  const int group = stages * chunks, total = microbatches * chunks;
  auto at = [&](int k, bool forward) {
    const int in_group = k % group;
    const int chunk = in_group / stages;
    const int micro = (k / group) * stages + in_group % stages;
    return Action{forward ? Action::forward : Action::backward, micro, forward ? chunk : chunks - 1 - chunk};
  };
  int warmup = microbatches == stages ? total : 2 * (stages - stage - 1) + (chunks - 1) * stages;
  warmup = std::min(warmup, total);
  std::vector<Action> out;
  for (int k = 0; k < warmup; ++k) out.push_back(at(k, true));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(at(warmup + k, true));
    out.push_back(at(k, false));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(at(k, false));
  return out;
}

// ZB-H1: 1F1B on forwards and input-gradient backwards (B), each W trailing
// its B by `stage` micro-batches: stage s holds at most (P - s - 1) + 1 + s = P
// micro-batches between forward and W, 1F1B's peak, and its last s W's fill
// the cool-down, where 1F1B's stage s waits for gradients.
std::vector<Action> zero_bubble(int stages, int stage, int microbatches) {
  const int warmup = std::min(stages - stage - 1, microbatches);
  const int lag = stage;
  std::vector<Action> out;
  int f = 0, b = 0, w = 0;
  auto backward = [&] {
    out.push_back({Action::backward, b++});
    if (b - w > lag) out.push_back({Action::weight, w++});
  };
  for (; f < warmup; ++f) out.push_back({Action::forward, f});
  while (f < microbatches) {
    out.push_back({Action::forward, f++});
    backward();
  }
  while (b < microbatches) backward();
  while (w < microbatches) out.push_back({Action::weight, w++});
  return out;
}

}  // namespace

std::vector<Action> actions(Schedule schedule, int stages, int stage, int microbatches, int chunks) {
  if (stages < 1 || stage < 0 || stage >= stages || microbatches < 1 || chunks < 1) {
    fail<ValueError>("pipeline schedule: stage {} of {} with {} micro-batches and {} chunks", stage, stages,
                     microbatches, chunks);
  }
  check_schedule(schedule, stages, chunks, microbatches);
  std::vector<Action> out;
  switch (schedule) {
    case Schedule::gpipe:
      for (int i = 0; i < microbatches; ++i) out.push_back({Action::forward, i});
      for (int i = 0; i < microbatches; ++i) out.push_back({Action::backward, i});
      return out;
    case Schedule::interleaved: return interleaved(stages, stage, microbatches, chunks);
    case Schedule::zero_bubble: return zero_bubble(stages, stage, microbatches);
    case Schedule::one_f_one_b: break;
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

namespace {

std::string label(const Action& a, bool chunks) {
  const char k = a.kind == Action::forward ? 'F' : a.kind == Action::backward ? 'B' : 'W';
  return k + std::to_string(a.microbatch) + (chunks ? "." + std::to_string(a.chunk) : "");
}

bool has_chunks(const std::vector<Action>& order) {
  return std::any_of(order.begin(), order.end(), [](const Action& a) { return a.chunk != 0; });
}

bool has_weight(const std::vector<Action>& order) {
  return std::any_of(order.begin(), order.end(), [](const Action& a) { return a.kind == Action::weight; });
}

}  // namespace

std::string check_actions(const std::vector<Action>& order, int microbatches) {
  int chunks = 1;
  for (const Action& a : order) chunks = std::max(chunks, a.chunk + 1);
  const bool split = has_weight(order);
  const bool named = has_chunks(order);
  // next[kind][chunk]: the micro-batch that kind of action of that chunk must take next.
  std::vector<std::vector<int>> next(3, std::vector<int>(static_cast<size_t>(chunks), 0));
  for (const Action& a : order) {
    if (a.chunk < 0) return "chunk " + std::to_string(a.chunk);
    int& n = next[static_cast<size_t>(a.kind)][static_cast<size_t>(a.chunk)];
    if (a.microbatch != n) return label(a, named) + " out of order";
    if (a.kind == Action::backward && a.microbatch >= next[Action::forward][static_cast<size_t>(a.chunk)]) {
      return label(a, named) + " before its forward";
    }
    if (a.kind == Action::weight && a.microbatch >= next[Action::backward][static_cast<size_t>(a.chunk)]) {
      return label(a, named) + " before its backward";
    }
    ++n;
  }
  for (int c = 0; c < chunks; ++c) {
    for (int k = 0; k < (split ? 3 : 2); ++k) {
      if (next[static_cast<size_t>(k)][static_cast<size_t>(c)] != microbatches) {
        return fmt::format("chunk {}: {} forwards, {} backwards{} for {} micro-batches", c,
                           next[0][static_cast<size_t>(c)], next[1][static_cast<size_t>(c)],
                           split ? fmt::format(" and {} W", next[2][static_cast<size_t>(c)]) : "", microbatches);
      }
    }
  }
  return {};
}

int max_live(const std::vector<Action>& order) {
  const Action::Kind frees = has_weight(order) ? Action::weight : Action::backward;
  int live = 0, most = 0;
  for (const Action& a : order) {
    if (a.kind == Action::forward) ++live;
    if (a.kind == frees) --live;
    most = std::max(most, live);
  }
  return most;
}

std::string to_string(const std::vector<Action>& order) {
  const bool named = has_chunks(order);
  std::string s;
  for (const Action& a : order) {
    if (!s.empty()) s += ' ';
    s += label(a, named);
  }
  return s;
}

std::vector<std::vector<Timed>> timeline(Schedule schedule, int stages, int microbatches, int chunks,
                                         const Costs& costs) {
  const int P = stages, V = chunks, M = microbatches;
  std::vector<std::vector<Action>> order(static_cast<size_t>(P));
  for (int p = 0; p < P; ++p) order[static_cast<size_t>(p)] = actions(schedule, P, p, M, V);
  // done[{kind, virtual stage, micro-batch}]: when that action ended.
  std::map<std::tuple<int, int, int>, double> done;
  std::vector<std::vector<Timed>> out(static_cast<size_t>(P));
  std::vector<size_t> next(static_cast<size_t>(P), 0);
  std::vector<double> free_at(static_cast<size_t>(P), 0);
  const int last = P * V - 1;
  for (bool progress = true; progress;) {
    progress = false;
    for (int p = 0; p < P; ++p) {
      auto& ops = order[static_cast<size_t>(p)];
      size_t& i = next[static_cast<size_t>(p)];
      while (i < ops.size()) {
        const Action& a = ops[i];
        const int v = a.chunk * P + p;  // virtual stage
        double ready = free_at[static_cast<size_t>(p)];
        // What this action receives: the forward of the virtual stage before,
        // the backward of the one after (none for W, which stays on the rank).
        std::tuple<int, int, int> need{-1, 0, 0};
        if (a.kind == Action::forward && v > 0) need = {Action::forward, v - 1, a.microbatch};
        if (a.kind == Action::backward && v < last) need = {Action::backward, v + 1, a.microbatch};
        if (std::get<0>(need) >= 0) {
          auto it = done.find(need);
          if (it == done.end()) break;
          ready = std::max(ready, it->second + costs.transfer);
        }
        const double cost = a.kind == Action::forward ? costs.forward
                            : a.kind == Action::backward ? costs.backward
                                                         : costs.weight;
        out[static_cast<size_t>(p)].push_back({a, ready, ready + cost});
        free_at[static_cast<size_t>(p)] = ready + cost;
        done[{a.kind, v, a.microbatch}] = ready + cost;
        ++i;
        progress = true;
      }
    }
  }
  for (int p = 0; p < P; ++p) {
    const auto& ops = order[static_cast<size_t>(p)];
    if (next[static_cast<size_t>(p)] < ops.size()) {
      fail<Error>("pipeline schedule {} deadlocks: stage {} of {} waits at {} ({} micro-batches, {} chunks)",
                  name(schedule), p, P, label(ops[next[static_cast<size_t>(p)]], V > 1), M, V);
    }
  }
  return out;
}

Bubble bubble(const std::vector<std::vector<Timed>>& tl) {
  Bubble b;
  double first = 0, last = 0;
  bool any = false;
  for (const auto& rank : tl) {
    for (const Timed& t : rank) {
      first = any ? std::min(first, t.start) : t.start;
      last = any ? std::max(last, t.end) : t.end;
      any = true;
    }
  }
  b.makespan = last - first;
  double least_busy = b.makespan;
  for (const auto& rank : tl) {
    double busy = 0;
    for (const Timed& t : rank) busy += t.end - t.start;
    least_busy = std::min(least_busy, busy);
    b.busy = std::max(b.busy, busy);
  }
  b.idle = b.makespan - least_busy;
  return b;
}

double bubble_ratio_formula(Schedule schedule, int stages, int microbatches, int chunks, const Costs& c) {
  const double P = stages, M = microbatches, V = chunks;
  switch (schedule) {
    case Schedule::interleaved: return (P - 1) / (V * M);
    case Schedule::zero_bubble:
      return (P - 1) * (c.forward + c.backward - c.weight) / (M * (c.forward + c.backward + c.weight));
    default: return (P - 1) / M;
  }
}

std::string timeline_text(const std::vector<std::vector<Timed>>& tl, double slot) {
  if (slot <= 0) fail<ValueError>("timeline_text: slot {} must be > 0", slot);
  bool chunks = false;
  double end = 0;
  for (const auto& rank : tl) {
    for (const Timed& t : rank) {
      chunks = chunks || t.action.chunk != 0;
      end = std::max(end, t.end);
    }
  }
  size_t width = 2;
  for (const auto& rank : tl) {
    for (const Timed& t : rank) width = std::max(width, label(t.action, chunks).size());
  }
  const int slots = static_cast<int>(end / slot + 0.5);
  std::string s;
  for (size_t p = 0; p < tl.size(); ++p) {
    std::vector<std::string> cells(static_cast<size_t>(slots), ".");
    for (const Timed& t : tl[p]) {
      const int a = static_cast<int>(t.start / slot + 0.5), b = std::max(a + 1, static_cast<int>(t.end / slot + 0.5));
      for (int k = a; k < b && k < slots; ++k) cells[static_cast<size_t>(k)] = k == a ? label(t.action, chunks) : "-";
    }
    s += fmt::format("stage {:>2} |", p);
    for (const std::string& c : cells) s += fmt::format(" {:<{}}", c, width);
    s += '\n';
  }
  return s;
}

}  // namespace braid::parallel::pipeline
