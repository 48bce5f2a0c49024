# SPDX-License-Identifier: MIT
"""
Description: a torch.nn Granite decoder (granite.py: the model runner's tiny
config, the same weights, written by `spyre-generate --save DIR`) runs its
forward on the card. Greedy tokens for 16 steps equal the same module on the
CPU and the model runner's (`spyre-generate --device`, given as argv[2]);
each step's logits match the CPU module's within 1e-4 of the largest |logit|
in fp32 (accumulation order) and, for the prefill in fp16, within 2e-2. Which
ops ran on the card and which fell back to the CPU is printed and checked:
every matmul, norm, softmax, activation and residual add is on the card.
Run: SPYRE_TORCH_MODEL=DIR SPYRE_TORCH_TOKENS="..." python3 test_model.py
"""
import os
import sys
import time

import torch

import granite
import spyre_torch
import tap
from tap import case

MODEL = os.environ.get("SPYRE_TORCH_MODEL", "/tmp/tiny")
RUNNER = [int(t) for t in os.environ["SPYRE_TORCH_TOKENS"].split()] if os.environ.get("SPYRE_TORCH_TOKENS") else None
PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]
STEPS = 16


def rel_err(a, b):
    return float((a - b).abs().max()) / max(float(b.abs().max()), 1e-30)


@case
def tokens_and_logits_fp32(c):
    cpu = granite.Granite(MODEL)
    with torch.inference_mode():
        want, want_logits = cpu.generate(PROMPT, STEPS, "cpu")
    dev = granite.Granite(MODEL).to(spyre_torch.device(0))
    spyre_torch.reset_counters()
    t = time.time()
    with torch.inference_mode():
        got, got_logits = dev.generate(PROMPT, STEPS, spyre_torch.device(0))
    spyre_torch.synchronize()
    print(f"# device: {STEPS} tokens in {time.time() - t:.2f} s (guest time): {' '.join(map(str, got))}")
    c.ok(got == want, f"16 greedy tokens: card {got} == CPU {want}")
    if RUNNER is not None:
        c.ok(got == RUNNER[:STEPS], f"== the model runner's tokens {RUNNER[:STEPS]}")
    worst = max(rel_err(g, w) for g, w in zip(got_logits, want_logits))
    print(f"# largest logit difference relative to the largest |logit|, over {len(got_logits)} steps: {worst:.3g}")
    c.ok(len(got_logits) == len(want_logits) and worst <= 1e-4, f"logits within 1e-4 (worst {worst:.3g})")
    card, fb = spyre_torch.card_counts(), spyre_torch.fallback_counts()
    print(f"# on the card: {card}")
    print(f"# on the CPU (fallback): {fb}")
    print(f"# stick relayouts: {spyre_torch.relayouts()}")
    for op in ["linear", "bmm", "softmax", "rms_norm", "embedding", "silu", "mul", "add"]:
        c.ok(card.get(op, 0) > 0, f"{op} ran on the card ({card.get(op, 0)} times)")
    c.ok(not any(k.startswith(("aten::mm", "aten::addmm", "aten::bmm", "aten::_softmax", "aten::silu",
                               "aten::mul", "aten::add")) for k in fb),
         f"no compute op of the model fell back: {sorted(fb)}")


@case
def prefill_fp16(c):
    cpu = granite.Granite(MODEL, torch.float32)
    dev = granite.Granite(MODEL, torch.float16).to(spyre_torch.device(0))
    toks = torch.tensor(PROMPT)
    with torch.inference_mode():
        want = cpu.forward(toks, 0, cpu.new_cache("cpu")).float()
        got = dev.forward(toks.to(spyre_torch.device(0)), 0, dev.new_cache(spyre_torch.device(0))).float().cpu()
    e = rel_err(got, want)
    print(f"# fp16 prefill logits vs fp32 CPU: {e:.3g} of the largest |logit|")
    c.ok(e <= 2e-2, f"fp16 prefill logits within 2e-2 ({e:.3g})")
    c.ok(int(torch.argmax(got)) == int(torch.argmax(want)), "and the same next token")


if __name__ == "__main__":
    sys.exit(tap.run())
