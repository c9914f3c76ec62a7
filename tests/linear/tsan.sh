#!/usr/bin/env bash
# Builds tests/linear/tsan_driver.cc with braid/linear's SGD sources under
# ThreadSanitizer (the rest of braid linked uninstrumented from BUILD) and
# runs it; any report fails the test.  Usage: tsan.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
g++ -std=c++20 -O1 -g -fsanitize=thread -I"$src" -o "$out/tsan_driver" \
  "$src/tests/linear/tsan_driver.cc" "$src"/braid/linear/{sgd,objective,solver,sparse,coordinate_descent}.cc \
  "$build/braid/data/libbraid_data.a" "$build/braid/tensor/libbraid_tensor.a" "$build/libbraid_base.a" \
  -lfmt -lspdlog -lz -lcrypto -fopenmp -pthread
TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$out/tsan_driver"
