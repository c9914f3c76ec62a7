#!/usr/bin/python3
"""bf16 mixed precision against f32 on this machine, in one run: the
Fashion-MNIST MLP and CNN (examples/configs), trained by `braid train` with
train.precision = f32 and = bf16, and by PyTorch (bench/train/torch_train.py)
in f32 and under torch.autocast("cpu", dtype=torch.bfloat16), the peer.

Every configuration trains --epochs epochs (constant learning rate) and is then
evaluated on the 10k test images. The configurations run in a round, the
round repeats --reps times (reversed every other round), and figures are
medians over rounds; the bf16/f32 speed ratio is the median of each round's own
ratio (the machine drifts between rounds more than within one). PyTorch runs
with glibc's mmap threshold raised (GLIBC_TUNABLES below): its best case here.
Prints samples/s, test top-1 and the ratios; JSON to
bench/results/bf16_vs_f32-t<threads>.json.

    flock /tmp/bench.lock /usr/bin/python3 bench/precision/bf16_vs_f32.py --build build --reps 3
"""
import argparse, json, os, platform, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCH_ENV = {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"}
PRECISIONS = ("f32", "bf16")


def run_braid(build, model, precision, a):
    with tempfile.TemporaryDirectory() as out:
        summary = os.path.join(out, "summary.json")
        cmd = [os.path.join(build, "bin", "braid"), "train", os.path.join(ROOT, "examples", "configs", f"fashion_{model}.toml"),
               "--summary-json", summary]
        for s in [f"train.precision={precision}", f"train.epochs={a.epochs}", f"train.threads={a.threads}",
                  f"train.max_steps={a.max_steps}", f"train.eval_every={a.epochs}", "train.progress=off",
                  f"train.out_dir={out}", "optim.schedule=constant", f"train.batch_size={a.batch}"]:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=3600)
        with open(summary) as f:
            s = json.load(f)
    return {"samples_per_s": s["samples_per_s"], "top1": s["eval"]["top1"], "final_loss": s["final_loss"]}


def run_torch(model, precision, a):
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "bench", "train", "torch_train.py"), "--model", model,
           "--batch", str(a.batch), "--threads", str(a.threads), "--max-steps", str(a.max_steps),
           "--epochs", str(a.epochs), "--precision", precision, "--eval"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=3600, env={**os.environ, **TORCH_ENV})
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"samples_per_s": r["samples_per_s"], "top1": r["top1"], "final_loss": r["final_loss"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0, help="0: whole epochs")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-torch", action="store_true")
    a = p.parse_args()
    frameworks = ["braid"] + ([] if a.no_torch else ["pytorch"])
    confs = [(m, fw, prec) for m in a.models.split(",") for fw in frameworks for prec in PRECISIONS]
    rounds = []
    for rep in range(a.reps):
        order = confs if rep % 2 == 0 else list(reversed(confs))
        rounds.append({f"{m} {fw} {prec}": (run_braid(a.build, m, prec, a) if fw == "braid" else run_torch(m, prec, a))
                       for m, fw, prec in order})
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"{a.epochs} epoch(s), batch {a.batch}, {a.threads} threads, {a.reps} rounds (medians); "
          f"load average at the end {' '.join(load)}")
    print(f"{'model':5} {'framework':9} | {'f32 /s':>8} {'bf16 /s':>8} {'bf16/f32':>8} | {'f32 top-1':>9} {'bf16 top-1':>10}")
    table = {}
    for m in a.models.split(","):
        for fw in frameworks:
            row = {prec: {k: statistics.median(r[f"{m} {fw} {prec}"][k] for r in rounds)
                          for k in ("samples_per_s", "top1")} for prec in PRECISIONS}
            row["speed_ratio"] = statistics.median(
                r[f"{m} {fw} bf16"]["samples_per_s"] / r[f"{m} {fw} f32"]["samples_per_s"] for r in rounds)
            table[f"{m} {fw}"] = row
            print(f"{m:5} {fw:9} | {row['f32']['samples_per_s']:8.0f} {row['bf16']['samples_per_s']:8.0f} "
                  f"{row['speed_ratio']:8.2f} | {row['f32']['top1']:9.4f} {row['bf16']['top1']:10.4f}")
        if not a.no_torch:
            for prec in PRECISIONS:
                ratio = statistics.median(r[f"{m} braid {prec}"]["samples_per_s"] / r[f"{m} pytorch {prec}"]["samples_per_s"]
                                          for r in rounds)
                table[f"{m} braid/pytorch {prec}"] = ratio
                print(f"{m:5} braid/pytorch {prec}: {ratio:.2f}x")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"bf16_vs_f32-t{a.threads}.json"), "w") as f:
        json.dump({"args": vars(a), "cpu": platform.processor() or platform.machine(), "load_average": load,
                   "table": table, "rounds": rounds}, f, indent=1)


if __name__ == "__main__":
    main()
