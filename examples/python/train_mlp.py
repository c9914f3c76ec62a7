"""Training in one process with a loop written in Python: the Fashion-MNIST
MLP of examples/fashion_mlp.h built from braid.nn modules, SGD with momentum
and a cosine schedule with warmup, evaluation and a safetensors checkpoint.
Every op runs in braid's C++ with the GIL released (examples/train_mlp.cc is
the same program in C++).

    python examples/python/train_mlp.py [steps [out_dir]]     (0: one epoch, 938 steps)
"""
import os
import sys
import time

import braid
from braid import nn

max_steps = int(sys.argv[1]) if len(sys.argv) > 1 else 0
out_dir = sys.argv[2] if len(sys.argv) > 2 else "runs/train_mlp_py"

train_set = braid.data.FashionMnist(train=True)
test_set = braid.data.FashionMnist(train=False)
train = braid.data.Loader(train_set, batch_size=64, shuffle=True, seed=0)
test = braid.data.Loader(test_set, batch_size=256)

# 784-256-256-10, weights from braid's Philox generator: the same on every machine.
g = braid.Generator(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256, generator=g), nn.ReLU(), nn.Linear(256, 256, generator=g),
                      nn.ReLU(), nn.Linear(256, 10, generator=g))
steps = max_steps if max_steps > 0 else len(train)
opt = braid.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
schedule = braid.optim.make_schedule("cosine", base_lr=0.05, total_steps=steps, warmup_steps=min(100, steps // 10))

step, start, window = 0, time.perf_counter(), []
for x, y in train:  # one epoch
    opt.lr = schedule(step)
    loss = braid.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    window.append(loss.item())
    if step % 200 == 0:
        print(f"step {step}/{steps} loss {sum(window) / len(window):.4f} lr {opt.lr:.4g}", flush=True)
    if step == steps:
        break
final_loss = sum(window[-100:]) / len(window[-100:])
seconds = time.perf_counter() - start

model.eval()
correct = 0
with braid.no_grad():
    for x, y in test:
        correct += int((model(x).argmax(dim=1) == y).numpy().sum())
accuracy = correct / len(test_set)

os.makedirs(out_dir, exist_ok=True)
checkpoint = os.path.join(out_dir, "model.safetensors")
model.save(checkpoint)
print(f"trained {step} steps in {seconds:.1f} s: final loss {final_loss:.4f}, test accuracy {accuracy:.4f}, "
      f"checkpoint {checkpoint}")
