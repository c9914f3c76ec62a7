#!/usr/bin/env bash
# Installs braid from BUILD into WORK/prefix and builds tests/install/consumer
# against it twice, each binary then run: with CMake (find_package(braid),
# braid::braid) and with pkg-config (braid.pc). Also checks that nothing
# installed points back into the source or build tree.
# usage: out_of_tree.sh BUILD_DIR SOURCE_DIR WORK_DIR CXX GENERATOR
set -uo pipefail
build=$(realpath "$1") source=$(realpath "$2") work=$(realpath -m "$3") cxx=$4 generator=$5
consumer=$source/tests/install/consumer
prefix=$work/prefix
fail() { echo "FAIL: $*"; [[ -f $work/log ]] && tail -40 "$work/log"; exit 1; }
run() { echo "+ $*"; "$@" >"$work/log" 2>&1 || fail "$1 exited with $?"; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot create $work"

run cmake --install "$build" --prefix "$prefix"
for f in include/braid/braid.h lib/pkgconfig/braid.pc lib/cmake/braid/braid-config.cmake bin/braid; do
  [[ -e $prefix/$f ]] || fail "$f was not installed"
done
if grep -rlF -e "$source" -e "$build" "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
  fail "installed package files name the source or build tree (above)"
fi
run "$prefix/bin/braid" version  # the installed CLI (braid launch) starts without the build tree

# CMake: find_package from the prefix only; a failed find or link fails the build.
run cmake -S "$consumer" -B "$work/cmake-build" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
run cmake --build "$work/cmake-build"
run "$work/cmake-build/consumer"
cat "$work/log"

# pkg-config, the way a Makefile would use it.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs braid) || fail "pkg-config cannot resolve braid (or what it requires)"
echo "pkg-config --cflags --libs braid: $flags"
# shellcheck disable=SC2086  # the flags are words
run "$cxx" -std=c++20 -O1 -Wall -Wextra -Wpedantic -Werror "$consumer/main.cc" $flags -o "$work/consumer-pc"
run "$work/consumer-pc"
cat "$work/log"
echo "PASS"
