// `braid graph --svg`: the dot text rendered by Graphviz's `dot` (Debian's
// graphviz, which scripts/setup installs), run as a child process.
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "braid/base/atomic_file.h"
#include "braid/base/error.h"
#include "tools/braid/graph_command.h"

extern char** environ;

namespace braid::cli {

void write_graph_picture(const std::string& dot_text, const std::string& dot_path, const std::string& svg_path) {
  if (!dot_path.empty()) {
    write_file_atomic(dot_path, dot_text);
    std::printf("dot written to %s\n", dot_path.c_str());
  }
  if (svg_path.empty()) return;
  const std::string source = svg_path + ".dot.tmp";
  write_file_atomic(source, dot_text);
  const char* argv[] = {"dot", "-Tsvg", source.c_str(), "-o", svg_path.c_str(), nullptr};
  pid_t pid = 0;
  int status = -1;
  const int spawned = posix_spawnp(&pid, "dot", nullptr, nullptr, const_cast<char**>(argv), environ);
  if (spawned == 0) waitpid(pid, &status, 0);
  std::filesystem::remove(source);
  if (spawned != 0) {
    fail<Error>("braid graph --svg: cannot run Graphviz's dot ({}); install it (apt-get install graphviz, or "
                "scripts/setup) or write --dot and render it elsewhere", std::strerror(spawned));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail<Error>("braid graph --svg: dot -Tsvg failed (status {}) writing {}", status, svg_path);
  }
  std::printf("svg written to %s\n", svg_path.c_str());
}

}  // namespace braid::cli
