#!/usr/bin/env python3
"""Synthetic sparse binary classification data in libsvm format.

A planted sparse linear model over F feature ids: half the features get a
weight drawn from N(0, 1), the rest weight 0. Each example draws 10-40
distinct features from a Zipf-like distribution (P(rank r) ~ 1 / r^1.1, ranks
mapped to ids by a fixed random permutation, so popular features are spread
over the id range as they are in real click logs and hash buckets). Its label
is 1 when the planted score minus the median score, plus N(0, (0.1 sigma)^2)
noise, is positive, else 0: about half the examples are positive. With the
defaults, ~5% of labels disagree with the noiseless rule, and most features are
rare: a sum-pooled logistic regression (PyTorch EmbeddingBag + Adam) fits the
first 16k rows perfectly but reaches only ~0.78 accuracy on the last 4k, so
there is room for regularisation, hashing and bigger data to matter.

Deterministic for a given --seed (Python's random module, standard library
only). 20 000 rows take about a second. An --out ending in .gz is gzipped
(LibsvmDataset reads both).

  python3 scripts/make_sparse_data.py --out /tmp/sparse.svm
  python3 scripts/make_sparse_data.py --out s.svm.gz --examples 100000 --features 1000000 --seed 3
"""
import argparse
import gzip
import itertools
import random
import statistics
import sys

ZIPF_EXPONENT = 1.1
MIN_NNZ, MAX_NNZ = 10, 40


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="output libsvm file (.gz: gzipped)")
    p.add_argument("--examples", type=int, default=20000, help="rows to write (default 20000)")
    p.add_argument("--features", type=int, default=100000, help="feature ids 1..F (default 100000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--values", choices=["binary", "float"], default="binary",
                   help="feature values: 1 (default) or uniform in [0.1, 1)")
    a = p.parse_args(argv)
    if a.examples < 1 or a.features < MAX_NNZ:
        p.error(f"need --examples >= 1 and --features >= {MAX_NNZ}")

    rng = random.Random(a.seed)
    F = a.features
    ids = list(range(1, F + 1))  # 1-based libsvm ids, by popularity rank
    rng.shuffle(ids)
    cum = list(itertools.accumulate(1.0 / (r ** ZIPF_EXPONENT) for r in range(1, F + 1)))
    weight = [rng.gauss(0.0, 1.0) if rng.random() < 0.5 else 0.0 for _ in range(F + 1)]  # by id

    rows = []
    scores = []
    for _ in range(a.examples):
        nnz = rng.randint(MIN_NNZ, MAX_NNZ)
        chosen = set()
        while len(chosen) < nnz:  # popular ids repeat: draw until nnz distinct
            chosen.update(rng.choices(ids, cum_weights=cum, k=nnz - len(chosen)))
        feats = sorted(chosen)
        if a.values == "binary":
            vals = [1.0] * nnz
        else:
            vals = [round(rng.uniform(0.1, 1.0), 4) for _ in range(nnz)]
        rows.append((feats, vals))
        scores.append(sum(weight[j] * v for j, v in zip(feats, vals)))

    center = statistics.median(scores)
    noise = 0.1 * (statistics.pstdev(scores) or 1.0)
    lines = []
    positives = 0
    for (feats, vals), s in zip(rows, scores):
        label = 1 if s - center + rng.gauss(0.0, noise) > 0 else 0
        positives += label
        if a.values == "binary":
            body = " ".join(f"{j}:1" for j in feats)
        else:
            body = " ".join(f"{j}:{v:g}" for j, v in zip(feats, vals))
        lines.append(f"{label} {body}\n")

    opener = gzip.open if a.out.endswith(".gz") else open
    with opener(a.out, "wt") as f:
        f.writelines(lines)
    used = len({j for feats, _ in rows for j in feats})
    nnz_total = sum(len(feats) for feats, _ in rows)
    print(f"{a.out}: {a.examples} examples, {nnz_total} nonzeros, {used} of {F} features used, "
          f"{positives / a.examples:.3f} positive", file=sys.stderr)


if __name__ == "__main__":
    main()
