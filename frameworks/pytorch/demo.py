# SPDX-License-Identifier: MIT
"""make demo-torch: Hugging Face models on the card (device="spyre"), next to the CPU.

transformers' LlamaForCausalLM built from a config with seeded weights (tests/hf_models.py), moved
with model.to("spyre"), generates 32 greedy tokens on the card and on this machine's CPU; then the
12-layer Llama (hidden 1024) on the card against the CPU tokens make computed on the host
(hf_ref.json); then sentence-transformers' all-MiniLM-L6-v2 embeds sentences on the card.
Usage: demo.py [DIR]   (DIR: the build's frameworks/pytorch; default: this file's directory)
"""
import json
import os
import sys
import time

t0 = time.time()
import torch  # noqa: E402  (the device "spyre" comes with it: the torch.backends entry point)

t_import = time.time() - t0
DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(DIR, "tests"))
import hf_models as H  # noqa: E402


def fallbacks():
    return ", ".join(f"{k} {v}" for k, v in sorted(torch.spyre.fallback_counts().items())) or "nothing"


def generate(model, device):
    t = time.time()
    toks, _ = H.generate(model, device)
    if device != "cpu":
        torch.spyre.synchronize()
    return toks, time.time() - t


def describe(name, model):
    c = model.config
    return (f"{type(model).__name__} '{name}': {c.num_hidden_layers} layers, hidden {c.hidden_size}, "
            f"{c.num_attention_heads} heads ({c.num_key_value_heads} KV), vocab {c.vocab_size}, "
            f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")


print(f"torch {torch.__version__} imported in {t_import:.1f} s; spyre cards: {torch.spyre.device_count()}")
print(f"prompt {H.PROMPT}, generate(max_new_tokens={H.NEW_TOKENS}, do_sample=False)\n")
ok = True

model = H.build("llama-tiny")
print(describe("llama-tiny", model))
want, t_cpu = generate(model, "cpu")
model.to("spyre")
torch.spyre.reset_counters()
got, t_card = generate(model, "spyre")
print(f"  on the card: {' '.join(map(str, got))}   ({t_card:.2f} s)")
print(f"  on the CPU:  {' '.join(map(str, want))}   ({t_cpu:.2f} s)")
print(f"  tokens {'equal' if got == want else 'DIFFER'}; fell back to the CPU: {fallbacks()}\n")
ok &= got == want
del model

with open(os.path.join(DIR, "hf_ref.json")) as f:
    ref = json.load(f)
t = time.time()
model = H.build("llama-12l").to("spyre")
print(describe("llama-12l", model) + f"; built and moved to the card in {time.time() - t:.1f} s")
torch.spyre.reset_counters()
got, t_card = generate(model, "spyre")
want = ref["models"]["llama-12l.fp32"]["tokens"]
print(f"  on the card: {' '.join(map(str, got))}   ({t_card:.2f} s, {t_card / H.NEW_TOKENS * 1e3:.0f} ms a token)")
print(f"  host CPU:    {' '.join(map(str, want))}   (make's reference, hf_ref.json)")
print(f"  tokens {'equal' if got == want else 'DIFFER'}; fell back to the CPU: {fallbacks()}\n")
ok &= got == want
del model

st = H.minilm("spyre")
torch.spyre.reset_counters()
t = time.time()
emb = H.minilm_encode(st)
t_card = time.time() - t
want = torch.tensor(ref["minilm"]["embeddings"])
cos = torch.nn.functional.cosine_similarity(emb.double(), want.double(), dim=1)
print(f"sentence-transformers all-MiniLM-L6-v2 on the card: {len(H.SENTENCES)} sentences in {t_card:.2f} s")
sim = emb @ emb.t()
for i in (0, 2, 5):
    j = max((k for k in range(len(H.SENTENCES)) if k != i), key=lambda k: float(sim[i, k]))
    print(f"  {H.SENTENCES[i]!r}\n    nearest: {H.SENTENCES[j]!r} ({float(sim[i, j]):.3f})")
print(f"  cosine to the CPU's embeddings: min {float(cos.min()):.7f}; fell back to the CPU: {fallbacks()}")
ok &= bool((cos >= 0.9999).all())
sys.exit(0 if ok else 1)
