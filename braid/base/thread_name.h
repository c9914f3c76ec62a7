// Names the calling thread as top -H, perf, gdb and /proc show it
// ("shm-read:3", "comm-worker"), so a user can tell which of a rank's
// threads is busy or stuck. Linux keeps 15 characters.
#pragma once

#include <pthread.h>

#include <string>

namespace braid {

inline void name_this_thread(const std::string& name) {
  ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace braid
