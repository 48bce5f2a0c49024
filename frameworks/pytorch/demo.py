# SPDX-License-Identifier: MIT
"""make demo-torch: a torch.nn Granite decoder (the model runner's tiny config) on the card, next to the CPU."""
import os
import sys
import time

t0 = time.time()
import torch  # noqa: E402  (the device "spyre" comes with it: the torch.backends entry point)

t_import = time.time() - t0
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests"))
import granite  # noqa: E402

model_dir = sys.argv[1]
prompt, steps = [1, 2, 3, 4, 5, 6, 7, 8], 16
print(f"torch {torch.__version__} imported in {t_import:.1f} s; spyre cards: {torch.spyre.device_count()}")
dev = torch.device("spyre", 0)
cpu_model = granite.Granite(model_dir)
card_model = granite.Granite(model_dir).to(dev)
print(f"model: {model_dir}: {cpu_model.layers} layers, hidden {cpu_model.hidden}, {cpu_model.heads} heads "
      f"({cpu_model.kv_heads} KV) x {cpu_model.head_dim}; weights on {dev}: {torch.spyre.memory_allocated()} bytes")
with torch.inference_mode():
    t = time.time()
    want, want_logits = cpu_model.generate(prompt, steps, "cpu")
    t_cpu = time.time() - t
    torch.spyre.reset_counters()
    t = time.time()
    got, got_logits = card_model.generate(prompt, steps, dev)
    torch.spyre.synchronize()
    t_card = time.time() - t
worst = max(float((g - w).abs().max()) / float(w.abs().max()) for g, w in zip(got_logits, want_logits))
print(f"prompt {prompt}, {steps} greedy tokens")
print(f"  on the card: {' '.join(map(str, got))}   ({t_card:.2f} s)")
print(f"  on the CPU:  {' '.join(map(str, want))}   ({t_cpu:.2f} s)")
print(f"  tokens {'equal' if got == want else 'DIFFER'}; largest logit difference {worst:.2g} of the largest |logit|")
print(f"  ran on the card: {torch.spyre.card_counts()}")
print(f"  fell back to the CPU: {torch.spyre.fallback_counts() or 'nothing'}")
sys.exit(0 if got == want else 1)
