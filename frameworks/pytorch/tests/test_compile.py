# SPDX-License-Identifier: MIT
"""
Description: torch.compile on the card (spyre_torch/compile.py). Small
nn.Modules with their tensors on spyre (an MLP with relu and gelu, a gated
MLP, an RMSNorm as Hugging Face writes it, a causal attention block, a tiny
transformer layer) give the same numbers eager, compiled with backend="spyre"
(the kernel library's fused ops) and, for the MLP and the layer (which has
every pattern of the others; Inductor's compiles take minutes under TCG),
compiled with Inductor (the default: every op an extern call of its ATen
op, no generated kernel), all against the CPU; the counters say which pattern was fused and that the fused
ops launched; a new shape recompiles; a .item() is a counted graph break; a
CPU input to a card model raises. fp32 throughout: tolerance rtol 1e-4,
atol 1e-4 against the CPU (kernels accumulate in fp32 in another order).
Run: python3 test_compile.py [case ...]
"""
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tap
from small_models import MLP, Gated  # noqa: F401  (test_graphs uses them too)
from tap import case

D = torch.device("spyre", 0)
RT, AT = 1e-4, 1e-4


def stats():
    return torch.spyre.compile_stats()


def reset():
    torch._dynamo.reset()
    torch.spyre.reset_compile_stats()
    torch.spyre.reset_counters()


class RMSNorm(nn.Module):
    """As transformers' LlamaRMSNorm writes it."""

    def __init__(self, h=64, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h) + 0.1 * torch.randn(h))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        v = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(v + self.eps)
        return self.weight * x.to(dt)


