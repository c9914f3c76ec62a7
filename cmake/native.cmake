# -march=native: the build machine's instruction set and tuning, unless the
# compiler is known to build wrong code for this CPU's tuning.
#
# GCC 12.2 (Debian 12's) tuning for skylake-avx512, icelake and rocketlake
# writes the constant {1, 1, 0, 0} of an aggregate passed on the stack as one
# register broadcast of 1: a Conv2d built with the default options got padding
# 1 instead of 0. The probe below is that case. Where it fails, the CPU's
# instructions are kept and the tuning is made generic, which builds it right;
# where that fails too, -march=native is dropped.
include(CheckCXXSourceRuns)

set(braid_native_probe [=[
#include <array>
#include <cstdint>
struct Options {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
  bool bias = true;
};
__attribute__((noinline)) int check(long, long, std::array<int64_t, 2>, void*, Options o) {
  return o.stride[0] == 1 && o.stride[1] == 1 && o.padding[0] == 0 && o.padding[1] == 0 && o.dilation[1] == 1 ? 0 : 1;
}
int main() {
  int anything = 0;
  return check(1, 2, {3, 3}, &anything, {});
}
]=])

function(braid_native_flags out)
  set(CMAKE_REQUIRED_QUIET ON)
  set(CMAKE_REQUIRED_FLAGS "-O2 -march=native")
  check_cxx_source_runs("${braid_native_probe}" BRAID_NATIVE_TUNING_BUILDS_RIGHT)
  if(BRAID_NATIVE_TUNING_BUILDS_RIGHT)
    set(${out} -march=native PARENT_SCOPE)
    return()
  endif()
  set(CMAKE_REQUIRED_FLAGS "-O2 -march=native -mtune=generic")
  check_cxx_source_runs("${braid_native_probe}" BRAID_GENERIC_TUNING_BUILDS_RIGHT)
  if(BRAID_GENERIC_TUNING_BUILDS_RIGHT)
    message(STATUS "braid: ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} builds wrong code with this CPU's "
                   "tuning; using -march=native -mtune=generic")
    set(${out} -march=native -mtune=generic PARENT_SCOPE)
  else()
    message(WARNING "braid: ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} builds wrong code with "
                    "-march=native on this CPU; building for the baseline instruction set")
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()
