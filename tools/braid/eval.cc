// `braid eval MODEL --tokens FILE... [--context N] [--batch B] [--max-tokens N] [--json]`
// The mean next-token loss and perplexity of a language model (a braid
// checkpoint or a Hugging Face folder) on token ids: shards of `braid
// tokenize encode` (a glob), or a file holding a JSON list of ids. Each file
// is cut into windows of the model's context (models::evaluate_lm); the
// figures are over every predicted id of every file.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "braid/base/error.h"
#include "braid/base/thread_pool.h"
#include "braid/models/lm_eval.h"
#include "braid/text/shards.h"
#include "braid/train/pretrained.h"
#include "tools/braid/commands.h"

namespace braid::cli {

namespace {

struct EvalArgs {
  std::string model;
  std::vector<std::string> tokens;
  int64_t context = 0;
  int64_t batch = 8;
  int64_t max_tokens = 0;
  bool json = false;
  int threads = 0;
};

bool is_shard(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in.gcount() == 8 && std::equal(magic, magic + 8, text::kShardMagic);
}

// The ids of one file, at most `max` (0: all). A shard's ids are checked
// against the model's vocabulary as they are read (IoError naming the shard
// and the offset).
std::vector<int64_t> read_token_file(const std::string& path, int64_t vocab, int64_t max) {
  if (is_shard(path)) {
    text::TokenShard s(path, text::ShardAccess::Sequential);
    const uint64_t n = max > 0 ? std::min<uint64_t>(s.size(), static_cast<uint64_t>(max)) : s.size();
    std::vector<uint32_t> ids(n);
    s.read(0, ids, static_cast<uint32_t>(vocab));
    return {ids.begin(), ids.end()};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<IoError>("eval: cannot read {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<int64_t> ids;
  try {
    ids = nlohmann::json::parse(ss.str()).get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception&) {
    fail<IoError>("eval: {} is neither a token shard nor a JSON list of ids", path);
  }
  if (max > 0 && static_cast<int64_t>(ids.size()) > max) ids.resize(static_cast<size_t>(max));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      fail<IoError>("eval: {}: id {} at offset {} is outside the model's vocabulary of {}", path, ids[i], i, vocab);
    }
  }
  return ids;
}

void run_eval(const EvalArgs& a) {
  if (a.threads > 0) set_num_threads(a.threads);
  const train::Pretrained p = train::load_pretrained(a.model);
  const int64_t context = a.context > 0 ? a.context : p.context;
  if (context > p.context) {
    fail<ConfigError>("eval: --context {} exceeds the model's context of {} positions", context, p.context);
  }
  std::vector<std::string> files;
  for (const std::string& t : a.tokens) {
    if (t.find_first_of("*?[") != std::string::npos) {
      for (std::string& f : text::glob_shards(t)) files.push_back(std::move(f));
    } else {
      files.push_back(t);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  double nll = 0;
  int64_t tokens = 0, windows = 0, left = a.max_tokens;
  for (const std::string& f : files) {
    if (a.max_tokens > 0 && left <= 1) break;
    const std::vector<int64_t> ids = read_token_file(f, p.vocab, a.max_tokens > 0 ? left : 0);
    if (ids.size() < 2) continue;
    const models::LmEval r = models::evaluate_lm(*p.model, ids, {.context = context, .batch = a.batch});
    nll += r.loss * static_cast<double>(r.tokens);
    tokens += r.tokens;
    windows += r.windows;
    left -= static_cast<int64_t>(ids.size());
  }
  if (tokens == 0) fail<IoError>("eval: the token files hold fewer than 2 ids: nothing to predict");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double loss = nll / static_cast<double>(tokens);
  if (a.json) {
    std::printf("%s\n", nlohmann::json{{"model", p.description},
                                       {"files", files.size()},
                                       {"tokens", tokens},
                                       {"windows", windows},
                                       {"context", context},
                                       {"loss", loss},
                                       {"perplexity", std::exp(loss)},
                                       {"seconds", seconds}}
                            .dump()
                            .c_str());
    return;
  }
  std::printf("%s\nloss %.4f nats/token, perplexity %.3f over %lld tokens (%lld windows of at most %lld) in %.2f s\n",
              p.description.c_str(), loss, std::exp(loss), static_cast<long long>(tokens),
              static_cast<long long>(windows), static_cast<long long>(context), seconds);
}

}  // namespace

void add_eval(CLI::App& app) {
  static EvalArgs a;
  auto* cmd = app.add_subcommand(
      "eval", "Mean next-token loss and perplexity of a language model on token ids (docs/models.md)");
  cmd->add_option("model", a.model, "A Hugging Face folder, a braid run's out_dir, or its ckpt-N.safetensors")
      ->required();
  cmd->add_option("--tokens", a.tokens, "Token shards (a glob) or files holding a JSON list of ids")->required();
  cmd->add_option("--context", a.context, "Ids a window predicts (default: the model's context)");
  cmd->add_option("--batch", a.batch, "Windows per forward (default 8)");
  cmd->add_option("--max-tokens", a.max_tokens, "Read at most this many ids (default: all)");
  cmd->add_flag("--json", a.json, "Print the figures as JSON");
  cmd->add_option("--threads", a.threads, "Intra-op threads (default: all cores)");
  cmd->callback([] { run_eval(a); });
}

}  // namespace braid::cli
