#include "braid/ps/config.h"

#include <algorithm>

#include "braid/base/error.h"
#include "braid/base/json_number.h"

namespace braid::ps {

Consistency parse_consistency(std::string_view name) {
  if (name == "bsp") return Consistency::bsp;
  if (name == "asp") return Consistency::asp;
  if (name == "ssp") return Consistency::ssp;
  if (name == "softsync") return Consistency::softsync;
  fail<ConfigError>("ps.consistency = {}: expected bsp, asp, ssp or softsync", name);
}

std::string to_string(Consistency c) {
  switch (c) {
    case Consistency::bsp: return "bsp";
    case Consistency::asp: return "asp";
    case Consistency::ssp: return "ssp";
    case Consistency::softsync: return "softsync";
  }
  return "?";
}

nlohmann::json PsConfig::to_json() const {
  return {{"consistency", to_string(consistency)},
          {"staleness", staleness},
          {"softsync_n", softsync_n},
          {"backup_workers", backup_workers},
          {"barrier", barrier},
          {"updater",
           {{"name", updater.name},
            {"momentum", updater.momentum},
            {"beta1", updater.beta1},
            {"beta2", updater.beta2},
            {"eps", updater.eps},
            {"weight_decay", updater.weight_decay},
            {"offset_async", updater.offset_async}}},
          {"checkpoint_dir", checkpoint_dir},
          {"checkpoint_every", checkpoint_every},
          {"resume", resume},
          {"seed", seed},
          {"timeout_s", timeout_s},
          {"codec", codec.to_json()}};
}

PsConfig PsConfig::from_json(const nlohmann::json& j) {
  try {
    PsConfig c;
    c.consistency = parse_consistency(j.at("consistency").get<std::string>());
    c.staleness = json_integer<int64_t>(j.at("staleness"));
    c.softsync_n = json_integer<int64_t>(j.at("softsync_n"));
    c.backup_workers = json_integer<int64_t>(j.at("backup_workers"));
    c.barrier = json_integer<int64_t>(j.at("barrier"));
    const auto& u = j.at("updater");
    c.updater = {.name = u.at("name").get<std::string>(),
                 .momentum = u.at("momentum").get<double>(),
                 .beta1 = u.at("beta1").get<double>(),
                 .beta2 = u.at("beta2").get<double>(),
                 .eps = u.at("eps").get<double>(),
                 .weight_decay = u.at("weight_decay").get<double>(),
                 .offset_async = u.value("offset_async", true)};
    c.checkpoint_dir = j.at("checkpoint_dir").get<std::string>();
    c.checkpoint_every = json_integer<int64_t>(j.at("checkpoint_every"));
    c.resume = j.at("resume").get<bool>();
    c.seed = json_integer<uint64_t>(j.at("seed"));
    c.timeout_s = j.at("timeout_s").get<double>();
    c.codec = comm::codec::CodecOptions::from_json(j.value("codec", nlohmann::json::object()));
    return c;
  } catch (const nlohmann::json::exception& e) {
    fail<ConfigError>("parameter-server configuration is malformed: {}", e.what());
  }
}

void PsConfig::validate(int workers) const {
  if (workers < 1) fail<ConfigError>("a parameter-server job needs at least one worker, got {}", workers);
  if (staleness < 0) fail<ConfigError>("ps.staleness must be >= 0, got {}", staleness);
  if (softsync_n < 1 || softsync_n > workers)
    fail<ConfigError>("ps.softsync_n must be in [1, workers = {}], got {}", workers, softsync_n);
  if (backup_workers < 0 || backup_workers >= workers)
    fail<ConfigError>("ps.backup_workers must be in [0, workers = {}), got {}", workers, backup_workers);
  if (backup_workers > 0 && consistency != Consistency::bsp)
    fail<ConfigError>("ps.backup_workers = {} needs ps.consistency = bsp (got {})", backup_workers,
                      to_string(consistency));
  if (barrier < 0 || barrier > workers)
    fail<ConfigError>("the parameter servers' barrier must be in [0, workers = {}], got {}", workers, barrier);
  if (barrier > 0 && consistency != Consistency::ssp)
    fail<ConfigError>("a partial barrier of {} workers needs ssp consistency (got {})", barrier, to_string(consistency));
  // Bounded above so that it converts to nanoseconds without overflow (a year).
  if (!(timeout_s > 0 && timeout_s <= 3.2e7))
    fail<ConfigError>("the parameter-server timeout must be in (0, 3.2e7] s, got {}", timeout_s);
  if (checkpoint_every < 0) fail<ConfigError>("ps.checkpoint_every must be >= 0, got {}", checkpoint_every);
  codec.validate();
  // PowerSGD shares Q between workers through all-reduces and needs the
  // model's matrix shapes; a server's range of the flat vector has neither.
  if (codec.name == "powersgd") fail<ConfigError>("parallel.codec = powersgd needs parallel.strategy = allreduce");
  const std::string& u = updater.name;
  if (u != "sgd" && u != "momentum" && u != "adagrad" && u != "adam")
    fail<ConfigError>("ps.updater = {}: expected sgd, momentum, adagrad or adam", u);
}

double server_momentum(const PsConfig& c, int workers) {
  const UpdaterOptions& u = c.updater;
  if (u.name != "momentum" || !u.offset_async) return u.momentum;
  const int64_t asynchrony = c.consistency == Consistency::bsp        ? 1
                             : c.consistency == Consistency::softsync ? c.softsync_n
                                                                      : std::max(workers, 1);
  return std::max(0.0, 1.0 - static_cast<double>(asynchrony) * (1.0 - u.momentum));
}

}  // namespace braid::ps
