#!/usr/bin/env python3
"""A small GPT on a real corpus, end to end: the English fortune files of Debian's
`fortunes` package (scripts/setup installs it; nothing is downloaded), a
byte-level BPE tokenizer of 4096 ids trained on them, examples/configs/gpt_small.toml
trained on the shard, its held-out perplexity against a unigram baseline on the
same ids, and a few samples.

  python3 bench/text/fortunes_lm.py [--braid build/bin/braid] [--out DIR] [--threads N]
                                    [--seed 1] [--set KEY=VALUE ...]

Steps (OUT is --out, else a temporary folder removed at the end):
 1. examples/fortunes_shards.sh OUT/data: tokenizer and shard.
 2. The held-out split as the trainer makes it (data.name = tokens, data.stride = 0:
    windows of context + 1 ids, `context` apart; the last tenth of them, rounded
    down, is held out) is written as its own shard, OUT/heldout/heldout-00000.tok.
 3. Unigram baseline: counts of each id over the ids the training windows read,
    add-one smoothing over the whole vocabulary, scored on the ids the held-out
    windows predict (every held-out id but the first).
 4. braid train CONFIG on all cores, the only evaluation being the trainer's final
    one over the whole held-out split (train.eval_steps = 0, train.eval_batches = 0).
 5. braid eval on OUT/heldout: the same windows (eval's windows overlap by one id,
    as the tiled training windows do), so its loss must equal the trainer's final
    test loss; both are printed and a difference over 1e-3 is an error.
 6. braid generate after each prompt (--temperature 0.8 --top-k 40, fixed seed).

Needs numpy (Debian's python3-numpy, which scripts/setup installs with
python3-torch; /usr/bin/python3 has it).
"""
import argparse
import glob
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import tomllib

try:
    import numpy as np
except ImportError:
    sys.exit("fortunes_lm: needs numpy: run it with /usr/bin/python3 (Debian's python3-numpy, which scripts/setup installs)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FORTUNES = "/usr/share/games/fortunes"
HEADER = 32
PROMPTS = ["The computer", "A wise man", "Linux"]


def read_shard(path):
    """The ids of a token shard (header in docs/text.md) and its vocabulary size."""
    b = open(path, "rb").read()
    if b[:8] != b"BRAIDTOK":
        sys.exit(f"fortunes_lm: {path} is not a token shard")
    width, count, vocab = struct.unpack_from("<I", b, 12)[0], struct.unpack_from("<Q", b, 16)[0], struct.unpack_from("<I", b, 24)[0]
    return np.frombuffer(b, dtype="<u2" if width == 2 else "<u4", count=count, offset=HEADER), vocab


def write_shard(path, ids, vocab):
    width = 2 if vocab <= 65536 else 4
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"BRAIDTOK" + struct.pack("<IIQII", 1, width, len(ids), vocab, 0))
        f.write(np.asarray(ids, dtype="<u2" if width == 2 else "<u4").tobytes())


def token_bytes(tok_dir, vocab):
    """Bytes of text each id stands for (byte-level tokens: one character per byte;
    added tokens such as <|endoftext|> stand for none)."""
    n = np.zeros(vocab, dtype=np.int64)
    for token, i in json.load(open(os.path.join(tok_dir, "vocab.json"), encoding="utf-8")).items():
        n[i] = len(token)
    for t in json.load(open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8")).get("added_tokens", []):
        n[t["id"]] = 0
    return n


def fortune_files():
    """The files examples/fortunes_shards.sh encodes, in its (the shell glob's) order."""
    return [p for p in sorted(glob.glob(os.path.join(FORTUNES, "*")))
            if os.path.isfile(p) and not p.endswith((".dat", ".u8"))]


def run(cmd, capture=False):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, cwd=ROOT, text=True, stdout=subprocess.PIPE if capture else None)
    if r.returncode != 0:
        sys.exit(f"fortunes_lm: {cmd[0]} {cmd[1]} failed with status {r.returncode}")
    return r.stdout


def config_value(config, sets, key):
    for s in reversed(sets):
        k, _, v = s.partition("=")
        if k == key:
            return v
    section, _, name = key.partition(".")
    return config.get(section, {}).get(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--braid", default="build/bin/braid")
    ap.add_argument("--config", default="examples/configs/gpt_small.toml")
    ap.add_argument("--out", help="folder for shards, run and held-out shard (kept); default a temporary one")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="default: all cores")
    ap.add_argument("--seed", type=int, default=1, help="sampling seed of braid generate")
    ap.add_argument("--tokens", type=int, default=60, help="tokens each sample generates")
    ap.add_argument("--prompt", action="append", help=f"repeatable; default {PROMPTS}")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE passed to braid train (repeatable)")
    a = ap.parse_args()
    braid = os.path.abspath(os.path.join(ROOT, a.braid))
    config_path = os.path.join(ROOT, a.config)
    config = tomllib.load(open(config_path, "rb"))
    context = int(config_value(config, a.set, "model.context"))
    if int(config_value(config, a.set, "data.stride") or 0) not in (0, context):
        sys.exit("fortunes_lm: the held-out split assumes tiled windows (data.stride = 0)")
    out = os.path.abspath(a.out) if a.out else tempfile.mkdtemp(prefix="fortunes_lm-")
    load_before = os.getloadavg()
    t_start = time.perf_counter()
    try:
        report(a, braid, config_path, context, out, load_before, t_start)
    finally:
        if not a.out:
            shutil.rmtree(out, ignore_errors=True)


