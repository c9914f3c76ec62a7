// What one timeline span costs on the thread that records it, the figure
// behind bench/dp/trace_cost.py's step times: a span with tracing off, with
// tracing on and no arguments, and with the five arguments a collective's span
// carries. build/bin/trace_span_cost [SPANS] prints nanoseconds per span (the
// median of five rounds; each round records into a fresh recorder, so its
// growth is part of the figure, as it is in a run).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "braid/base/median.h"
#include "braid/base/trace.h"

namespace {

using braid::trace::Span;

double ns_per_span(int mode, int spans) {
  braid::trace::Recorder recorder(0, "rank 0");
  std::optional<braid::trace::Session> session;
  if (mode > 0) session.emplace(&recorder);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < spans; ++i) {
    Span span("comm", "allreduce");
    if (span && mode == 2) {
      span.arg("seq", i).arg("bytes", 1 << 20).arg("comm", 3).arg("ranks", 2).arg("algorithm", "ring");
    }
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / spans;
}

}  // namespace

int main(int argc, char** argv) {
  const int spans = argc > 1 ? std::atoi(argv[1]) : 100000;
  const char* what[] = {"tracing off", "tracing on, no arguments", "tracing on, a collective's 5 arguments"};
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<double> rounds;
    for (int r = 0; r < 5; ++r) rounds.push_back(ns_per_span(mode, spans));
    std::printf("%-40s %8.1f ns per span\n", what[mode], braid::upper_median(std::move(rounds)));
  }
}
