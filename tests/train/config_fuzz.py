#!/usr/bin/env python3
"""Bad input where a user types: mutated config files through `braid train
--dry-run`. Every case must end within its deadline, never crash (no signal,
no "unexpected error"), and either pass (the mutation happened to be valid) or
fail with exit status 1 and one line `braid: error: ...` that names what is
wrong: the mutated key, or for a file that is not TOML at all, the file.

  config_fuzz.py --braid build/bin/braid --config examples/configs/fashion_mlp.toml [--cases N] [--seed S]

Cases: the key set to a value of every other type, negative, zero, huge and
fractional numbers, unknown choices, long strings, arrays and tables where a
value goes; plus whole-file damage: empty, binary garbage, truncated, a
directory, unbalanced brackets, duplicate keys, deep nesting.
"""
import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

DEADLINE_S = 30  # a dry run loads the data set and builds the model: a few seconds here


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def key_values(rng):
    """Values of every kind a user might put where another belongs."""
    return [
        "-1", "0", "-9223372036854775808", "9223372036854775807", "18446744073709551616", "1e308", "-1e308",
        "0.5", "-0.0", "nan", "inf", "-inf", "true", "false", '""', '"unknown_choice"', '"' + "x" * 5000 + '"',
        "[1, 2]", "[]", "{a = 1}", "1979-05-27", '"\\u0000"', '"' + "é" * 10 + '"',
        str(rng.randint(-10**6, 10**6)), repr(rng.uniform(-1e6, 1e6)),
    ]


def file_cases(base):
    lines = base.splitlines()
    return [
        ("empty file", ""),
        ("binary garbage", "\x00\x01\x02\xff\xfe" * 50),
        ("truncated", base[: len(base) // 2]),
        ("unbalanced table", "[train\nepochs = 1\n"),
        ("duplicate key", base + "\n[train]\nepochs = 3\n"),
        ("deep nesting", "a = " + "[" * 5000 + "]" * 5000 + "\n"),
        ("key without value", "[train]\nepochs =\n"),
        ("unknown section", "[nonsense]\nx = 1\n"),
        ("only comments", "# nothing\n" * 10),
        ("bom", "\ufeff" + base),
        ("lines reversed", "\n".join(reversed(lines))),
        ("huge key name", "[train]\n" + "k" * 1000000 + " = 1\n"),
        ("huge value", base.replace("[train]\n", "[train]\nout_dir = \"" + "d" * 1000000 + "\"\n", 1)),
    ]


def run_case(braid, path, workdir):
    start = time.monotonic()
    try:
        p = subprocess.run([braid, "train", path, "--dry-run", "--set", f"train.out_dir={workdir}/out"],
                           capture_output=True, text=True, errors="replace", timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        return None, "", time.monotonic() - start
    return p.returncode, p.stdout + p.stderr, time.monotonic() - start


def check(name, rc, out, took, must_name):
    """A failure text, or None when the case behaved."""
    if rc is None:
        return f"{name}: no answer within {DEADLINE_S} s (a hang)"
    if rc < 0 or rc > 1:
        return f"{name}: exit status {rc} (a crash?)\n{out[-2000:]}"
    if rc == 0:
        return None
    errors = [l for l in out.splitlines() if l.startswith("braid: ")]
    if len(errors) != 1:
        return f"{name}: expected one 'braid: error:' line, got {len(errors)}:\n{out[-2000:]}"
    line = errors[0]
    if "unexpected error" in line:
        return f"{name}: an untyped error: {line[:400]}"
    if len(line) > 2000:
        return f"{name}: a {len(line)}-character error line (values must be abridged)"
    if must_name and not any(m in line for m in must_name):
        return f"{name}: the error names none of {must_name}: {line[:400]}"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--braid", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--cases", type=int, default=60, help="key mutations (the file cases always run)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    base = open(args.config).read()
    # The keys the file sets, as (section, key, line index).
    keys, section = [], None
    lines = base.splitlines()
    for i, l in enumerate(lines):
        m = re.match(r"^\s*\[([a-z_]+)\]\s*$", l)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^\s*([a-z_0-9]+)\s*=", l)
        if m and section:
            keys.append((section, m.group(1), i))
    if not keys:
        sys.exit(f"{args.config}: no keys found to mutate")
    workdir = tempfile.mkdtemp(prefix="braid_config_fuzz_")
    failures, counts = [], {"passed": 0, "refused": 0}
    try:
        cases = []
        for name, text in file_cases(base):
            cases.append((name, text, ["c.toml"]))  # a damaged file is named, with line and column
        values = key_values(rng)
        for n in range(args.cases):
            section, key, i = rng.choice(keys)
            v = rng.choice(values)
            mutated = list(lines)
            mutated[i] = f"{key} = {v}"
            cases.append((f"{section}.{key} = {v[:40]}", "\n".join(mutated) + "\n", [f"{section}.{key}"]))
        # A key that is not in the schema.
        cases.append(("unknown key", base.replace("[train]\n", "[train]\nlearning_rate = 0.1\n", 1), ["learning_rate"]))
        for name, text, must_name in cases:
            path = os.path.join(workdir, "c.toml")
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(text)
            rc, out, took = run_case(args.braid, path, workdir)
            problem = check(name, rc, out, took, must_name)
            if problem:
                failures.append(problem)
            else:
                counts["passed" if rc == 0 else "refused"] += 1
        # A directory where the file should be.
        rc, out, took = run_case(args.braid, workdir, workdir)
        problem = check("a directory as the config", rc, out, took, [workdir])
        if problem:
            failures.append(problem)
        else:
            counts["refused"] += 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for f in failures:
        print("FAIL", f)
    total = counts["passed"] + counts["refused"]
    print(f"config fuzz: {total} cases behaved ({counts['refused']} refused with one line, {counts['passed']} valid), "
          f"{len(failures)} misbehaved")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