def report(a, braid, config_path, context, out, load_before, t_start):
    data, run_dir = os.path.join(out, "data"), os.path.join(out, "run")
    if os.path.exists(run_dir):
        sys.exit(f"fortunes_lm: {run_dir} exists; a run there would resume from its checkpoints (remove it)")

    # 1. Tokenizer and shard.
    run([os.path.join(ROOT, "examples/fortunes_shards.sh"), data, braid])
    shards = sorted(glob.glob(os.path.join(data, "train-*.tok")))
    if len(shards) != 1:
        sys.exit(f"fortunes_lm: expected one shard in {data}, found {len(shards)}")
    ids, vocab = read_shard(shards[0])
    nbytes = token_bytes(data, vocab)

    # 2. The trainer's split: windows i*context .. i*context + context, the last tenth held out.
    windows = (len(ids) - context - 1) // context + 1
    held_windows = windows // 10
    start = (windows - held_windows) * context
    held = ids[start:windows * context + 1]
    heldout = os.path.join(out, "heldout", "heldout-00000.tok")
    write_shard(heldout, held, vocab)
    targets = held[1:]  # what the held-out windows predict
    files = fortune_files()
    ends = np.flatnonzero(ids == 0)  # <|endoftext|> (id 0) after each file
    covered = [os.path.basename(f) for f, e in zip(files, ends) if e >= start] if len(ends) == len(files) else ["?"]

    # 3. Unigram baseline on the same ids.
    counts = np.bincount(ids[:start + 1], minlength=vocab).astype(np.float64)
    logp = np.log((counts + 1) / (counts.sum() + vocab))
    uni_loss = float(-logp[targets].mean())

    # 4. Train.
    t_train = time.perf_counter()
    run([braid, "train", config_path, "--set", f"data.path={data}/train-*.tok", "--set", f"train.out_dir={run_dir}",
         "--set", f"train.threads={a.threads}", "--set", "train.eval_steps=0", "--set", "train.eval_batches=0",
         "--set", "train.progress=lines", *[x for s in a.set for x in ("--set", s)]])
    train_wall = time.perf_counter() - t_train
    events = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    end = next(e for e in reversed(events) if e["event"] == "end")
    final_eval = next(e for e in reversed(events) if e["event"] == "eval")

    # 5. braid eval on the held-out shard.
    ev = json.loads(run([braid, "eval", run_dir, "--tokens", heldout, "--json", "--threads", str(a.threads)],
                        capture=True))
    if ev["tokens"] != len(targets) or ev["windows"] != held_windows:
        sys.exit(f"fortunes_lm: braid eval read {ev['windows']} windows predicting {ev['tokens']} ids; the held-out "
                 f"split has {held_windows} windows predicting {len(targets)}")
    if abs(ev["loss"] - final_eval["loss"]) > 1e-3:
        sys.exit(f"fortunes_lm: braid eval's loss {ev['loss']:.5f} differs from the trainer's final test loss "
                 f"{final_eval['loss']:.5f} over the same windows")

    # 6. Samples.
    samples = []
    for p in a.prompt or PROMPTS:
        g = json.loads(run([braid, "generate", run_dir, "--prompt", p, "--tokens", str(a.tokens), "--temperature",
                            "0.8", "--top-k", "40", "--seed", str(a.seed), "--json", "--threads", str(a.threads)],
                           capture=True))
        samples.append(g)

    held_bytes = int(nbytes[targets].sum())
    print()
    print(f"corpus: {len(files)} fortune files, {int(nbytes[ids].sum())} bytes -> {len(ids)} ids (vocabulary {vocab})")
    print(f"windows of {context + 1} ids: {windows}, held out the last {held_windows} ({len(targets)} ids predicted, "
          f"{held_bytes} bytes: the end of {covered[0]}, then {', '.join(covered[1:])})")
    print(f"training: {end['steps']} steps, {end['train_seconds']:.1f} s of steps, {train_wall:.1f} s wall with "
          f"the final evaluation, {end['tokens_per_s']:.0f} tokens/s, mfu {100 * end.get('mfu', 0):.1f}% "
          f"({a.threads} threads), final train loss {end['final_loss']:.4f}")
    print(f"held-out, unigram (add-one):  loss {uni_loss:.4f}  perplexity {math.exp(uni_loss):8.2f}  "
          f"{uni_loss * len(targets) / math.log(2) / held_bytes:.3f} bits/byte")
    print(f"held-out, gpt_small:          loss {ev['loss']:.4f}  perplexity {ev['perplexity']:8.2f}  "
          f"{ev['loss'] * len(targets) / math.log(2) / held_bytes:.3f} bits/byte  "
          f"(trainer's final test loss {final_eval['loss']:.4f}; braid eval {ev['seconds']:.1f} s)")
    print(f"wall time {time.perf_counter() - t_start:.0f} s; load average before {load_before[0]:.2f}, "
          f"after {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    for g in samples:
        print(f"\n--- {g['prompt']!r} (seed {a.seed}, {g['tokens_per_s']:.0f} tokens/s)")
        print(g["prompt"] + g["text"])


if __name__ == "__main__":
    main()
