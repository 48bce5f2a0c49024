#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gen-tiny-tokenizer.py - the seeded tiny model's tokenizer.json
(model/configs/tiny/tokenizer.json), deterministically, with nothing but
Python's standard library: a byte-level BPE of exactly 512 ids in GPT-2's
configuration (ByteLevel pre-tokenizer and decoder, no normalizer):
id 0 is the special token <|endoftext|> (the model's BOS and EOS), ids 1-256
the 256 bytes (GPT-2's byte-to-character mapping, in byte order) and ids
257-511 the merges learned from the fixed English text below (the most frequent
pair first; ties to the smallest pair of strings). The post-processor adds
nothing (as GPT-2 and Granite).

    python3 serve/gen-tiny-tokenizer.py OUT.json

A test (serve/tests/tokenizer-test.c, case tiny_tokenizer) regenerates it
and compares the bytes with the committed file.
"""
import json
import re
import sys

VOCAB = 512
TEXT = """
The quick brown fox jumps over the lazy dog. A small model learns the shape of
text one token at a time: it reads the words that came before and guesses the
next one. The card runs the model in a loop, and every step of the loop writes
a new row into the cache of keys and values, so that the next step does not
have to read the whole prompt again. When the server gets many requests at
once, it runs them together in one batch, and each sequence keeps its own
place in the cache. This is how a serving engine keeps the card busy.
It's the user's prompt that matters; they'll see what we've done, and we're
sure it'd work. The numbers 0 1 2 3 4 5 6 7 8 9 10 100 2024 and 3.14 appear too.
Hello, world! How are you today? I am fine, thank you. Where is the station?
There is a house on the hill, and in the house there is a table with a lamp.
"""


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main(out):
    b2u = bytes_to_unicode()
    pat = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")
    counts = {}
    for w in pat.findall(TEXT):
        key = tuple(b2u[b] for b in w.encode("utf-8"))
        counts[key] = counts.get(key, 0) + 1
    vocab = {"<|endoftext|>": 0}
    for b in range(256):
        vocab[b2u[b]] = 1 + b
    words = [(list(k), c) for k, c in sorted(counts.items())]
    merges = []
    while len(vocab) < VOCAB:
        pairs = {}
        for syms, c in words:
            for a, b in zip(syms, syms[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            raise SystemExit("gen-tiny-tokenizer: the text has too few pairs for %d ids" % VOCAB)
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(list(best))
        vocab[best[0] + best[1]] = len(vocab)
        for syms, _ in words:
            i = 0
            while i < len(syms) - 1:
                if syms[i] == best[0] and syms[i + 1] == best[1]:
                    syms[i:i + 2] = [best[0] + best[1]]
                i += 1
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
