#include "tools/braid/launch_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "braid/base/deadline.h"
#include "braid/base/error.h"

namespace braid::cli {

namespace {

std::atomic<int> g_interrupt{0};
extern "C" void on_interrupt(int sig) { g_interrupt.store(sig); }

struct Child {
  int rank = 0;
  std::string role;
  bool may_fail = false;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out_partial, err_partial;
  std::deque<std::string> tail;
  std::vector<std::string> stragglers;  // "straggler: rank ..." lines it printed
  bool running = true;
  int status = 0;
  // Once the outcome is decided without it (GroupSpec::finish_grace):
  Clock::time_point deadline = Clock::time_point::max();
  bool seen_stopped = false;  // seen in the stopped state since
  bool overdue = false;       // past its deadline: sent SIGTERM, SIGKILL at kill_at
  Clock::time_point kill_at = Clock::time_point::max();
};

// Whether `pid` is stopped (SIGSTOP, SIGTSTP, or traced): state T or t in /proc.
bool is_stopped(pid_t pid) {
  const std::string path = fmt::format("/proc/{}/stat", pid);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  // "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
  const char* close_paren = std::strrchr(buf, ')');
  return close_paren && close_paren[1] == ' ' && (close_paren[2] == 'T' || close_paren[2] == 't');
}

// Writes each complete line of `data` with the rank prefix; keeps the rest.
void relay(Child& c, std::string& partial, const char* data, size_t n, FILE* to, size_t keep,
           bool flush_all) {
  partial.append(data, n);
  size_t start = 0;
  while (true) {
    size_t nl = partial.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = partial.substr(start, nl - start);
    std::fprintf(to, "[rank %d] %s\n", c.rank, line.c_str());
    // The trainer names slow ranks in lines like this (train/straggler.h);
    // the summary repeats them, since they scroll by in a long run.
    if (const size_t at = line.find("straggler: rank "); at != std::string::npos) c.stragglers.push_back(line.substr(at));
    c.tail.push_back(std::move(line));
    if (c.tail.size() > keep) c.tail.pop_front();
    start = nl + 1;
  }
  partial.erase(0, start);
  if (flush_all && !partial.empty()) {
    std::fprintf(to, "[rank %d] %s\n", c.rank, partial.c_str());
    c.tail.push_back(partial);
    if (c.tail.size() > keep) c.tail.pop_front();
    partial.clear();
  }
  std::fflush(to);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return fmt::format("killed by signal {} ({})", sig, strsignal(sig));
  }
  return fmt::format("ended with status {}", status);
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// One read from a ready pipe of `c`; closes it at end of file.
void read_once(Child& c, bool is_err, char* buf, size_t size, size_t keep) {
  int& fd = is_err ? c.err_fd : c.out_fd;
  ssize_t n = ::read(fd, buf, size);
  std::string& partial = is_err ? c.err_partial : c.out_partial;
  FILE* to = is_err ? stderr : stdout;
  if (n > 0) {
    relay(c, partial, buf, static_cast<size_t>(n), to, keep, false);
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    relay(c, partial, buf, 0, to, keep, true);
    ::close(fd);
    fd = -1;
  }
}

// After `c` exited: relay what is already in its pipes, so its tail is
// complete, without waiting for processes it left behind holding them.
void read_available(Child& c, char* buf, size_t size, size_t keep) {
  for (bool is_err : {false, true}) {
    for (int i = 0; i < 1024; ++i) {  // bounded: a left-behind writer may go on writing
      int fd = is_err ? c.err_fd : c.out_fd;
      if (fd < 0) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) break;
      read_once(c, is_err, buf, size, keep);
    }
  }
}

int rank_of(const GroupSpec& spec, int local) {
  if (!spec.ranks.empty() && spec.ranks[local].rank >= 0) return spec.ranks[local].rank;
  return spec.first_rank + local;
}

pid_t spawn(const GroupSpec& spec, int local, int out[2], int err[2]) {
  // Everything the child needs is prepared before fork (no allocation after).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  const int rank = rank_of(spec, local);
  auto set = [&](const std::string& k, const std::string& v) {
    std::erase_if(env_strings, [&](const std::string& s) { return s.rfind(k + "=", 0) == 0; });
    env_strings.push_back(k + "=" + v);
  };
  set("RANK", std::to_string(rank));
  set("LOCAL_RANK", std::to_string(local));
  set("WORLD_SIZE", std::to_string(spec.world_size));
  set("LOCAL_WORLD_SIZE", std::to_string(spec.nproc));
  set("GROUP_RANK", std::to_string(spec.node_rank));
  for (const auto& [k, v] : spec.env) set(k, v);
  const RankSpec* own = spec.ranks.empty() ? nullptr : &spec.ranks[local];
  if (own)
    for (const auto& [k, v] : own->env) set(k, v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = own && !own->argv.empty() ? own->argv : spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t parent = ::getpid();

  // Until exec the child has our SIGINT/SIGTERM handler, which would swallow a
  // stop sent that early (the rank then lived on until SIGKILL): block both
  // across fork, and in the child restore the default before unblocking.
  sigset_t stop_sigs, old_mask;
  sigemptyset(&stop_sigs);
  sigaddset(&stop_sigs, SIGINT);
  sigaddset(&stop_sigs, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &stop_sigs, &old_mask);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    fail<IoError>("braid launch: fork: {}", std::strerror(errno));
  }
  if (pid == 0) {
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    ::setpgid(0, 0);                   // its own group: we stop its children too
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // no orphans if launch itself dies
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::close(out[0]);
    ::close(err[0]);
    ::execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "braid launch: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::setpgid(pid, pid);
  return pid;
}

}  // namespace

GroupResult run_group(const GroupSpec& spec) {
  GroupResult result;
  if (!spec.ranks.empty() && spec.ranks.size() != static_cast<size_t>(spec.nproc))
    fail<ConfigError>("braid launch: {} rank specs for {} ranks", spec.ranks.size(), spec.nproc);
  std::vector<Child> kids(spec.nproc);
  struct sigaction sa {}, old_int{}, old_term{};
  sa.sa_handler = on_interrupt;
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  g_interrupt = 0;

  auto t0 = Clock::now();
  for (int i = 0; i < spec.nproc; ++i) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      fail<IoError>("braid launch: pipe: {}", std::strerror(errno));
    kids[i].rank = rank_of(spec, i);
    if (!spec.ranks.empty()) {
      kids[i].role = spec.ranks[i].role;
      kids[i].may_fail = spec.ranks[i].may_fail;
    }
    kids[i].pid = spawn(spec, i, out, err);
    ::close(out[1]);
    ::close(err[1]);
    kids[i].out_fd = out[0];
    kids[i].err_fd = err[0];
  }

