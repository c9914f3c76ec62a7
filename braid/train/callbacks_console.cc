#include "braid/train/callbacks_console.h"

#include <unistd.h>

#include <chrono>
#include <cmath>

#include <fmt/format.h>

namespace braid::train {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string rate(double samples_per_s) {
  return samples_per_s >= 1e3 ? fmt::format("{:.1f}k", samples_per_s / 1e3) : fmt::format("{:.0f}", samples_per_s);
}

// Sequence models: " 12.3k tok/s mfu 41.2%" (MFU only where known); else "".
std::string token_rate(double tokens_per_s, double mfu) {
  if (tokens_per_s <= 0) return "";
  std::string out = fmt::format(" {} tok/s", rate(tokens_per_s));
  if (mfu > 0) out += fmt::format(" mfu {:.1f}%", 100 * mfu);
  return out;
}

}  // namespace

ConsoleMode console_mode(const std::string& setting, std::FILE* out) {
  if (setting == "bar") return ConsoleMode::bar;
  if (setting == "lines") return ConsoleMode::lines;
  if (setting == "off") return ConsoleMode::off;
  return isatty(fileno(out)) ? ConsoleMode::bar : ConsoleMode::lines;
}

void ConsoleReporter::end_bar() {
  if (bar_open_) std::fputc('\n', out_);
  bar_open_ = false;
}

void ConsoleReporter::on_train_begin(int64_t start_step, int64_t total_steps) {
  if (mode_ == ConsoleMode::off) return;
  fmt::print(out_, "training: {} steps{}\n", total_steps,
             start_step > 0 ? fmt::format(" (continuing at step {})", start_step + 1) : "");
  std::fflush(out_);
}

void ConsoleReporter::on_step(const StepMetrics& m) {
  if (!std::isnan(m.loss)) loss_ema_ = loss_ema_ < 0 ? m.loss : 0.95 * loss_ema_ + 0.05 * m.loss;  // NaN: no loss
  if (mode_ != ConsoleMode::bar) return;
  const double t = now_s();
  const bool last = m.batch == m.batches_per_epoch;
  if (!last && t - last_draw_ < 0.1) return;  // redraw at most 10 times a second
  last_draw_ = t;
  constexpr int kWidth = 30;
  const int filled = m.batches_per_epoch > 0 ? static_cast<int>(kWidth * m.batch / m.batches_per_epoch) : 0;
  fmt::print(out_, "\repoch {} [{}{}] {}/{} loss {:.4f} {} samples/s{} ", m.epoch + 1, std::string(filled, '#'),
             std::string(kWidth - filled, '.'), m.batch, m.batches_per_epoch, loss_ema_, rate(m.samples_per_s),
             token_rate(m.tokens_per_s, m.mfu));
  std::fflush(out_);
  bar_open_ = true;
}

void ConsoleReporter::on_log(const StepMetrics& m) {
  if (mode_ != ConsoleMode::lines) return;
  fmt::print(out_, "step {}/{} epoch {} batch {}/{} loss {:.4f} lr {:.4g} {} samples/s{} {:.2f} ms/step\n", m.step,
             m.total_steps, m.epoch + 1, m.batch, m.batches_per_epoch, m.loss, m.lr, rate(m.samples_per_s),
             token_rate(m.tokens_per_s, m.mfu), m.step_ms);
  std::fflush(out_);
}

void ConsoleReporter::on_eval(const EvalMetrics& m) {
  if (mode_ == ConsoleMode::off) return;
  end_bar();
  if (m.perplexity > 0) {  // a sequence model: per-token figures
    fmt::print(out_, "eval {} epoch {} (step {}): loss {:.4f} ppl {:.2f} next-token top-1 {:.4f} ({} tokens, {:.1f} s)\n",
               m.within_epoch ? "in" : "after", m.epoch + 1, m.step, m.loss, m.perplexity, m.top1, m.examples,
               m.seconds);
  } else {
    fmt::print(out_, "eval {} epoch {} (step {}): loss {:.4f} top-1 {:.4f} top-5 {:.4f} ({} examples, {:.1f} s)\n",
               m.within_epoch ? "in" : "after", m.epoch + 1, m.step, m.loss, m.top1, m.top5, m.examples, m.seconds);
  }
  std::fflush(out_);
}

void ConsoleReporter::on_checkpoint(const std::string& stem, int64_t step) {
  if (mode_ != ConsoleMode::lines) return;
  fmt::print(out_, "checkpoint {} (step {})\n", stem, step);
  std::fflush(out_);
}

void ConsoleReporter::on_message(const std::string& text) {
  if (mode_ == ConsoleMode::off) return;
  end_bar();
  fmt::print(out_, "{}\n", text);
  std::fflush(out_);
}

void ConsoleReporter::on_train_end(const TrainSummary& s) {
  if (mode_ == ConsoleMode::off) return;
  end_bar();
  fmt::print(out_, "done: {} steps, {} epochs, {:.1f} s training, {} samples/s{}, final train loss {:.4f}\n", s.steps,
             s.epochs, s.train_seconds, rate(s.samples_per_s), token_rate(s.tokens_per_s, s.mfu), s.final_loss);
  if (s.has_eval && s.last_eval.perplexity > 0) {
    fmt::print(out_, "final test loss {:.4f}, perplexity {:.2f}\n", s.last_eval.loss, s.last_eval.perplexity);
  } else if (s.has_eval) {
    fmt::print(out_, "final test accuracy: top-1 {:.4f}, top-5 {:.4f}\n", s.last_eval.top1, s.last_eval.top5);
  }
  if (!s.last_checkpoint.empty()) fmt::print(out_, "last checkpoint: {}\n", s.last_checkpoint);
  std::fflush(out_);
}

}  // namespace braid::train
