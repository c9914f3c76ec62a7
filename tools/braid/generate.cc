// `braid generate MODEL --prompt "..." [--tokens N] [--temperature T] [--top-k K]
//                 [--top-p P] [--seed S] [--json] [--tokenizer PATH] [--truncate]`
// Text from a language model with a key-value cache (models::generate): the
// prompt's prefill once, then one position's forward per new token. MODEL is
// a Hugging Face folder or a braid checkpoint (train/pretrained.h); the prompt
// is encoded with the tokenizer beside it, or --tokenizer. A prompt that
// leaves no room for N new tokens in the model's context is refused, or with
// --truncate loses its oldest tokens. --temperature 0 is greedy.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>

#include "braid/base/error.h"
#include "braid/base/thread_pool.h"
#include "braid/models/gpt.h"
#include "braid/text/formats.h"
#include "braid/train/pretrained.h"
#include "tools/braid/commands.h"

namespace braid::cli {

namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  std::string prompt_ids;  // "[1, 2]" or "1,2": a prompt given as ids (no tokenizer needed)
  int64_t tokens = 64;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  bool json = false;
  std::string tokenizer;
  bool truncate = false;
  bool stop_at_eos = false;
  int threads = 0;
};

std::vector<int64_t> parse_prompt_ids(const std::string& text) {
  std::string s = text;
  if (s.find('[') == std::string::npos) s = "[" + s + "]";
  try {
    return nlohmann::json::parse(s).get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception&) {
    fail<ConfigError>("generate: --prompt-ids '{}' is not a list of ids", text.substr(0, 80));
  }
}

std::string decode_ids(const text::Tokenizer& t, std::span<const int64_t> ids) {
  std::vector<uint32_t> u(ids.begin(), ids.end());
  return t.decode(u);
}

void run_generate(const GenerateArgs& a) {
  if (a.tokens < 1) fail<ConfigError>("generate: --tokens must be at least 1, got {}", a.tokens);
  if (!(a.temperature >= 0)) fail<ConfigError>("generate: --temperature must be >= 0, got {}", a.temperature);
  if (a.top_k < 0) fail<ConfigError>("generate: --top-k must be >= 0, got {}", a.top_k);
  if (!(a.top_p > 0 && a.top_p <= 1)) fail<ConfigError>("generate: --top-p must lie in (0, 1], got {}", a.top_p);
  if (a.prompt.empty() == a.prompt_ids.empty()) fail<ConfigError>("generate: give one of --prompt and --prompt-ids");
  if (a.threads > 0) set_num_threads(a.threads);

  const train::Pretrained p = train::load_pretrained(a.model);
  const std::string tok_path = a.tokenizer.empty() ? p.tokenizer : a.tokenizer;
  std::optional<text::Tokenizer> tok;
  if (!tok_path.empty()) tok = text::load_tokenizer(tok_path);
  std::vector<int64_t> prompt;
  if (!a.prompt.empty()) {
    if (!tok) {
      fail<ConfigError>("generate: {} has no tokenizer beside it (tokenizer.json, or vocab.json + merges.txt): pass "
                        "--tokenizer PATH, or the prompt as --prompt-ids", p.description);
    }
    for (uint32_t id : tok->encode(a.prompt)) prompt.push_back(id);
  } else {
    prompt = parse_prompt_ids(a.prompt_ids);
  }
  if (prompt.empty()) fail<ConfigError>("generate: the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= p.vocab) {
      fail<ConfigError>("generate: prompt id {} (token {}) is outside the model's vocabulary of {}", prompt[i], i,
                        p.vocab);
    }
  }
  // The prompt and the new tokens share the model's positions.
  int64_t dropped = 0;
  const int64_t room = p.context - a.tokens;
  if (static_cast<int64_t>(prompt.size()) > room) {
    if (!a.truncate || room < 1) {
      fail<ConfigError>("generate: a prompt of {} tokens and --tokens {} exceed the model's context of {} positions{}",
                        prompt.size(), a.tokens, p.context,
                        room < 1 ? fmt::format(" (ask for fewer than {} tokens)", p.context)
                                 : fmt::format(" (--truncate keeps the prompt's last {} tokens)", room));
    }
    dropped = static_cast<int64_t>(prompt.size()) - room;
    prompt.erase(prompt.begin(), prompt.begin() + dropped);
  }
  int64_t stop = -1;
  if (a.stop_at_eos) {
    if (p.eos) stop = *p.eos;
    else if (tok && tok->token_to_id("<|endoftext|>")) stop = *tok->token_to_id("<|endoftext|>");
    else fail<ConfigError>("generate: --stop-at-eos, but {} names no end-of-text token", p.description);
  }

  Generator gen(a.seed);
  const models::SampleOptions sampling{.temperature = a.temperature, .top_k = a.top_k, .top_p = a.top_p};
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int64_t> all = models::generate(*p.model, prompt, a.tokens,
                                                    static_cast<int64_t>(prompt.size()) + a.tokens, sampling, gen, stop);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::span<const int64_t> fresh(all.begin() + static_cast<std::ptrdiff_t>(prompt.size()), all.end());
  if (a.json) {
    nlohmann::json j{{"model", p.description},
                     {"prompt_ids", prompt},
                     {"new_ids", std::vector<int64_t>(fresh.begin(), fresh.end())},
                     {"prompt_tokens_dropped", dropped},
                     {"seconds", seconds},
                     // Prefill included, as transformers' generate is timed.
                     {"tokens_per_s", seconds > 0 ? static_cast<double>(fresh.size()) / seconds : 0.0},
                     {"threads", num_threads()}};
    j["prompt"] = tok ? nlohmann::json(decode_ids(*tok, prompt)) : nlohmann::json(nullptr);
    j["text"] = tok ? nlohmann::json(decode_ids(*tok, fresh)) : nlohmann::json(nullptr);
    // A token may end inside a UTF-8 character: replaced, not an error.
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  if (tok) {
    const std::string out = decode_ids(*tok, all);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::printf("\n");
  } else {
    std::printf("%s\n", nlohmann::json(std::vector<int64_t>(fresh.begin(), fresh.end())).dump().c_str());
  }
  std::fprintf(stderr, "%zu tokens in %.2f s (%.1f tokens/s)%s\n", fresh.size(), seconds,
               seconds > 0 ? static_cast<double>(fresh.size()) / seconds : 0.0,
               dropped > 0 ? fmt::format("; the prompt's first {} tokens were dropped", dropped).c_str() : "");
}

}  // namespace

