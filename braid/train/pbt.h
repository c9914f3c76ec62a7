// Population-based training (Jaderberg et al., 2017): a population of
// trainings runs side by side; every so often each member, on its own
// schedule (no barrier), reports its validation score and looks at the
// others' latest reports. A member in the bottom fraction copies the weights
// and hyper-parameters of a member drawn from the top fraction (exploit) and
// perturbs the copied hyper-parameters (explore); the rest go on. The search
// over hyper-parameters thus costs no more than the population's trainings.
//
// This file is the decision logic, free of any trainer: hyper-parameters as
// named numbers, reports, the board members share them on, and the
// exploit/explore rule. pbt_member.h drives a Trainer with it; `braid pbt`
// (docs/training.md, "Population-based training") runs one member per rank.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "braid/base/rng.h"

namespace braid::train {

// Hyper-parameters by name: "lr", "momentum", "weight_decay", "batch_size".
using Hyper = std::map<std::string, double>;

// Where a searched hyper-parameter may go: log-uniform between lo and hi
// (lo > 0) for scales like the learning rate, uniform otherwise; integer
// ones (batch_size) are rounded to powers of two.
struct HyperRange {
  double lo = 0, hi = 0;
  bool log = true;
  bool power_of_two = false;
};
using HyperSpace = std::map<std::string, HyperRange>;

struct PbtOptions {
  HyperSpace space{};       // the searched hyper-parameters
  double fraction = 0.25;   // truncation: bottom and top share of the population
  double perturb = 1.2;     // explore: each value times perturb or 1 / perturb
  bool exploit = true;      // false: independent runs from random starts (the baseline)
};

// What a member tells the others after a round.
struct Report {
  int member = 0;
  int64_t round = 0;
  int64_t examples = 0;     // examples trained so far
  double score = 0;         // higher is better (validation top-1)
  Hyper hyper{};
  std::string checkpoint{}; // where its weights of this round are
};
nlohmann::json to_json(const Report& r);
Report report_from_json(const nlohmann::json& j);

// Shared latest reports, one per member. Reads never wait for members that
// have not reported: members move at their own pace.
class Board {
 public:
  virtual ~Board() = default;
  virtual void publish(const Report& report) = 0;
  // The latest report of every member that has published one.
  virtual std::vector<Report> latest() = 0;
};

// A board in one process (tests; members as threads).
class LocalBoard final : public Board {
 public:
  void publish(const Report& report) override;
  std::vector<Report> latest() override;

 private:
  std::mutex mu_;
  std::map<int, Report> reports_;
};

// Draws a member's starting hyper-parameters: each searched one from its
// range, the others from `fixed`.
Hyper sample_hyper(const HyperSpace& space, const Hyper& fixed, Generator& gen);
// Explore: each searched value times `factor` or 1 / `factor` (a fair coin),
// kept inside its range.
Hyper perturb(const Hyper& hyper, const HyperSpace& space, double factor, Generator& gen);

struct Decision {
  bool exploit = false;
  Report source{};  // the member copied (when exploit)
  Hyper hyper{};    // the hyper-parameters to go on with
};
// Truncation selection over the reports (`mine` counted in place of any
// older report of the same member): when `mine` ranks in the bottom
// ceil(n * fraction) of the n members known, copy one of the top
// ceil(n * fraction) drawn at random and perturb its hyper-parameters;
// otherwise keep going. Fewer than two members known: keep going.
Decision decide(const Report& mine, const std::vector<Report>& reports, const PbtOptions& options, Generator& gen);

// "0.001,0.3" -> {0.001, 0.3}; "" -> nullopt. ConfigError naming `key`.
std::optional<HyperRange> parse_range(const std::string& text, const std::string& key);

}  // namespace braid::train