  bool stopping = false;
  // A replacement runs the rank's program again as a joiner (GroupSpec::replacements).
  int replacements_left = spec.replacements;
  GroupSpec joiner = spec;
  joiner.env.emplace_back("BRAID_REPLICA_JOIN", "1");
  Clock::time_point kill_at{};
  bool any_may_fail = false;
  for (const auto& c : kids) any_may_fail |= c.may_fail;
  // Set when the last `may_fail` rank has ended: the others must be gone by then.
  Clock::time_point drain_at = Clock::time_point::max();
  // When the outcome was decided without the ranks still running, and why
  // (GroupSpec::finish_grace); each such rank then has a Child::deadline.
  Clock::time_point decided_at = Clock::time_point::max();
  std::string decided_why;
  bool noticed = false;
  // Names `c`, which outlived its deadline, and stops it (SIGKILL after stop_grace).
  auto stop_overdue = [&](Child& c, Clock::time_point now) {
    std::fprintf(stderr, "braid launch: %s%srank %d still running %.1f s after %s%s; stopping it\n", c.role.c_str(),
                 c.role.empty() ? "" : " ", c.rank, std::chrono::duration<double>(now - decided_at).count(),
                 decided_why.c_str(), c.seen_stopped ? " (it is stopped: SIGSTOP or a debugger)" : "");
    std::fflush(stderr);
    c.overdue = true;
    c.kill_at = now + spec.stop_grace;
    ::kill(-c.pid, SIGTERM);
    ::kill(-c.pid, SIGCONT);  // see stop_others
    result.overdue.push_back(c.rank);
    if (c.may_fail) {
      result.tolerated.push_back(c.rank);
    } else if (result.ok) {
      result.ok = false;
      result.failed_rank = c.rank;
      result.failed_role = c.role;
      result.how = fmt::format("still running {:.1f} s after {}", std::chrono::duration<double>(now - decided_at).count(),
                               decided_why);
      result.failed_after = seconds_since(t0);
      result.exit_code = 1;
    }
  };
  auto stop_others = [&] {
    if (stopping) return;
    stopping = true;
    kill_at = Clock::now() + spec.stop_grace;
    for (auto& c : kids) {
      if (!c.running) continue;
      ::kill(-c.pid, SIGTERM);
      // A stopped rank (SIGSTOP, a debugger detached badly) keeps SIGTERM
      // pending until it runs again, so without SIGCONT it lived on until the
      // SIGKILL after --stop-grace; the shell's `kill` continues jobs the same way.
      ::kill(-c.pid, SIGCONT);
      result.stopped.push_back(c.rank);
    }
  };

