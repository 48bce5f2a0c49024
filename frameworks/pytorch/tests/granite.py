# SPDX-License-Identifier: MIT
"""
A Granite-architecture decoder as a torch.nn.Module, written with the ops the
spyre device runs (linear, embedding, rms_norm, bmm, softmax, add, mul, silu),
loading the files `spyre-generate --save DIR` writes (config.json,
model.safetensors). The same module runs on the CPU and on the card.

Granite's multipliers are folded into weights once, exactly: the embedding
table times embedding_multiplier (one fp32 rounding, as the reference),
q_proj times attention_multiplier and the LM head divided by logits_scaling
(both powers of two here: exact); residual_multiplier is add()'s alpha.
RoPE is a per-position rotation matrix applied with bmm.
"""
import json
import math
import os
import struct

import torch

import spyre_torch

_DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def load_safetensors(path):
    """{name: tensor} from a .safetensors file (F32/F16/BF16)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=_DT[meta["dtype"]])
        out[name] = t.reshape(meta["shape"]).clone()
    return out


class Granite(torch.nn.Module):
    def __init__(self, model_dir, dtype=torch.float32):
        super().__init__()
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        w = load_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.layers = c["num_hidden_layers"]
        self.hidden = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c["num_key_value_heads"]
        self.head_dim = self.hidden // self.heads if "head_dim" not in c else c["head_dim"]
        self.eps = c["rms_norm_eps"]
        self.res = c.get("residual_multiplier", 1.0)
        self.max_pos = 64
        f32 = {k: v.float() for k, v in w.items()}
        P = torch.nn.Parameter

        def p(t):
            return P(t.to(dtype).contiguous(), requires_grad=False)

        self.embed = p(f32["model.embed_tokens.weight"] * c.get("embedding_multiplier", 1.0))
        lm = f32.get("lm_head.weight", f32["model.embed_tokens.weight"])
        self.lm_head = p(lm / c.get("logits_scaling", 1.0))
        self.final_norm = P(f32["model.norm.weight"], requires_grad=False)
        am = c.get("attention_multiplier", 1.0 / math.sqrt(self.head_dim))
        self.blocks = []
        for i in range(self.layers):
            pre = f"model.layers.{i}."
            b = torch.nn.ParameterDict({
                "attn_norm": P(f32[pre + "input_layernorm.weight"], requires_grad=False),
                "q": p(f32[pre + "self_attn.q_proj.weight"] * am),
                "k": p(f32[pre + "self_attn.k_proj.weight"]),
                "v": p(f32[pre + "self_attn.v_proj.weight"]),
                "o": p(f32[pre + "self_attn.o_proj.weight"]),
                "mlp_norm": P(f32[pre + "post_attention_layernorm.weight"], requires_grad=False),
                "gate": p(f32[pre + "mlp.gate_proj.weight"]),
                "up": p(f32[pre + "mlp.up_proj.weight"]),
                "down": p(f32[pre + "mlp.down_proj.weight"]),
            })
            self.add_module(f"block{i}", b)
            self.blocks.append(b)
        # RoPE (rotate_half convention) as a rotation matrix per position: [max_pos, hd, hd], rows act on the right
        hd, half = self.head_dim, self.head_dim // 2
        inv = [1.0 / (c.get("rope_theta", 10000.0) ** (2 * i / hd)) for i in range(half)]
        rot = torch.zeros(self.max_pos, hd, hd)
        for pos in range(self.max_pos):
            for i in range(half):
                a = torch.tensor(float(pos), dtype=torch.float32) * torch.tensor(inv[i], dtype=torch.float32)
                cs, sn = math.cos(float(a)), math.sin(float(a))
                # out[i] = x[i] cos - x[i+half] sin; out[i+half] = x[i+half] cos + x[i] sin
                rot[pos, i, i] = cs
                rot[pos, i + half, i] = -sn
                rot[pos, i + half, i + half] = cs
                rot[pos, i, i + half] = sn
        self.rot = P(rot.to(dtype), requires_grad=False)
        self.dtype = dtype

    def new_cache(self, device):
        z = torch.zeros(self.kv_heads, self.max_pos, self.head_dim, dtype=self.dtype, device=device)
        return [(z.clone(), z.clone()) for _ in range(self.layers)]

    def rms(self, x, w):
        return spyre_torch.rms_norm(x, w, self.eps)

    def rope(self, x, pos0, nheads):
        n = x.shape[0]
        xr = x.reshape(n, nheads, self.head_dim)
        return torch.bmm(xr, self.rot[pos0:pos0 + n].contiguous()).reshape(n, nheads * self.head_dim)

    def forward(self, tokens, pos0, cache):
        """tokens: 1-D LongTensor of n new tokens at positions pos0..; returns the last token's logits."""
        F = torch.nn.functional
        n, H, KV, hd = tokens.shape[0], self.heads, self.kv_heads, self.head_dim
        g = H // KV
        P = pos0 + n
        x = F.embedding(tokens, self.embed)
        # the causal mask of these queries over P keys, for [KV, g * n, P] scores
        mask = torch.zeros(n, P)
        for r in range(n):
            # finite in every dtype: softmax must never see -inf - -inf
            mask[r, pos0 + r + 1:] = max(-1e30, torch.finfo(self.dtype).min)
        mask = mask.repeat(g, 1).unsqueeze(0).repeat(KV, 1, 1).to(self.dtype).to(x.device)
        for b, (kc, vc) in zip(self.blocks, cache):
            h = self.rms(x, b["attn_norm"])
            q = self.rope(F.linear(h, b["q"]), pos0, H)
            k = self.rope(F.linear(h, b["k"]), pos0, KV)
            v = F.linear(h, b["v"])
            kc[:, pos0:P] = k.reshape(n, KV, hd).transpose(0, 1)
            vc[:, pos0:P] = v.reshape(n, KV, hd).transpose(0, 1)
            # queries grouped by KV head: [KV, g * n, hd]
            qg = q.reshape(n, KV, g, hd).permute(1, 2, 0, 3).reshape(KV, g * n, hd)
            s = torch.bmm(qg, kc[:, :P].transpose(1, 2).contiguous())
            s = torch.add(s, mask)
            a = torch.bmm(torch.softmax(s, -1), vc[:, :P].contiguous())
            a = a.reshape(KV, g, n, hd).permute(2, 0, 1, 3).reshape(n, H * hd)
            x = torch.add(x, F.linear(a, b["o"]), alpha=self.res)
            h = self.rms(x, b["mlp_norm"])
            m = F.silu(F.linear(h, b["gate"])) * F.linear(h, b["up"])
            x = torch.add(x, F.linear(m, b["down"]), alpha=self.res)
        h = self.rms(x[n - 1:n], self.final_norm)
        return F.linear(h, self.lm_head)[0]

    def generate(self, prompt, steps, device):
        """Greedy tokens after @prompt, and the logits of each step (on the CPU)."""
        cache = self.new_cache(device)
        toks = torch.tensor(prompt, dtype=torch.int64)
        logits = self.forward(toks.to(device), 0, cache).float().cpu()
        out, all_logits, pos = [], [logits], len(prompt)
        for _ in range(steps):
            t = int(torch.argmax(logits))
            out.append(t)
            if len(out) == steps:
                break
            logits = self.forward(torch.tensor([t]).to(device), pos, cache).float().cpu()
            all_logits.append(logits)
            pos += 1
        return out, all_logits
