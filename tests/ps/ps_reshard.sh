#!/usr/bin/env bash
# A bsp parameter-server job resumed with other server counts follows the
# trajectory of the uninterrupted job: 2 servers train N steps and checkpoint,
# 3 servers (built from server-*-of-2) train N more, 1 server (built from the
# newer server-*-of-3) N more; the final dense weights and momentum buffers
# equal those of one 2-server run of 3N steps bit for bit (train.deterministic
# fixes the kernels; the partition does not change an elementwise update).
# Then a resume with another updater is refused, naming the file.
# usage: ps_reshard.sh BRAID_BINARY REPO_ROOT
set -uo pipefail
braid=$1
root=$2
out=$(mktemp -d /tmp/braid-ps-reshard.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- log ---"; tail -60 "$out/log" 2>/dev/null; exit 1; }
n=30

# run SERVERS STEPS OUT_DIR [--set ...]: one job of 2 bsp workers; its output is appended to $out/log.
run() {
  local servers=$1 steps=$2 dir=$3
  shift 3
  echo "=== $servers servers, to step $steps, $dir $*" >>"$out/log"
  "$braid" launch --servers "$servers" --workers 2 -- "$braid" train "$root/examples/configs/fashion_mlp.toml" \
    --set parallel.strategy=ps --set ps.consistency=bsp --set ps.updater=momentum --set optim.schedule=constant \
    --set train.max_steps="$steps" --set train.out_dir="$dir" --set train.threads=1 --set train.eval_every=0 \
    --set train.log_every=10 --set train.progress=lines --set parallel.timeout_s=30 --set train.deterministic=true \
    "$@" >>"$out/log" 2>&1
}

run 2 $((3 * n)) "$out/straight" || fail "the uninterrupted run exited with $?"
run 2 $n "$out/run" || fail "the first part (2 servers) exited with $?"
run 3 $((2 * n)) "$out/run" --set train.resume=always || fail "the second part (3 servers) exited with $?"
grep -q "ps server 2: resharded its shard from 2 checkpoints server-\*-of-2 (update $n, clock $n)" "$out/log" \
  || fail "the 3 servers did not reshard the 2 servers' checkpoints"
run 1 $((3 * n)) "$out/run" --set train.resume=always || fail "the third part (1 server) exited with $?"
grep -q "ps server 0: resharded its shard from 3 checkpoints server-\*-of-3 (update $((2 * n)), clock $((2 * n)))" \
  "$out/log" || fail "the 1 server did not reshard the 3 servers' (newer) checkpoints"

# The whole dense vector and its momentum buffer (one state slot: block-wise is plain concatenation).
python3 - "$out/straight/ps" 2 "$out/run/ps" 1 $((3 * n)) <<'EOF' || fail "the resumed run differs from the uninterrupted one"
import array, json, struct, sys

def whole(folder, servers):
    out = {"dense": array.array("f"), "dense.state": array.array("f")}
    clocks = set()
    for i in range(servers):
        raw = open(f"{folder}/server-{i}-of-{servers}.safetensors", "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        clocks.add(int(header["__metadata__"]["braid.ps.clock"]))
        for name, values in out.items():
            b, e = header[name]["data_offsets"]
            values.frombytes(raw[8 + n + b:8 + n + e])
    return out, clocks

a, clocks_a = whole(sys.argv[1], int(sys.argv[2]))
b, clocks_b = whole(sys.argv[3], int(sys.argv[4]))
steps = int(sys.argv[5])
assert clocks_a == clocks_b == {steps}, (clocks_a, clocks_b)
for name in a:
    assert len(a[name]) == len(b[name]) > 0, (name, len(a[name]), len(b[name]))
    diff = max(abs(x - y) for x, y in zip(a[name], b[name]))
    print(f"{name}: {len(a[name])} values, max difference {diff:g}")
    assert diff == 0, name  # deterministic kernels, elementwise updates: bit for bit
EOF

# The 4 servers would build from server-*-of-1, written by another updater: refused, naming the file.
run 4 $((4 * n)) "$out/run" --set train.resume=always --set ps.updater=adam \
  && fail "a resume with another updater succeeded"
grep -q "ps checkpoint $out/run/ps/server-0-of-1.safetensors was written by updater momentum, this job uses adam" \
  "$out/log" || fail "the refusal does not name the file"
echo "PASS: 2 -> 3 -> 1 servers after $n steps each equals 2 servers for $((3 * n)) steps"