  char buf[65536];
  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, bool>> owner;  // child, is stderr
    for (auto& c : kids) {
      if (c.out_fd >= 0) fds.push_back({c.out_fd, POLLIN, 0}), owner.push_back({&c, false});
      if (c.err_fd >= 0) fds.push_back({c.err_fd, POLLIN, 0}), owner.push_back({&c, true});
    }
    bool any_running = false;
    for (auto& c : kids) any_running |= c.running;
    if (fds.empty() && !any_running) break;
    ::poll(fds.data(), fds.size(), 100);
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [c, is_err] = owner[k];
      read_once(*c, is_err, buf, sizeof buf, spec.tail_lines);
    }
    for (auto& c : kids) {
      if (!c.running) continue;
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.running = false;
      c.status = status;
      if (!failed(status) || stopping || c.overdue) continue;
      if (!c.may_fail && replacements_left > 0) {
        --replacements_left;
        std::fprintf(stderr, "braid launch: rank %d %s after %.1f s; starting its replacement (BRAID_REPLICA_JOIN=1, "
                     "%d more allowed)\n", c.rank, describe_status(status).c_str(), seconds_since(t0),
                     replacements_left);
        std::fflush(stderr);
        read_available(c, buf, sizeof buf, spec.tail_lines);
        for (int* fd : {&c.out_fd, &c.err_fd}) {
          if (*fd >= 0) ::close(*fd), *fd = -1;
        }
        int out[2], err[2];
        if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
          fail<IoError>("braid launch: pipe: {}", std::strerror(errno));
        c.pid = spawn(joiner, static_cast<int>(&c - kids.data()), out, err);
        ::close(out[1]);
        ::close(err[1]);
        c.out_fd = out[0], c.err_fd = err[0];
        c.running = true;
        result.replaced.push_back(c.rank);
        continue;
      }
      if (c.may_fail) {
        result.tolerated.push_back(c.rank);
        if (spec.on_tolerated_failure) {
          read_available(c, buf, sizeof buf, spec.tail_lines);
          spec.on_tolerated_failure(
              {.rank = c.rank, .role = c.role, .how = describe_status(status), .after = seconds_since(t0), .tail = c.tail});
        }
        continue;
      }
      result.ok = false;
      result.failed_rank = c.rank;
      result.failed_role = c.role;
      result.how = describe_status(status);
      result.failed_after = seconds_since(t0);
      result.exit_code = exit_code_of(status);
      stop_others();
    }
    if (any_may_fail && spec.drain && !stopping) {
      if (drain_at == Clock::time_point::max() &&
          std::none_of(kids.begin(), kids.end(), [](const Child& c) { return c.may_fail && c.running; }))
        drain_at = Clock::now() + spec.stop_grace;
      // A stopped server cannot exit by itself: stop the rest at once.
      const bool all_stopped = std::all_of(kids.begin(), kids.end(), [](const Child& c) {
        return !c.running || is_stopped(c.pid);
      });
      if (drain_at != Clock::time_point::max() && all_stopped) drain_at = Clock::now(), result.drained_stopped = true;
      if (Clock::now() >= drain_at) {
        result.drained = true;
        stop_others();
      }
    }
    if (!stopping) {
      const auto now = Clock::now();
      if (decided_at == Clock::time_point::max()) {
        const bool any_running = std::any_of(kids.begin(), kids.end(), [](const Child& c) { return c.running; });
        const bool any_ended = std::any_of(kids.begin(), kids.end(), [](const Child& c) { return !c.running; });
        const bool deciders_here = std::any_of(kids.begin(), kids.end(), [](const Child& c) { return !c.may_fail; });
        const bool deciders_running =
            std::any_of(kids.begin(), kids.end(), [](const Child& c) { return c.running && !c.may_fail; });
        if (any_may_fail && deciders_here && !deciders_running && any_running) {
          decided_why = "every server on this node ended";
        } else if (!any_may_fail && any_ended && any_running) {
          decided_why = "every other rank exited 0";  // a failure would have stopped the group
        }
        if (!decided_why.empty()) {
          decided_at = now;
          for (auto& c : kids)
            if (c.running) c.deadline = now + spec.finish_grace;
        }
      }
      if (decided_at != Clock::time_point::max()) {
        std::vector<int> waiting;
        for (auto& c : kids) {
          if (!c.running || c.overdue) continue;
          // A stopped rank cannot finish by itself: it gets stop_grace, not finish_grace.
          if (!c.seen_stopped && is_stopped(c.pid)) {
            c.seen_stopped = true;
            c.deadline = std::min(c.deadline, now + spec.stop_grace);
          }
          if (now >= c.deadline) {
            stop_overdue(c, now);
          } else if (!c.seen_stopped) {
            waiting.push_back(c.rank);
          }
        }
        // A long finish_grace: say once whom the launcher waits for.
        if (!waiting.empty() && !noticed && now >= decided_at + spec.stop_grace) {
          noticed = true;
          std::fprintf(stderr, "braid launch: ranks [%s] still running after %s; they get %.0f s from then "
                       "(--finish-grace), then are stopped\n",
                       fmt::format("{}", fmt::join(waiting, ", ")).c_str(), decided_why.c_str(),
                       std::chrono::duration<double>(spec.finish_grace).count());
          std::fflush(stderr);
        }
      }
      for (auto& c : kids)
        if (c.running && c.overdue && now >= c.kill_at) {
          ::kill(-c.pid, SIGKILL);
          c.kill_at = Clock::time_point::max();
        }
    }
    if (int sig = g_interrupt.exchange(0)) {
      result.ok = false;
      result.interrupted = true;
      result.how = fmt::format("braid launch received signal {}", sig);
      result.exit_code = 128 + sig;
      stop_others();
    }
    if (stopping && Clock::now() >= kill_at) {
      for (auto& c : kids)
        if (c.running) ::kill(-c.pid, SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  for (auto& c : kids) {
    if (c.rank == result.failed_rank) result.tail = c.tail;
    for (const std::string& line : c.stragglers) result.stragglers.push_back(line);
    result.exit_codes.push_back(exit_code_of(c.status));
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

std::string describe_failure(const GroupResult& r) {
  std::string s;
  if (r.interrupted) {
    s = fmt::format("braid launch: interrupted ({})", r.how);
  } else {
    s = fmt::format("braid launch: {}{}rank {} failed first: {} after {:.1f} s", r.failed_role,
                    r.failed_role.empty() ? "" : " ", r.failed_rank, r.how, r.failed_after);
  }
  if (!r.stopped.empty()) s += fmt::format("; stopped ranks [{}]", fmt::join(r.stopped, ", "));
  return s + describe_tail(r.failed_rank, r.tail) + describe_stragglers(r);
}

std::string describe_tail(int rank, const std::deque<std::string>& tail) {
  if (tail.empty()) return "";
  std::string s = fmt::format("\nlast lines of rank {}:", rank);
  for (const auto& line : tail) s += "\n  | " + line;
  return s;
}

std::string describe_stragglers(const GroupResult& r) {
  if (r.stragglers.empty()) return "";
  std::string s = "\nbraid launch: stragglers named during the run:";
  for (const auto& line : r.stragglers) s += "\n  " + line;
  return s;
}

}  // namespace braid::cli
