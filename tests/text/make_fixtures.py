#!/usr/bin/env python3
"""Writes tests/text/fixtures/: a byte-level BPE trained by Hugging Face `tokenizers`
and the ids it gives, which braid's tokenizer tests compare against.

Run once by hand in a virtual environment with `tokenizers` installed
(python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers;
/tmp/tokvenv/bin/python tests/text/make_fixtures.py); the tests need only its output.

The corpus is fortune text the project's setup installs; meta.json keeps each file's
SHA-256, so a test given different files skips instead of failing.
"""
import hashlib
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

CORPUS = ["/usr/share/games/fortunes/computers", "/usr/share/games/fortunes/people"]
VOCAB_SIZE = 1000
SPECIAL = ["<|endoftext|>"]
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")

# Inputs chosen where a hand-written splitter or byte mapping goes wrong.
ADVERSARIAL = [
    "",
    "hello world",
    " leading space",
    "trailing space ",
    "I'm here, you're there, it's his, we've, I'd, we'll, don't",
    "'S 'T upper-case contractions aren't split 'RE 'LL",
    "x's 'sup ''s '' 'x",
    "numbers 12345 3.14159 1,000,000 ９８７ ²³ ⅷ",
    "tabs\tand\t\ttabs",
    "spaces      many      spaces   x",
    "\n\n\n\nnewlines\n\n",
    " \n \n  \n\t\n x \r\n y\r\n",
    "                                                                  ",
    "trailing newlines and spaces  \n \n   ",
    "emoji 😀🎉👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷",
    "combining e\u0301 a\u0308 n\u0303 \u0301\u0301 alone",
    "CJK 漢字かなカナ한국어 中文，标点。",
    "mixed ünïcödé Ελληνικά кириллица עברית العربية",
    "nbsp\u00a0here\u3000ideographic\u2003em\u2028line\u0085nel",
    "separators\x1c\x1d\x1e\x1f vt\x0bff\x0c ogham\u1680mmsp\u205fnnbsp\u202f x",
    "nul\x00 del\x7f c1\x80\x9f bom\ufeff",
    "punct!!! ??? ... --- *** ((())) [[]] {{}} <<>> @@ ## $$ %% ^^ && __",
    "code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; }",
    "url https://example.com/path?a=1&b=2#frag email a.b@c.de",
    "<|endoftext|> special in text <|endoftext|><|endoftext|>x<|endoftext",
    "replacement \ufffd char",
    "zero width\u200bjoiner\u200dnon\u200c",
    "a" * 300,
    "ab " * 100,
    "Ünïcödé😀" * 20,
]

# Raw bytes that are not UTF-8: braid reads them as Python's errors="replace" does.
INVALID_UTF8 = [
    b"bad \xff byte",
    b"\x80\x81 lone continuations",
    b"truncated \xe2\x82 euro \xe2\x82\xac ok",
    b"overlong \xc0\xaf and \xe0\x80\xaf",
    b"surrogate \xed\xa0\x80 half",
    b"too big \xf4\x90\x80\x80 and \xf8\x88\x80\x80\x80",
    b"ends in a lead byte \xf0\x9f\x98",
]


def fnv1a64(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for b in int(i).to_bytes(4, "little"):
            h ^= b
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in CORPUS:
        if not os.path.exists(f):
            sys.exit(f"missing corpus file {f} (package fortunes)")

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Training from files reads them line by line, each line with its "\n".
    tok.train(CORPUS, trainer)
    tok.model.save(OUT)  # vocab.json, merges.txt
    tok.save(os.path.join(OUT, "tokenizer.json"))

    # Ids of each corpus file encoded whole (one document per file).
    corpus = []
    for f in CORPUS:
        data = open(f, "rb").read()
        ids = tok.encode(data.decode("utf-8", "replace")).ids
        corpus.append({
            "path": f,
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "count": len(ids),
            "fnv1a64": f"{fnv1a64(ids):016x}",
            "head": ids[:3000],
        })

    cases = []
    for s in ADVERSARIAL:
        cases.append({"hex": s.encode("utf-8").hex(), "ids": tok.encode(s).ids})
    for b in INVALID_UTF8:
        cases.append({"hex": b.hex(), "ids": tok.encode(b.decode("utf-8", "replace")).ids})

    # The same model under the two options braid reads from tokenizer.json.
    variants = {}
    prefixed = Tokenizer.from_file(os.path.join(OUT, "tokenizer.json"))
    prefixed.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    variants["add_prefix_space"] = [prefixed.encode(s).ids for s in ADVERSARIAL]
    whole = Tokenizer.from_file(os.path.join(OUT, "tokenizer.json"))
    whole.model.ignore_merges = True
    variants["ignore_merges"] = [whole.encode(s).ids for s in ADVERSARIAL]

    meta = {
        "tokenizers_version": __import__("tokenizers").__version__,
        "vocab_size": VOCAB_SIZE,
        "special_tokens": SPECIAL,
        "corpus": corpus,
        "cases": cases,
        "variants": variants,  # ids of ADVERSARIAL (the first cases) under each option
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(meta, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
