#include "braid/train/pbt_member.h"

#include <cmath>
#include <fstream>

#include "braid/train/checkpoint.h"

namespace braid::train {

namespace {

std::string report_key(int member) { return fmt::format("pbt/report/{}", member); }

std::string describe(const Hyper& h) {
  std::string out;
  for (const auto& [name, v] : h) out += fmt::format("{}{} {:.4g}", out.empty() ? "" : ", ", name, v);
  return out;
}

}  // namespace

StoreBoard::StoreBoard(comm::Store store, int population) : store_(std::move(store)), population_(population) {
  if (population < 1) fail<ValueError>("StoreBoard: population must be >= 1, got {}", population);
}

void StoreBoard::publish(const Report& report) { store_.set(report_key(report.member), to_json(report).dump()); }

std::vector<Report> StoreBoard::latest() {
  std::vector<Report> out;
  for (int m = 0; m < population_; ++m) {
    const std::optional<std::string> text = store_.try_get(report_key(m), store_.deadline());
    if (!text) continue;  // not reported yet: members keep their own pace
    out.push_back(report_from_json(nlohmann::json::parse(*text)));
  }
  return out;
}

nlohmann::json to_json(const Round& r) {
  nlohmann::json j = {{"round", r.round},       {"step", r.step},
                      {"examples", r.examples}, {"score", r.score},
                      {"exploit", r.exploit},   {"hyper_before", r.hyper_before},
                      {"hyper_after", r.hyper_after}};
  if (r.exploit) j.update({{"source", r.source}, {"source_score", r.source_score}});
  if (!r.note.empty()) j["note"] = r.note;
  return j;
}

PbtMember::PbtMember(Trainer& trainer, Board& board, std::shared_ptr<data::Loader> validation, MemberOptions o,
                     Hyper start)
    : trainer_(trainer), board_(board), validation_(std::move(validation)), o_(std::move(o)),
      hyper_(std::move(start)), gen_(o_.seed, /*stream=*/0x9b7), next_round_(o_.interval) {
  if (!validation_) fail<ValueError>("PbtMember: a validation loader is required (data.validation examples)");
  if (o_.interval < 1) fail<ConfigError>("pbt.interval must be >= 1 example, got {}", o_.interval);
  if (!(o_.base_lr > 0)) fail<ValueError>("PbtMember: base_lr must be > 0, got {}", o_.base_lr);
  apply(hyper_);
}

double PbtMember::score() { return trainer_.evaluate(*validation_).top1; }

void PbtMember::on_step(const StepMetrics& m) {
  examples_ += m.examples;
  if (examples_ < next_round_) return;
  next_round_ = examples_ + o_.interval;
  round(m.epoch, m.batch, m.batches_per_epoch);
}

void PbtMember::round(int64_t epoch, int64_t batch_in_epoch, int64_t batches_per_epoch) {
  Round r{.round = static_cast<int64_t>(rounds_.size()) + 1, .step = trainer_.step(), .examples = examples_,
          .hyper_before = hyper_};
  r.score = score();
  const bool epoch_done = batch_in_epoch == batches_per_epoch;
  const std::string stem = trainer_.save(epoch_done ? epoch + 1 : epoch, epoch_done ? 0 : batch_in_epoch);
  const Report mine{.member = o_.member, .round = r.round, .examples = examples_, .score = r.score, .hyper = hyper_,
                    .checkpoint = stem};
  board_.publish(mine);
  const Decision d = decide(mine, board_.latest(), o_.pbt, gen_);
  if (d.exploit) {
    try {
      // The source may have pruned this checkpoint since it reported (it
      // keeps a few): then this round keeps its own weights.
      trainer_.load_state(load_checkpoint(d.source.checkpoint));
      apply(d.hyper);
      r.exploit = true;
      r.source = d.source.member;
      r.source_score = d.source.score;
    } catch (const Error& e) {
      r.note = fmt::format("could not load member {}'s checkpoint {}: {}", d.source.member, d.source.checkpoint, e.what());
    }
  }
  r.hyper_after = hyper_;
  rounds_.push_back(r);
  if (!o_.lineage_path.empty()) {
    std::ofstream(o_.lineage_path, std::ios::app) << to_json(r).dump() << "\n";
  }
  if (o_.say) {
    o_.say(r.exploit ? fmt::format("pbt round {}: validation top-1 {:.4f}; copied member {} ({:.4f}), now {}", r.round,
                                   r.score, r.source, r.source_score, describe(hyper_))
                     : fmt::format("pbt round {}: validation top-1 {:.4f}; kept {}{}", r.round, r.score,
                                   describe(hyper_), r.note.empty() ? "" : " (" + r.note + ")"));
  }
}

void PbtMember::apply(const Hyper& hyper) {
  hyper_ = hyper;
  if (auto it = hyper.find("lr"); it != hyper.end()) trainer_.set_lr_factor(it->second / o_.base_lr);
  nlohmann::json known = trainer_.optimizer().hyper_parameters(), update = nlohmann::json::object();
  for (const char* name : {"momentum", "weight_decay"}) {
    auto it = hyper.find(name);
    if (it == hyper.end()) continue;
    if (!known.contains(name)) {
      fail<ConfigError>("pbt searches {} but optimizer {} has no such hyper-parameter", name,
                        trainer_.optimizer().name());
    }
    update[name] = it->second;
  }
  trainer_.optimizer().set_hyper_parameters(update);
  if (auto it = hyper.find("batch_size"); it != hyper.end()) {
    trainer_.set_batch_size(std::llround(it->second));
  }
}

}  // namespace braid::train
