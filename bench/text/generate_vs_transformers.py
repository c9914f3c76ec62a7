#!/usr/bin/env python3
"""Generation speed of `braid generate` against transformers' `generate` (with
its key-value cache), on the same Hugging Face model, same prompt, greedy,
1 and 2 threads; runs alternate, medians reported.

Runs under the benchmark environment (scripts/setup --bench makes .venv-bench:
PyTorch 2.x and transformers from PyPI):

  .venv-bench/bin/python bench/text/generate_vs_transformers.py \\
      [--braid build/bin/braid] [--layers 6] [--dim 384] [--heads 6] [--vocab 8192] \\
      [--context 256] [--prompt 32] [--tokens 128] [--runs 5] [--threads 1,2] [--arch gpt2]

The model (GPT-2 shaped by default: 6 layers x 384, vocabulary 8192, 256
positions; --arch llama for a LLaMA of the same size) is made here with
random weights and saved with save_pretrained; braid reads that folder.
Both sides time the generation alone, prefill included, the model already
loaded: braid's figure is the tokens/s `braid generate --json` reports,
transformers' the wall time of model.generate(max_new_tokens = min_new_tokens
= --tokens, do_sample=False, use_cache=True) under torch.inference_mode, after
one warm-up call. braid's greedy ids are checked equal to transformers' (the
same model in f32; a mismatch is reported, not fatal: near-ties of random
weights may flip under different summation orders).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import transformers

transformers.logging.set_verbosity_error()


def make_model(args, out):
    torch.manual_seed(0)
    if args.arch == "gpt2":
        config = transformers.GPT2Config(vocab_size=args.vocab, n_positions=args.context, n_embd=args.dim,
                                         n_layer=args.layers, n_head=args.heads, bos_token_id=None,
                                         eos_token_id=None)
        model = transformers.GPT2LMHeadModel(config)
    else:
        config = transformers.LlamaConfig(vocab_size=args.vocab, hidden_size=args.dim,
                                          intermediate_size=4 * args.dim, num_hidden_layers=args.layers,
                                          num_attention_heads=args.heads, num_key_value_heads=args.heads // 2,
                                          max_position_embeddings=args.context, bos_token_id=None,
                                          eos_token_id=None)
        model = transformers.LlamaForCausalLM(config)
    model.eval()
    model.save_pretrained(out)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def braid_run(args, folder, prompt, threads):
    cmd = [args.braid, "generate", folder, "--prompt-ids", json.dumps(prompt), "--tokens", str(args.tokens),
           "--temperature", "0", "--json", "--threads", str(threads)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    r = json.loads(out)
    return r["tokens_per_s"], r["new_ids"]


def hf_run(args, model, prompt, threads):
    torch.set_num_threads(threads)
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.tokens,
                             min_new_tokens=args.tokens, do_sample=False, use_cache=True)
        s = time.perf_counter() - t0
    return args.tokens / s, out[0, len(prompt):].tolist()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--braid", default=os.path.join(os.path.dirname(__file__), "../../build/bin/braid"))
    p.add_argument("--arch", choices=["gpt2", "llama"], default="gpt2")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    p.add_argument("--tokens", type=int, default=128, help="new tokens per generation")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "model")
        model = make_model(args, folder)
        prompt = torch.randint(0, args.vocab, (args.prompt,), generator=torch.Generator().manual_seed(1)).tolist()
        results = []
        for threads in [int(t) for t in args.threads.split(",")]:
            hf_run(args, model, prompt, threads)  # warm-up (allocator, kernels)
            braid_rates, hf_rates, same = [], [], True
            for _ in range(args.runs):
                rate, braid_ids = braid_run(args, folder, prompt, threads)
                braid_rates.append(rate)
                rate, hf_ids = hf_run(args, model, prompt, threads)
                hf_rates.append(rate)
                same = same and braid_ids == hf_ids
            r = {"threads": threads, "braid_tokens_per_s": statistics.median(braid_rates),
                 "transformers_tokens_per_s": statistics.median(hf_rates), "same_ids": same}
            r["ratio"] = r["braid_tokens_per_s"] / r["transformers_tokens_per_s"]
            results.append(r)
            print(f"threads {threads}: braid {r['braid_tokens_per_s']:.1f} tokens/s, transformers "
                  f"{r['transformers_tokens_per_s']:.1f} tokens/s, ratio {r['ratio']:.2f}x"
                  f"{'' if same else ' (greedy ids differ)'}", flush=True)
    summary = {"model": f"{args.arch} {args.layers} layers x {args.dim}, vocab {args.vocab}, context {args.context}",
               "prompt": args.prompt, "tokens": args.tokens, "runs": args.runs,
               "torch": torch.__version__, "transformers": transformers.__version__, "results": results}
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
