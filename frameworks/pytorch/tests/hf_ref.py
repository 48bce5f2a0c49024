# SPDX-License-Identifier: MIT
"""The CPU references of test_hf.py, computed on the host by make (pytorch.mk): the guest's CPU under
TCG would take many minutes per 12-layer generate. The host's venv is the guest's (same torch,
transformers, sentence-transformers); the weights are the same bits (hf_models.py; the crc is recorded
and test_hf checks it in the guest).

Writes OUT.json: {"models": {"<model>.<dtype>": {"crc", "prompt", "tokens", "steps": [[top1, top2,
margin, max|logit|], ...], "seconds"}}, "minilm": {"sentences", "embeddings"}} and OUT.pt: {"<model>.<dtype>":
the logits of every step, float32 [steps, vocab]}.
Usage: hf_ref.py OUT (without the suffix) [model ...]
"""
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_models as H  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(H.MODELS)
    # One thread: make check builds on every core, and torch's OpenMP threads spinning against the
    # compilers took 3 min instead of 20 s; the tokens are the same, the logits within 2e-6.
    torch.set_num_threads(1)
    ref = {"torch": torch.__version__, "seed": H.SEED, "new_tokens": H.NEW_TOKENS, "models": {}}
    logits = {}
    for name in names:
        model = H.build(name)
        for dt, dtype in DTYPES.items():
            m = model if dtype == torch.float32 else model.to(dtype)
            t = time.time()
            toks, lg = H.generate(m, "cpu")
            key = f"{name}.{dt}"
            ref["models"][key] = {"crc": H.crc(m), "prompt": H.PROMPT, "tokens": toks,
                                  "steps": [list(s) for s in H.margins(lg)], "seconds": round(time.time() - t, 2)}
            logits[key] = torch.stack(lg)
            print(f"hf_ref: {key}: {time.time() - t:.1f} s: {toks}", flush=True)
        del model, m
    ref["minilm"] = minilm()
    torch.save(logits, out + ".pt.tmp")
    with open(out + ".json.tmp", "w") as f:
        json.dump(ref, f)
    os.replace(out + ".pt.tmp", out + ".pt")
    os.replace(out + ".json.tmp", out + ".json")


def minilm():
    return {"sentences": H.SENTENCES, "embeddings": H.minilm_encode(H.minilm("cpu")).tolist()}


if __name__ == "__main__":
    main()
