// One member of a population-based training (pbt.h): a Callback that, every
// `interval` examples its Trainer trains, scores the model on a validation
// loader, saves a checkpoint, publishes its report on the board, and exploits
// and explores by pbt.h's rule: loading the chosen member's checkpoint into
// the trainer and applying the perturbed hyper-parameters (the learning rate
// as a factor on the schedule, momentum and weight decay on the optimizer,
// the batch size from the next epoch). Each round is one JSON line in the
// lineage file. StoreBoard shares reports through the job's store, so the
// members of `braid pbt` need no barrier.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "braid/comm/store/store.h"
#include "braid/data/loader.h"
#include "braid/train/pbt.h"
#include "braid/train/trainer.h"

namespace braid::train {

// Reports under "pbt/report/<member>" in the rendezvous store; latest() asks
// for each of the `population` members without waiting.
class StoreBoard final : public Board {
 public:
  StoreBoard(comm::Store store, int population);
  void publish(const Report& report) override;
  std::vector<Report> latest() override;

 private:
  comm::Store store_;
  int population_;
};

struct MemberOptions {
  int member = 0;
  PbtOptions pbt{};
  int64_t interval = 10000;    // examples between rounds
  double base_lr = 0.01;       // the learning rate the trainer's schedule was built with
  std::string lineage_path{};  // JSON Lines, one per round; "" = none
  uint64_t seed = 0;           // the member's draws (which top member, which direction)
  std::function<void(const std::string&)> say{};  // progress lines; null = quiet
};

// One round's record (also a lineage line).
struct Round {
  int64_t round = 0;
  int64_t step = 0, examples = 0;
  double score = 0;
  bool exploit = false;
  int source = -1;  // the member copied
  double source_score = 0;
  Hyper hyper_before{}, hyper_after{};
  std::string note{};  // why an exploit did not happen
};
nlohmann::json to_json(const Round& r);

class PbtMember final : public Callback {
 public:
  // `trainer` and `board` outlive the member; `validation` scores it;
  // `start` holds the hyper-parameters the trainer was built with.
  PbtMember(Trainer& trainer, Board& board, std::shared_ptr<data::Loader> validation, MemberOptions options,
            Hyper start);

  void on_step(const StepMetrics& m) override;
  // A round now (also called by on_step every `interval` examples).
  void round(int64_t epoch, int64_t batch_in_epoch, int64_t batches_per_epoch);

  const Hyper& hyper() const { return hyper_; }
  const std::vector<Round>& rounds() const { return rounds_; }
  // Validation top-1 of the current weights.
  double score();

 private:
  void apply(const Hyper& hyper);

  Trainer& trainer_;
  Board& board_;
  std::shared_ptr<data::Loader> validation_;
  MemberOptions o_;
  Hyper hyper_;
  Generator gen_;
  int64_t examples_ = 0, next_round_ = 0;
  std::vector<Round> rounds_;
};

}  // namespace braid::train
