"""Hugging Face `transformers` as the oracle of braid's HF checkpoints
(tests/models/hf_checkpoint_test.cc, tests/models/hf_cli.sh). Runs under the
project's .venv (transformers over Debian's torch); nothing is downloaded:
every model is built here from a config with random weights.

  hf_ref.py make OUT                     tiny GPT-2 and LLaMA folders + reference outputs
  hf_ref.py tiny OUT ARCH VOCAB          one folder (gpt2 or llama), 64 positions, for the CLI test
  hf_ref.py logits IN MODEL...           logits of each MODEL for IN's "tokens" -> MODEL.logits.safetensors
  hf_ref.py generate MODEL IDS N         greedy continuation of IDS (JSON list), N new ids
  hf_ref.py loss MODEL IDS_JSON CONTEXT  mean next-token loss over braid eval's windows

A reference file (safetensors) holds "tokens" [2, 12], "logits" [2, 12, V],
"prompt" [5] and "generated" [10] (transformers' greedy new ids).
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

transformers.logging.set_verbosity_error()
# generate() asks whether the model is FSDP-wrapped by importing
# torch.distributed.fsdp, which Debian's torch 1.13 cannot import under
# Python 3.11 (a dataclass default); a model built here never is.
transformers.generation.utils.is_fsdp_managed_module = lambda module: False
torch.set_num_threads(1)

VOCAB = 97


def randomize(model, seed):
    # transformers' init (std 0.02) leaves near-uniform logits, where greedy
    # decoding would hinge on ties; wider weights make every choice clear.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln" in name or "norm" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return model.eval()


def gpt2(seed, **over):
    c = dict(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4, bos_token_id=None, eos_token_id=None)
    c.update(over)
    return randomize(transformers.GPT2LMHeadModel(transformers.GPT2Config(**c)), seed)


def llama(seed, **over):
    c = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=32, rms_norm_eps=1e-6, rope_theta=500.0,
             tie_word_embeddings=False, bos_token_id=None, eos_token_id=None)
    c.update(over)
    return randomize(transformers.LlamaForCausalLM(transformers.LlamaConfig(**c)), seed)


def greedy(model, prompt, n):
    model.generation_config.eos_token_id = None
    model.generation_config.bos_token_id = None
    out = model.generate(torch.tensor([prompt]), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                         pad_token_id=0, attention_mask=torch.ones(1, len(prompt), dtype=torch.long))
    return out[0, len(prompt):].tolist()


def reference(model, path, seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.config.vocab_size, (2, 12), generator=g)
    with torch.no_grad():
        logits = model(tokens).logits.float().contiguous()
    prompt = tokens[0, :5].tolist()
    save_file({"tokens": tokens, "logits": logits, "prompt": torch.tensor(prompt),
               "generated": torch.tensor(greedy(model, prompt, 10))}, path)


def published_gpt2(model, out):
    # As the GPT-2 files on the Hub: no "transformer." prefix, no lm_head, and
    # the causal-mask buffers h.N.attn.bias / masked_bias kept.
    os.makedirs(out, exist_ok=True)
    model.config.save_pretrained(out)
    n = model.config.n_positions
    state = {}
    for k, v in model.state_dict().items():
        if k.startswith("lm_head."):
            continue
        state[k[len("transformer."):]] = v.contiguous()
    for i in range(model.config.n_layer):
        state[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
        state[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})


def make(out):
    torch.manual_seed(0)
    os.makedirs(out, exist_ok=True)
    models = {
        "gpt2": gpt2(1),
        "gpt2_untied_gelu": gpt2(2, n_inner=48, activation_function="gelu", tie_word_embeddings=False, n_layer=3),
        "llama_gqa": llama(3),
        "llama_tied_mqa": llama(4, num_key_value_heads=1, tie_word_embeddings=True, rope_theta=10000.0),
    }
    for seed, (name, model) in enumerate(models.items()):
        model.save_pretrained(os.path.join(out, name), safe_serialization=True)
        reference(model, os.path.join(out, name + ".ref.safetensors"), 100 + seed)
    # The same GPT-2 sharded over several files, and spelled as published.
    models["gpt2"].save_pretrained(os.path.join(out, "gpt2_sharded"), safe_serialization=True, max_shard_size="20KB")
    assert os.path.exists(os.path.join(out, "gpt2_sharded", "model.safetensors.index.json"))
    published_gpt2(models["gpt2"], os.path.join(out, "gpt2_published"))


def tiny(out, arch, vocab):
    over = dict(vocab_size=vocab)
    if arch == "gpt2":
        model = gpt2(5, n_positions=64, **over)
    else:
        model = llama(6, max_position_embeddings=64, **over)
    model.save_pretrained(out, safe_serialization=True)


def load(path):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(path, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        raise SystemExit(f"transformers loaded {path} with {bad}")
    return model.float().eval()


def logits(tokens_file, paths):
    tokens = load_file(tokens_file)["tokens"]
    for path in paths:
        model = load(path)
        with torch.no_grad():
            save_file({"logits": model(tokens).logits.float().contiguous()}, path.rstrip("/") + ".logits.safetensors")


def loss(path, ids_file, context):
    model = load(path)
    ids = torch.tensor(json.load(open(ids_file)))
    total, count = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(ids) - 1, context):
            window = ids[s:s + context + 1]
            lg = model(window[None, :-1]).logits[0].double()
            total += torch.nn.functional.cross_entropy(lg, window[1:], reduction="sum").item()
            count += len(window) - 1
    print(json.dumps({"loss": total / count, "tokens": count}))


def main():
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "tiny":
        tiny(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "logits":
        logits(sys.argv[2], sys.argv[3:])
    elif cmd == "generate":
        print(json.dumps(greedy(load(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4]))))
    elif cmd == "loss":
        loss(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
