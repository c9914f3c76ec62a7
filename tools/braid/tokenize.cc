// `braid tokenize`: byte-level BPE tokenizers (braid/text/), compatible with
// Hugging Face `tokenizers` files.
//   braid tokenize train --vocab-size 8192 --out tok/ corpus/*.txt
//   braid tokenize encode --tokenizer tok/ --out shards/train corpus/*.txt
//   braid tokenize decode --tokenizer tok/ shards/train-00000.tok
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "braid/base/error.h"
#include "braid/text/bpe_trainer.h"
#include "braid/text/formats.h"
#include "braid/text/pretokenize.h"
#include "braid/text/shards.h"
#include "tools/braid/commands.h"

namespace braid::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<IoError>("tokenize: cannot read {}", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct TrainArgs {
  uint32_t vocab_size = 8192;
  std::string out;
  std::vector<std::string> special = {"<|endoftext|>"};
  uint64_t min_frequency = 0;
  int threads = 0;
  std::vector<std::string> files;
};

void run_train(const TrainArgs& a) {
  const auto t0 = Clock::now();
  std::vector<std::string> texts;
  size_t bytes = 0;
  for (const auto& f : a.files) {
    texts.push_back(read_all(f));
    bytes += texts.back().size();
  }
  std::vector<std::string_view> views(texts.begin(), texts.end());
  const text::Tokenizer t = text::train_bpe(
      views, {.vocab_size = a.vocab_size, .special_tokens = a.special, .min_frequency = a.min_frequency, .threads = a.threads});
  text::save_tokenizer(t, a.out);
  std::printf("trained %zu merges on %zu files (%zu bytes) in %.2f s: %s/{tokenizer.json,vocab.json,merges.txt}\n",
              t.merges().size(), a.files.size(), bytes, seconds_since(t0), a.out.c_str());
}

struct EncodeArgs {
  std::string tokenizer;
  std::string out;
  std::string separator = "<|endoftext|>";
  uint64_t shard_ids = 1ull << 28;
  uint64_t batch_bytes = 64ull << 20;
  int threads = 0;
  bool json = false;
  std::vector<std::string> files;
};

void run_encode(const EncodeArgs& a) {
  const text::Tokenizer t = text::load_tokenizer(a.tokenizer);
  std::optional<uint32_t> sep;
  if (!a.separator.empty()) {
    sep = t.token_to_id(a.separator);
    // The default separator is used when the vocabulary has it; one asked for by name must exist.
    if (!sep && a.separator != "<|endoftext|>")
      fail<ConfigError>("tokenize encode: --separator '{}' is not a token of {}", a.separator, a.tokenizer);
  }
  // The prefix's folder is made, as train's --out is.
  if (const auto dir = std::filesystem::path(a.out).parent_path(); !dir.empty()) std::filesystem::create_directories(dir);
  text::ShardWriter writer({.prefix = a.out, .vocab_size = t.vocab_size(), .ids_per_shard = a.shard_ids});

  // Documents are whole files. A batch of them (up to batch_bytes) is encoded
  // at once in parallel; a larger file goes in blocks cut at safe points, which
  // encode as the whole file would.
  struct Doc {
    std::string bytes;
    bool last_of_file;
  };
  std::vector<Doc> batch;
  size_t batch_size = 0, bytes = 0, ids = 0;
  double encode_s = 0;
  const auto flush = [&] {
    if (batch.empty()) return;
    std::vector<std::string_view> views;
    for (const auto& d : batch) views.emplace_back(d.bytes);
    const auto t0 = Clock::now();
    auto encoded = t.encode_batch(views, {.threads = a.threads});
    encode_s += seconds_since(t0);
    std::vector<uint32_t> doc;
    for (size_t i = 0; i < batch.size(); ++i) {
      doc.insert(doc.end(), encoded[i].begin(), encoded[i].end());
      if (!batch[i].last_of_file) continue;
      if (sep) doc.push_back(*sep);
      writer.add(doc);
      ids += doc.size();
      doc.clear();
    }
    if (!doc.empty()) {  // a file continues in the next batch: its ids so far go now
      writer.add(doc);
      ids += doc.size();
    }
    batch.clear();
    batch_size = 0;
  };
  std::vector<char> block(a.batch_bytes);  // once: zeroing 64 MB per file cost more than encoding small files
  for (const auto& f : a.files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) fail<IoError>("tokenize encode: cannot read {}", f);
    std::string carry;
    while (true) {
      in.read(block.data(), static_cast<std::streamsize>(block.size()));
      const auto got = static_cast<size_t>(in.gcount());
      std::string piece = std::move(carry);
      carry.clear();
      piece.append(block.data(), got);
      const bool eof = got < block.size();
      if (!eof) {  // keep the text after the last safe cut for the next block
        size_t cut = piece.size() - 1;
        while (cut > 0 && !text::is_safe_cut(piece, cut)) --cut;
        if (cut > 0) {
          carry = piece.substr(cut);
          piece.resize(cut);
        }
      }
      bytes += piece.size();
      batch_size += piece.size();
      batch.push_back({std::move(piece), eof});
      if (batch_size >= a.batch_bytes) flush();
      if (eof) break;
    }
  }
  flush();
  const auto paths = writer.finish();
  const double mb = static_cast<double>(bytes) / 1e6;
  if (a.json) {
    std::printf("%s\n", nlohmann::json{{"files", a.files.size()}, {"bytes", bytes}, {"ids", ids},
                                       {"encode_s", encode_s}, {"mb_per_s", encode_s > 0 ? mb / encode_s : 0.0},
                                       {"shards", paths}}.dump().c_str());
  } else {
    std::printf("encoded %zu files, %zu bytes -> %zu ids in %.3f s (%.1f MB/s), %zu shard%s: %s%s\n", a.files.size(),
                bytes, ids, encode_s, encode_s > 0 ? mb / encode_s : 0.0, paths.size(), paths.size() == 1 ? "" : "s",
                paths.empty() ? "" : paths.front().c_str(), paths.size() > 1 ? " ..." : "");
  }
}

