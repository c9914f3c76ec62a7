"""PyTorch oracle for braid's op tests (see torch_oracle.h).

Reads one JSON request per line on stdin, writes one JSON reply per line on
stdout. The first line written is a hello: {"ok": true, "torch": version} or
{"ok": false, "error": why} when torch cannot be imported.

Request:  {"cases": [{"expr": str, "inputs": [tensor], "grad": [name],
                      "grad_output": tensor | null}]}
Reply:    {"results": [{"ok": true, "outputs": [tensor], "grads": {name: tensor}}
                       | {"ok": false, "error": traceback}]}
tensor:   {"name": str, "dtype": "f32"|..., "shape": [int], "data": base64 of
           the little-endian row-major bytes}
"""
import base64
import json
import math
import sys
import traceback

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # noqa: BLE001 - any import failure means "skip"
    sys.stdout.write(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}) + "\n")
    sys.stdout.flush()
    sys.exit(0)

# The test machine has few cores shared by many processes: one thread.
torch.set_num_threads(1)

DTYPES = {
    "f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
    "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}


def decode(t):
    raw = bytearray(base64.b64decode(t["data"]))
    dtype = DTYPES[t["dtype"]]
    if len(raw) == 0:
        return torch.empty(t["shape"], dtype=dtype)
    return torch.frombuffer(raw, dtype=dtype).reshape(t["shape"]).clone()


def encode(x, name=""):
    if not isinstance(x, torch.Tensor):
        x = torch.tensor(x)
    x = x.detach().contiguous()
    if x.dtype not in NAMES:
        x = x.to(torch.float64)
    data = x.numpy().tobytes() if x.dtype != torch.bfloat16 else x.view(torch.int16).numpy().tobytes()
    return {"name": name, "dtype": NAMES[x.dtype], "shape": list(x.shape),
            "data": base64.b64encode(data).decode("ascii")}


def run_case(case):
    env = {"torch": torch, "F": F, "math": math}
    wanted = set(case.get("grad") or [])
    order = []
    for t in case["inputs"]:
        x = decode(t)
        if t["name"] in wanted:
            x.requires_grad_(True)
            order.append(t["name"])
        env[t["name"]] = x
    out = eval(case["expr"], env)  # noqa: S307 - test-only oracle, expressions come from the test source
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    outs = [o if isinstance(o, torch.Tensor) else torch.tensor(o) for o in outs]
    grads = {}
    if order:
        first = outs[0]
        r = case.get("grad_output")
        r = decode(r).to(first.dtype) if r else torch.ones_like(first)
        gs = torch.autograd.grad((first * r).sum(), [env[n] for n in order], allow_unused=True)
        for n, g in zip(order, gs):
            grads[n] = encode(g if g is not None else torch.zeros_like(env[n]), n)
    return {"ok": True, "outputs": [encode(o) for o in outs], "grads": grads}


def main():
    sys.stdout.write(json.dumps({"ok": True, "torch": torch.__version__}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        results = []
        for case in req["cases"]:
            try:
                results.append(run_case(case))
            except Exception:  # noqa: BLE001 - reported back to the C++ test
                results.append({"ok": False, "error": f"{case.get('expr')}: {traceback.format_exc()}"})
        sys.stdout.write(json.dumps({"results": results}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
