# SPDX-License-Identifier: MIT
"""bench/torch-bench.py [DIR] - eager vs torch.compile on the card: the 12-layer Hugging Face Llama.

In the VM (make bench: functional, then timed mode, docs/timed-mode.md), DIR the build's
frameworks/pytorch (default /spyre/pytorch). The model is test_hf's llama-12l (tests/hf_models.py:
12 layers, hidden 1024, 16 heads, seeded weights) in fp32 on spyre:0; each mode runs
generate(prompt of 8, max_new_tokens=32, greedy) twice: the first call of a compiled mode includes
the compile (compile time = first call - second call), the second is the per-call time. Modes:
eager, torch.compile's default backend (Inductor), backend="spyre" (nn.Module.compile: generate
calls the compiled forward). Prints a table of guest times and the ratios to eager; the tokens of
each mode against eager's. Then a small MLP's host time per call: eager, compiled, and compiled
with graph replay (mode="reduce-overhead": one SUBMIT per call for the graph). Not an assertion: a failing mode prints its error and the others go on.
"""
import os
import sys
import time

t0 = time.time()
import torch  # noqa: E402

DIR = sys.argv[1] if len(sys.argv) > 1 else "/spyre/pytorch"
sys.path[:0] = [DIR, os.path.join(DIR, "tests")]
import hf_models as H  # noqa: E402
import spyre_torch  # noqa: E402

MODEL = os.environ.get("SPYRE_BENCH_MODEL", "llama-12l")
D = torch.device("spyre", 0)


def timed_generate(model):
    t = time.perf_counter()
    toks, _ = H.generate(model, D)
    spyre_torch.synchronize()
    return toks, time.perf_counter() - t


def main():
    print(f"torch {torch.__version__} imported in {time.time() - t0:.1f} s (guest time)", flush=True)
    t = time.time()
    model = H.build(MODEL).to("spyre")
    cfg = model.config
    print(f"{MODEL}: {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, {cfg.num_attention_heads} heads "
          f"({cfg.num_key_value_heads} KV), MLP {cfg.intermediate_size}, vocab {cfg.vocab_size}, fp32; built and "
          f"moved to {D} in {time.time() - t:.1f} s; generate: prompt {len(H.PROMPT)}, {H.NEW_TOKENS} new tokens",
          flush=True)
    rows, eager_toks = [], None
    for mode, backend in [("eager", None), ("compile default", "default"), ("compile spyre", "spyre")]:
        try:
            torch._dynamo.reset()
            model._compiled_call_impl = None
            if backend == "default":
                model.compile()
            elif backend:
                model.compile(backend=backend)
            spyre_torch.reset_counters()
            toks, first = timed_generate(model)
            fb = sum(spyre_torch.fallback_counts().values())
            toks2, per_call = timed_generate(model)
        except Exception as e:
            msg = str(e).strip().splitlines()
            print(f"{mode}: {type(e).__name__}: {msg[0] if msg else ''}"[:300], flush=True)
            rows.append((mode, None, None, None, "failed"))
            continue
        if eager_toks is None:
            eager_toks = toks
        same = "equal" if toks == eager_toks and toks2 == toks else "DIFFER"
        rows.append((mode, first, per_call, fb, same))
        print(f"{mode}: first call {first:.2f} s, second {per_call:.2f} s, fallbacks {fb}", flush=True)
    model._compiled_call_impl = None
    eager = rows[0][2]
    print(f"\n{'mode':<16} {'first call s':>12} {'compile s':>10} {'per call s':>11} {'ms/token':>9} "
          f"{'vs eager':>9} {'fallbacks':>9}  tokens vs eager")
    for mode, first, per_call, fb, same in rows:
        if first is None:
            print(f"{mode:<16} {'-':>12} {'-':>10} {'-':>11} {'-':>9} {'-':>9} {'-':>9}  {same}")
            continue
        comp = f"{first - per_call:.2f}" if mode != "eager" else "-"
        ratio = f"{per_call / eager:.2f}x" if eager else "-"
        print(f"{mode:<16} {first:>12.2f} {comp:>10} {per_call:>11.2f} {per_call / H.NEW_TOKENS * 1e3:>9.1f} "
              f"{ratio:>9} {fb:>9}  {same}")
    print("(guest times; 'vs eager' is per-call time / eager's; compile = first call - second call)")
    small_model()


def small_model(n=50):
    """Per-call host time of a small model (3 linears, relu, gelu: 4 x 64 -> 128 -> 64 -> 64, fp32):
    eager, backend="spyre", and backend="spyre" with mode="reduce-overhead" (graph replay)."""
    import torch.nn as nn
    import torch.nn.functional as F

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = nn.Linear(64, 128), nn.Linear(128, 64), nn.Linear(64, 64)

        def forward(self, x):
            return self.c(F.gelu(self.b(torch.relu(self.a(x)))))

    torch.manual_seed(0)
    md = MLP().to(D)
    x = torch.randn(4, 64, device=D)
    print(f"\nsmall MLP (4 x 64, 3 linears), {n} calls after 3 warm-up calls:")
    print(f"{'mode':<28} {'host ms/call':>12} {'with card ms/call':>18} {'SUBMITs/call':>13}")
    with torch.no_grad():
        for mode, kw in (("eager", None), ("compile spyre", {}),
                         ("compile spyre graph replay", {"mode": "reduce-overhead"})):
            torch._dynamo.reset()
            f = md if kw is None else torch.compile(md, backend="spyre", dynamic=False, **kw)
            for _ in range(3):
                f(x)
            spyre_torch.synchronize()
            j0 = spyre_torch.stream_stats()["jobs"]
            t = time.perf_counter()
            for _ in range(n):
                f(x)
            host = (time.perf_counter() - t) / n
            spyre_torch.synchronize()
            wall = (time.perf_counter() - t) / n
            jobs = (spyre_torch.stream_stats()["jobs"] - j0) / n
            print(f"{mode:<28} {host * 1e3:>12.2f} {wall * 1e3:>18.2f} {jobs:>13.1f}", flush=True)
    print("(replay: the input copied into the graph's static input, then one SUBMIT for the graph)")


if __name__ == "__main__":
    main()