// A shard file, a file holding a JSON list of ids, or the ids themselves ("[1, 2]" or "1,2").
std::vector<uint32_t> read_ids(const std::string& arg) {
  std::ifstream probe(arg, std::ios::binary);
  if (probe) {
    char magic[8] = {};
    probe.read(magic, 8);
    if (probe.gcount() == 8 && std::equal(magic, magic + 8, text::kShardMagic)) {
      text::TokenShard s(arg, text::ShardAccess::Sequential);
      std::vector<uint32_t> ids(s.size());
      s.read(0, ids);
      return ids;
    }
    probe.close();
    return read_ids(read_all(arg));
  }
  std::string s = arg;
  if (s.find('[') == std::string::npos) s = "[" + s + "]";
  try {
    return nlohmann::json::parse(s).get<std::vector<uint32_t>>();
  } catch (const nlohmann::json::exception&) {
    fail<ConfigError>("tokenize decode: '{}' is neither a file nor a list of ids", arg.substr(0, 80));
  }
}

}  // namespace

void add_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Train, apply and invert byte-level BPE tokenizers (docs/text.md)");
  cmd->require_subcommand(1);

  static TrainArgs ta;
  auto* train = cmd->add_subcommand("train", "Train a byte-level BPE as Hugging Face tokenizers does");
  train->add_option("--vocab-size", ta.vocab_size, "Vocabulary size, with the 256 bytes and the special tokens")
      ->required();
  train->add_option("--out", ta.out, "Folder for tokenizer.json, vocab.json and merges.txt")->required();
  train->add_option("--special", ta.special, "Special tokens, ids from 0 (default <|endoftext|>)");
  train->add_option("--min-frequency", ta.min_frequency, "Stop when the best pair occurs fewer times");
  train->add_option("--threads", ta.threads, "Threads for counting (default: all)");
  train->add_option("files", ta.files, "Text files, read line by line")->required()->check(CLI::ExistingFile);
  train->callback([] { run_train(ta); });

  static EncodeArgs ea;
  auto* enc = cmd->add_subcommand("encode", "Encode files into token shards (PREFIX-00000.tok, ...)");
  enc->add_option("--tokenizer", ea.tokenizer, "tokenizer.json, or a folder with it or vocab.json + merges.txt")
      ->required();
  enc->add_option("--out", ea.out, "Shard path prefix")->required();
  enc->add_option("--separator", ea.separator,
                  "Token after each file (default <|endoftext|> when the vocabulary has it; \"\" for none)");
  enc->add_option("--shard-ids", ea.shard_ids, "Ids per shard before a new one starts (at a file's end)");
  enc->add_option("--threads", ea.threads, "Encoding threads (default: all)");
  enc->add_flag("--json", ea.json, "Print the summary as JSON");
  enc->add_option("files", ea.files, "Text files, one document each")->required()->check(CLI::ExistingFile);
  enc->callback([] { run_encode(ea); });

  static std::string dec_tok, dec_arg;
  static bool skip_special = false;
  auto* dec = cmd->add_subcommand("decode", "Write the bytes that ids spell to stdout");
  dec->add_option("--tokenizer", dec_tok, "tokenizer.json, or a folder with it or vocab.json + merges.txt")
      ->required();
  dec->add_flag("--skip-special", skip_special, "Leave out special tokens");
  dec->add_option("ids", dec_arg, "A shard, a file with a JSON list of ids, or ids (\"1,2,3\")")->required();
  dec->callback([] {
    const text::Tokenizer t = text::load_tokenizer(dec_tok);
    const std::string out = t.decode(read_ids(dec_arg), {.skip_special = skip_special});
    std::fwrite(out.data(), 1, out.size(), stdout);
  });
}

}  // namespace braid::cli
