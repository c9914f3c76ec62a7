// What a communicator does when a collective fails (docs/reliability.md): ask
// the peers where they are, say it in the error (a desync names both calls),
// stay failed, tell the peers, and dump the family's histories.
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "braid/base/atomic_file.h"
#include "braid/base/log.h"
#include "braid/comm/communicator_impl.h"
#include "braid/comm/explain.h"

namespace braid::comm {

std::shared_ptr<Communicator::Impl> Communicator::Impl::create(std::shared_ptr<Transport> transport,
                                                               CommOptions options, std::vector<int> members,
                                                               int rank, uint32_t id,
                                                               std::shared_ptr<CommFamily> family) {
  auto impl = std::make_shared<Impl>(std::move(transport), std::move(options), std::move(members), rank, id, family);
  std::lock_guard lock(family->comms_mu);
  std::erase_if(family->comms, [](const auto& w) { return w.expired(); });
  family->comms.push_back(impl);
  return impl;
}

void Communicator::Impl::ran_with(Algorithm a) {
  ran.store(a, std::memory_order_relaxed);
  history->ran_with(running_seq.load(std::memory_order_relaxed), a);
}

std::exception_ptr Communicator::Impl::refusal(uint64_t seq, const OpInfo& info) {
  std::lock_guard lock(failure_mu);
  return std::make_exception_ptr(CommunicatorFailed(
      fmt::format("rank {} {} #{} refused: this communicator failed earlier: {}", rank, info.op, seq, failure)));
}

std::exception_ptr Communicator::Impl::fail_collective(uint64_t seq, Clock::time_point start, Duration window,
                                                       const Work& work, std::exception_ptr error) {
  std::exception_ptr out = error;
  // Only failures that involve peers are worth asking them about; a bad
  // argument (ValueError, ConfigError) says everything itself.
  // A failure seen early (a size mismatch, a peer's notice) may come before
  // slower ranks reach #seq: those are asked again, within the window, until
  // they arrive. After a timeout a rank that is behind really is.
  auto ask = [&](bool patient = true) {
    const Deadline until = Deadline::after(window);
    Explanation x = explain(seq, arrivals.survey(seq, window));
    while (patient && !x.behind.empty() && !until.expired()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      x = explain(seq, arrivals.survey(seq, until.remaining()));
    }
    return x;
  };
  try {
    std::rethrow_exception(error);
  } catch (const PeerTimeout& e) {
    const Explanation x = ask(/*patient=*/false);
    if (x.desync) {
      out = std::make_exception_ptr(DesyncError(fmt::format("{} failed: {} [{}]", work.what(), x.text, e.what())));
    } else {
      out = std::make_exception_ptr(TimeoutError(fmt::format("{} timed out after {} waiting for rank {}; {} [{}]",
                                                             work.what(), format_duration(Clock::now() - start),
                                                             e.peer, x.text, e.what())));
    }
  } catch (const PeerAborted& e) {
    // A peer gave up first. When the story is a rank that never came (the
    // peer timed out), this rank's error is a timeout too, as it would have
    // been a moment later: callers that handle lost peers catch TimeoutError.
    const Explanation x = ask();
    if (x.desync) {
      out = std::make_exception_ptr(DesyncError(fmt::format("{} failed: {} [{}]", work.what(), x.text, e.what())));
    } else if (!x.behind.empty() || !x.silent.empty()) {
      out = std::make_exception_ptr(TimeoutError(fmt::format("{} gave up after {}: {}; {}", work.what(),
                                                             format_duration(Clock::now() - start), e.what(), x.text)));
    } else {
      out = std::make_exception_ptr(PeerError(fmt::format("{}; {}", e.what(), x.text)));
    }
  } catch (const PeerError& e) {
    // A lost connection names only the peer this wait was on, which may have
    // exited because another rank died first (kill -9 of rank 1 in a ring:
    // rank 2 fails, exits, and rank 0 sees "connection to rank 2 lost"). Say
    // which op it was and what the survey found: the dead rank does not
    // answer, and a peer that failed first said why. A size mismatch from
    // a transport lands here too; that is usually a desync.
    const Explanation x = ask();
    if (x.desync) {
      out = std::make_exception_ptr(DesyncError(fmt::format("{} failed: {} [{}]", work.what(), x.text, e.what())));
    } else {
      std::string first;
      if (auto n = arrivals.peer_failure(); n && !n->op.error.empty())
        first = fmt::format("; rank {} reported that it failed: {}", n->peer, n->op.error);
      out = std::make_exception_ptr(PeerError(fmt::format("{} failed: {}; {}{}", work.what(), e.what(), x.text, first)));
    }
  } catch (const Error& e) {
    // A size mismatch from the shared-memory arena's own check (ValueError)
    // is what a desync usually looks like from inside a collective. Anything
    // else keeps its own type and words.
    const Explanation x = ask();
    if (x.desync)
      out = std::make_exception_ptr(DesyncError(fmt::format("{} failed: {} [{}]", work.what(), x.text, e.what())));
  } catch (...) {
  }
  std::string message;
  try {
    std::rethrow_exception(out);
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown error";
  }
  history->failed(seq, message);
  {
    std::lock_guard lock(failure_mu);
    if (failure.empty()) failure = message;
  }
  failed.store(true, std::memory_order_release);
  arrivals.notify_failure(history->position(seq).asked);
  if (!options.history_dir.empty()) family->dump_history(options.history_dir, transport->rank(), message);
  return out;
}

void CommFamily::dump_history(const std::string& dir, int transport_rank, const std::string& reason) {
  std::vector<std::shared_ptr<Communicator::Impl>> alive;
  {
    std::lock_guard lock(comms_mu);
    for (const auto& w : comms)
      if (auto c = w.lock()) alive.push_back(std::move(c));
  }
  nlohmann::json comms_json = nlohmann::json::array();
  for (const auto& c : alive) {
    nlohmann::json ops = nlohmann::json::array();
    for (const OpRecord& r : c->history->records()) ops.push_back(to_json(r));
    std::string failure;
    {
      std::lock_guard lock(c->failure_mu);
      failure = c->failure;
    }
    comms_json.push_back({{"id", c->id},
                          {"rank", c->rank},
                          {"size", c->members.size()},
                          {"members", c->members},
                          {"failure", failure},
                          {"ops", std::move(ops)}});
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const nlohmann::json doc{{"rank", transport_rank}, {"host", host}, {"pid", ::getpid()},
                           {"reason", reason},       {"communicators", std::move(comms_json)}};
  std::lock_guard lock(dump_mu);
  try {
    std::filesystem::create_directories(dir);
    AtomicFile f(fmt::format("{}/rank-{}.json", dir, transport_rank));
    f.write(doc.dump(1));
    f.commit();
  } catch (const std::exception& e) {
    // The failure being reported matters more than its dump.
    logging::warn("could not write the collective history to {}: {}", dir, e.what());
  }
}

}  // namespace braid::comm