void add_generate(CLI::App& app) {
  static GenerateArgs a;
  auto* cmd = app.add_subcommand(
      "generate", "Text from a language model: a braid checkpoint or a Hugging Face folder (docs/models.md)");
  cmd->add_option("model", a.model, "A Hugging Face folder, a braid run's out_dir, or its ckpt-N.safetensors")
      ->required();
  cmd->add_option("--prompt", a.prompt, "Text to continue, encoded with the model's tokenizer");
  cmd->add_option("--prompt-ids", a.prompt_ids, "The prompt as token ids (\"[1, 2]\" or \"1,2\"), instead of --prompt");
  cmd->add_option("--tokens", a.tokens, "New tokens to generate (default 64)");
  cmd->add_option("--temperature", a.temperature, "Softmax temperature; 0 = greedy (default 1)");
  cmd->add_option("--top-k", a.top_k, "Sample among the K most likely tokens; 0 = all (default)");
  cmd->add_option("--top-p", a.top_p, "Sample among the fewest tokens whose probability reaches P (default 1)");
  cmd->add_option("--seed", a.seed, "Seed of the sampler (default 0)");
  cmd->add_flag("--json", a.json, "Print prompt ids, new ids, text and tokens/s as JSON");
  cmd->add_option("--tokenizer", a.tokenizer, "tokenizer.json, or a folder with it or vocab.json + merges.txt");
  cmd->add_flag("--truncate", a.truncate, "Drop the prompt's oldest tokens to fit the context instead of failing");
  cmd->add_flag("--stop-at-eos", a.stop_at_eos, "Stop at the end-of-text token (config.json's, or <|endoftext|>)");
  cmd->add_option("--threads", a.threads, "Intra-op threads (default: all cores)");
  cmd->callback([] { run_generate(a); });
}

}  // namespace braid::cli
