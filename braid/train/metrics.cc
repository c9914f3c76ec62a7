#include "braid/train/metrics.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "braid/base/error.h"
#include "braid/train/straggler.h"

namespace braid::train {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

JsonlWriter::JsonlWriter(const std::string& path) : path_(path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) fail<IoError>("cannot create folder {} for {}: {}", parent.string(), path, ec.message());
  file_ = std::fopen(path.c_str(), "ab");
  if (!file_) fail<IoError>("cannot open {} for appending: {}", path, std::strerror(errno));
}

JsonlWriter::~JsonlWriter() {
  if (file_) std::fclose(file_);
}

void JsonlWriter::write(const nlohmann::json& record) {
  // NaN/Inf are not JSON: nlohmann writes them as null, which readers accept.
  std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    fail<IoError>("writing {}: {}", path_, std::strerror(errno));
  }
}

MetricsLogger::MetricsLogger(const MetricsOptions& o) {
  if (o.jsonl) jsonl_ = std::make_unique<JsonlWriter>((std::filesystem::path(o.out_dir) / "metrics.jsonl").string());
  if (o.tensorboard) tb_ = std::make_unique<TensorBoardWriter>(o.out_dir);
}

void MetricsLogger::on_log(const StepMetrics& m) {
  if (jsonl_) {
    nlohmann::json r = {{"event", "train"}, {"time", unix_seconds()}, {"step", m.step}, {"epoch", m.epoch},
                        {"batch", m.batch}, {"loss", m.loss}, {"lr", m.lr}, {"samples_per_s", m.samples_per_s},
                        {"step_ms", m.step_ms}};
    if (!m.codec.empty()) r["codec"] = m.codec;
    if (m.tokens_per_s > 0) r["tokens_per_s"] = m.tokens_per_s;
    if (m.mfu > 0) r["mfu"] = m.mfu;
    if (m.peak_activation_bytes > 0) r["peak_activation_bytes"] = m.peak_activation_bytes;
    if (m.peak_tensor_bytes > 0) r["peak_tensor_bytes"] = m.peak_tensor_bytes;
    jsonl_->write(r);
  }
  if (tb_) {
    tb_->add_scalar("train/loss", m.loss, m.step);
    tb_->add_scalar("train/lr", m.lr, m.step);
    tb_->add_scalar("train/samples_per_s", m.samples_per_s, m.step);
    tb_->add_scalar("train/step_ms", m.step_ms, m.step);
    if (m.tokens_per_s > 0) tb_->add_scalar("train/tokens_per_s", m.tokens_per_s, m.step);
    if (m.mfu > 0) tb_->add_scalar("train/mfu", m.mfu, m.step);
    tb_->flush();
  }
}

void MetricsLogger::on_eval(const EvalMetrics& m) {
  if (jsonl_) {
    nlohmann::json r = {{"event", "eval"}, {"time", unix_seconds()}, {"step", m.step}, {"epoch", m.epoch},
                        {"loss", m.loss}, {"top1", m.top1}, {"top5", m.top5}, {"examples", m.examples},
                        {"seconds", m.seconds}};
    if (m.perplexity > 0) r["ppl"] = m.perplexity;
    jsonl_->write(r);
  }
  if (tb_) {
    tb_->add_scalar("eval/loss", m.loss, m.step);
    if (m.perplexity > 0) tb_->add_scalar("eval/ppl", m.perplexity, m.step);
    tb_->add_scalar("eval/top1", m.top1, m.step);
    tb_->add_scalar("eval/top5", m.top5, m.step);
    tb_->flush();
  }
}

void MetricsLogger::on_straggler(const StragglerReport& r) {
  if (!jsonl_) return;
  nlohmann::json j = r.to_json();
  j["event"] = "straggler";
  j["time"] = unix_seconds();
  jsonl_->write(j);
}

void MetricsLogger::on_membership(const nlohmann::json& change) {
  if (!jsonl_) return;
  nlohmann::json j = change;
  j["event"] = "membership";
  j["time"] = unix_seconds();
  jsonl_->write(j);
}

void MetricsLogger::on_train_end(const TrainSummary& s) {
  if (jsonl_) {
    nlohmann::json r = {{"event", "end"}, {"time", unix_seconds()}, {"steps", s.steps}, {"epochs", s.epochs},
                        {"train_seconds", s.train_seconds}, {"samples_per_s", s.samples_per_s},
                        {"final_loss", s.final_loss}};
    if (s.tokens_per_s > 0) r["tokens_per_s"] = s.tokens_per_s;
    if (s.mfu > 0) r["mfu"] = s.mfu;
    jsonl_->write(r);
  }
  if (tb_) tb_->flush();
}

}  // namespace braid::train
