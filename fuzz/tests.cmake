# The short fuzz runs (label `fuzz`, part of the default suite): each harness
# for a few seconds from its seed corpus (fuzz/run-short). The harnesses need
# clang, libFuzzer's runtime and clang's OpenMP (scripts/setup installs
# clang-14, libclang-rt-14-dev and libomp-14-dev); when they are here the main
# build configures and builds them in build/fuzz as an external project
# (fuzz/CMakeLists.txt). Without them the tests are still registered, and
# SKIP saying why.
include(${CMAKE_CURRENT_LIST_DIR}/harnesses.cmake)
set(BRAID_FUZZ_BUILD ${CMAKE_BINARY_DIR}/fuzz)
find_program(BRAID_FUZZ_CXX NAMES clang++-14)
find_program(BRAID_FUZZ_CC NAMES clang-14)
# Both live in clang's resource folder: libFuzzer's runtime, and omp.h, which
# comes with clang's OpenMP runtime.
set(fuzz_ready FALSE)
if(BRAID_FUZZ_CXX AND BRAID_FUZZ_CC)
  execute_process(COMMAND ${BRAID_FUZZ_CXX} -print-resource-dir
                  OUTPUT_VARIABLE resource OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(EXISTS "${resource}/lib/linux/libclang_rt.fuzzer-x86_64.a" AND EXISTS "${resource}/include/omp.h")
    set(fuzz_ready TRUE)
  endif()
endif()
if(fuzz_ready)
  include(ExternalProject)
  ExternalProject_Add(braid_fuzz
    SOURCE_DIR ${PROJECT_SOURCE_DIR}
    BINARY_DIR ${BRAID_FUZZ_BUILD}
    CMAKE_ARGS -G Ninja -DBRAID_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug
               -DCMAKE_CXX_COMPILER=${BRAID_FUZZ_CXX} -DCMAKE_C_COMPILER=${BRAID_FUZZ_CC}
               -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
               -DCMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER}
    INSTALL_COMMAND ""
    BUILD_ALWAYS ON)  # ninja in build/fuzz decides what is out of date
else()
  message(STATUS "fuzz: clang-14, libclang-rt-14-dev or libomp-14-dev missing; the fuzz tests will skip")
endif()
foreach(h ${BRAID_FUZZ_HARNESSES})
  add_test(NAME fuzz.${h} COMMAND ${PROJECT_SOURCE_DIR}/fuzz/run-short ${BRAID_FUZZ_BUILD} ${h})
  set_tests_properties(fuzz.${h} PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77 TIMEOUT 120)
endforeach()
# The long runs (label `slow`): every harness, as built under AddressSanitizer
# and UndefinedBehaviorSanitizer made fatal (fuzz/CMakeLists.txt), for 300,000
# inputs or 240 s from another seed than the short run's, so the slow suite
# explores past what the default suite replays. A float in a safetensors shape
# (undefined behaviour when cast to an integer) needed 967,000 random inputs
# to find; its input is in the seed corpus now.
foreach(h ${BRAID_FUZZ_HARNESSES})
  add_test(NAME fuzz_long.${h}
           COMMAND ${CMAKE_COMMAND} -E env BRAID_FUZZ_RUNS=300000 BRAID_FUZZ_SECONDS=240 BRAID_FUZZ_SEED=2
                   ${PROJECT_SOURCE_DIR}/fuzz/run-short ${BRAID_FUZZ_BUILD} ${h})
  set_tests_properties(fuzz_long.${h} PROPERTIES LABELS "slow;fuzz_long" SKIP_RETURN_CODE 77 TIMEOUT 400)
endforeach()
