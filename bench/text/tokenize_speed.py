#!/usr/bin/env python3
"""Encode speed of braid's byte-level BPE against Hugging Face `tokenizers`, same
tokenizer, same corpus, 1 thread and all threads; medians of alternating runs.

Needs `tokenizers` in some Python (not the project's): by default /tmp/tokvenv,
made with  python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers.

  python3 bench/text/tokenize_speed.py [--braid build/bin/braid] [--mb 20] [--vocab 8192] [--runs 5]

The corpus is every fortune file the project's setup installs, copied until it
reaches --mb megabytes; each copy of a file is one document. The tokenizer is
trained by `tokenizers` on one copy. Both sides time the encoding alone (files
already in memory): braid's figure is the one `braid tokenize encode --json`
reports, HF's the time of Tokenizer.encode_batch. braid also writes its shards
(not timed). The id counts are compared as a sanity check.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

FORTUNES = "/usr/share/games/fortunes"

HF_RUN = r"""
import json, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
docs = [open(p, 'rb').read().decode('utf-8', 'replace') for p in sys.argv[2:]]
t0 = time.perf_counter()
enc = tok.encode_batch(docs)
s = time.perf_counter() - t0
n = sum(len(e.ids) for e in enc) + len(docs)  # braid adds an <|endoftext|> per document
print(json.dumps({"encode_s": s, "ids": n, "bytes": sum(len(d.encode()) for d in docs)}))
"""

HF_TRAIN = r"""
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.post_processor = processors.ByteLevel(trim_offsets=True)
tr = trainers.BpeTrainer(vocab_size=int(sys.argv[2]), special_tokens=["<|endoftext|>"],
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
tok.train(sys.argv[3:], tr)
tok.save(sys.argv[1])
"""


def fortune_files():
    out = []
    for name in sorted(os.listdir(FORTUNES)):
        p = os.path.join(FORTUNES, name)
        if name.endswith((".dat", ".u8")) or os.path.islink(p) or not os.path.isfile(p):
            continue
        out.append(p)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--braid", default=os.path.join(os.path.dirname(__file__), "../../build/bin/braid"))
    ap.add_argument("--python", default="/tmp/tokvenv/bin/python", help="a Python with tokenizers")
    ap.add_argument("--mb", type=float, default=20)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="tokenize_speed_")
    try:
        sources = fortune_files()
        files, size, copy = [], 0, 0
        while size < a.mb * 1e6:
            for src in sources:
                dst = os.path.join(work, f"{copy:03d}_{os.path.basename(src)}")
                shutil.copyfile(src, dst)
                files.append(dst)
                size += os.path.getsize(dst)
            copy += 1
        tok = os.path.join(work, "tokenizer.json")
        subprocess.run([a.python, "-c", HF_TRAIN, tok, str(a.vocab)] + sources, check=True)
        print(f"corpus: {len(files)} documents, {size / 1e6:.1f} MB; vocabulary {a.vocab}; {a.runs} runs each")

        def braid(threads):
            r = subprocess.run([a.braid, "tokenize", "encode", "--tokenizer", tok, "--out", os.path.join(work, "shard"),
                                "--threads", str(threads), "--json"] + files, check=True, capture_output=True, text=True)
            j = json.loads(r.stdout.strip().splitlines()[-1])
            return j["bytes"] / 1e6 / j["encode_s"], j["ids"]

        def hf(threads):
            env = dict(os.environ, RAYON_NUM_THREADS=str(threads),
                       TOKENIZERS_PARALLELISM="true" if threads > 1 else "false")
            r = subprocess.run([a.python, "-c", HF_RUN, tok] + files, check=True, capture_output=True, text=True,
                               env=env)
            j = json.loads(r.stdout)
            return j["bytes"] / 1e6 / j["encode_s"], j["ids"]

        for threads in sorted({1, a.threads}):
            ours, theirs = [], []
            for _ in range(a.runs):  # alternating, so drift in the machine hits both alike
                mb, n_ours = braid(threads)
                ours.append(mb)
                mb, n_theirs = hf(threads)
                theirs.append(mb)
            if n_ours != n_theirs:
                print(f"  warning: braid wrote {n_ours} ids, tokenizers gave {n_theirs}", file=sys.stderr)
            o, t = statistics.median(ours), statistics.median(theirs)
            print(f"threads {threads}: braid {o:6.1f} MB/s   tokenizers {t:6.1f} MB/s   ratio {o / t:.2f}x"
                  f"   (ids equal: {n_ours == n_theirs})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