class Attention(nn.Module):
    def __init__(self, h=64, heads=2, kv_heads=1):
        super().__init__()
        self.heads, self.kv, self.hd = heads, kv_heads, h // heads
        self.q = nn.Linear(h, heads * self.hd, bias=False)
        self.k = nn.Linear(h, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(h, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(heads * self.hd, h, bias=False)

    def forward(self, x):
        B, S, _ = x.shape
        q = self.q(x).view(B, S, self.heads, self.hd).transpose(1, 2)
        k = self.k(x).view(B, S, self.kv, self.hd).transpose(1, 2)
        v = self.v(x).view(B, S, self.kv, self.hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv != self.heads)
        return self.o(a.transpose(1, 2).reshape(B, S, -1))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.attn, self.n2, self.mlp = RMSNorm(), Attention(), RMSNorm(), Gated()

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


def three_ways(c, model, x, what, fused, inductor=True):
    """Eager, Inductor and backend="spyre" on the card against the CPU; the spyre backend fused @fused.

    Inductor compiles take 20-140 s in the VM (TCG): the MLP and the transformer layer (which has every
    pattern of the others) go through it, the other modules through the spyre backend only."""
    torch.manual_seed(0)
    with torch.no_grad():
        want = model(x)
        md = model.to(D)
        xd = x.to(D)
        t = time.time()
        eager = md(xd).cpu()
        te = time.time() - t
        c.close(eager, want, RT, AT, f"{what}: eager on the card")
        ti = 0.0
        if inductor:
            reset()
            t = time.time()
            from torch._inductor.utils import run_and_get_code
            ind, code = run_and_get_code(torch.compile(md, dynamic=False), xd)
            ti = time.time() - t
            s = stats()
            c.close(ind, want, RT, AT, f"{what}: torch.compile (Inductor)")
            gen = [w for w in ("async_compile.cpp", "async_compile.triton") if any(w in k for k in code)]
            c.ok(code and not gen and "torch.ops.aten" in code[0],
                 f"{what}: Inductor's code calls ATen ops and generates no kernel ({len(code)} modules; {gen})")
            c.ok(s.get("inductor_graphs", 0) >= 1 and s.get("inductor_extern_ops", 0) > 0,
                 f"{what}: Inductor compiled card graphs into extern calls: {s}")
            print(f"# {what}: Inductor: {s.get('inductor_extern_ops')} extern calls; the card's CPU fallbacks "
                  f"{s['fallbacks']}", flush=True)
        reset()
        t = time.time()
        sp = torch.compile(md, backend="spyre", dynamic=False)
        got = sp(xd)
        ts = time.time() - t
        s = stats()
        c.close(got, want, RT, AT, f"{what}: torch.compile(backend='spyre')")
        c.ok(s["fused"] == fused, f"{what}: fused {s['fused']}, want {fused} (rejected: {s['rejected']})")
        launches = s["fused_launches"]
        for kind, n in fused.items():
            if kind != "rmsnorm":
                c.ok(launches.get(kind, 0) == n, f"{what}: {kind} launched {launches.get(kind, 0)} times, want {n}")
        if "rmsnorm" in fused:
            c.ok(torch.spyre.card_counts().get("rms_norm", 0) == fused["rmsnorm"],
                 f"{what}: rms_norm on the card {torch.spyre.card_counts()}")
        t = time.time()
        got2 = sp(xd).cpu()
        t2 = time.time() - t
        c.ok(torch.equal(got2, got.cpu()), f"{what}: a second call gives the same result")
        print(f"# {what}: compile + first call: Inductor {ti:.1f} s, spyre {ts:.1f} s; fused {s['fused']}; "
              f"eager ops left {s.get('eager_ops', 0)}; fallbacks {s['fallbacks']}; a call: eager {te * 1e3:.0f} ms, "
              f"spyre-compiled {t2 * 1e3:.0f} ms", flush=True)
        md.cpu()


@case
def compile_registration(c):
    import spyre_torch.compile as sc
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.codegen.common import get_scheduling_for_device, get_wrapper_codegen_for_device
    c.ok(getattr(torch.compile, "_spyre_hook", False), "torch.compile registers the device on first use")
    sc.register()  # again: nothing changes
    iface = get_interface_for_device("spyre")
    c.ok(iface.device_count() == torch.spyre.device_count() and iface.is_available(),
         f"Dynamo's device interface: {iface.device_count()} device(s)")
    c.ok(get_scheduling_for_device("spyre") is sc.Scheduling, "Inductor scheduling of the device")
    c.ok(get_wrapper_codegen_for_device("spyre") is sc.PythonWrapperCodegen, "Inductor wrapper codegen")
    c.ok("spyre" in torch._dynamo.list_backends(), f"backend 'spyre' listed: {torch._dynamo.list_backends()}")


@case
def compile_mlp(c):
    torch.manual_seed(1)
    three_ways(c, MLP(), torch.randn(2, 4, 64), "MLP relu/gelu", {"linear_relu": 1, "linear_gelu": 1})


@case
def compile_gated_mlp(c):
    torch.manual_seed(2)
    three_ways(c, Gated(), torch.randn(2, 4, 64), "gated MLP", {"mlp": 1}, inductor=False)


@case
def compile_rmsnorm(c):
    torch.manual_seed(3)
    three_ways(c, RMSNorm(), torch.randn(2, 4, 64), "RMSNorm", {"rmsnorm": 1}, inductor=False)


@case
def compile_attention(c):
    torch.manual_seed(4)
    three_ways(c, Attention(), torch.randn(2, 8, 64), "causal attention", {"attention": 1}, inductor=False)


@case
def compile_layer(c):
    torch.manual_seed(5)
    three_ways(c, Layer(), torch.randn(1, 8, 64), "transformer layer",
               {"attention": 1, "mlp": 1, "rmsnorm": 2})


@case
def compile_recompile(c):
    torch.manual_seed(6)
    mc = Gated()
    m = copy.deepcopy(mc).to(D)
    reset()
    with torch.no_grad():
        f = torch.compile(m, backend="spyre", dynamic=False)
        for rows in (4, 8):
            x = torch.randn(1, rows, 64)
            c.close(f(x.to(D)), mc(x), RT, AT, f"gated MLP, {rows} rows")
    s = stats()
    c.ok(s.get("spyre_graphs") == 2 and s["fused"] == {"mlp": 2}, f"a new shape compiled again: {s}")


@case
def compile_graph_break(c):
    class Breaks(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(64, 64)

        def forward(self, x):
            y = torch.relu(self.a(x))
            if y.sum().item() > -1e30:  # data-dependent: a graph break
                y = y * 2
            return y

    torch.manual_seed(7)
    m = Breaks()
    x = torch.randn(2, 64)
    want = m(x)
    m.to(D)
    reset()
    with torch.no_grad():
        got = torch.compile(m, backend="spyre", dynamic=False)(x.to(D))
    s = stats()
    c.close(got, want, RT, AT, "a model with .item()")
    c.ok(s["graph_breaks"] >= 1, f"graph break counted: {s['graph_breaks']} ({s['graph_break_reasons']})")
    c.ok(s["fused"].get("linear_relu") == 1, f"the graph before the break fused: {s['fused']}")


@case
def compile_bad_input(c):
    torch.manual_seed(8)
    m = MLP().to(D)
    with torch.no_grad():
        f = torch.compile(m, backend="spyre", dynamic=False)
        f(torch.randn(2, 64, device=D))
        c.raises(lambda: f(torch.randn(2, 64)), RuntimeError, "Expected all tensors to be on the same device",
                 "a CPU input to a card model (Dynamo's check)")
        c.raises(lambda: torch.ops.spyre.linear_act(torch.randn(2, 64), torch.randn(64, 64), None, "relu"),
                 RuntimeError, "not on the card", "a fused op on CPU tensors")
        c.raises(lambda: torch.ops.spyre.linear_act(torch.randn(2, 64, device=D), torch.randn(64, 64, device=D),
                                                    None, "tanh"),
                 RuntimeError, "is not relu, gelu or silu", "an unknown activation")


if __name__ == "__main__":
    raise SystemExit(tap.run())
