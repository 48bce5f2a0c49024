# SPDX-License-Identifier: MIT
"""
Description: launch graphs on the PyTorch device (spyre_torch/graphs.py,
csrc/graphs.cpp). torch.spyre.SpyreGraph captured with torch.spyre.graph(g)
replays a linear + relu + softmax with one SUBMIT per job (libspyre's stream
statistics: jobs) and gives new results after its static input changes;
torch.compile(backend="spyre", mode="reduce-overhead") on an MLP (relu/gelu)
and a gated MLP: a warm-up call, a capture, replays (counted by
torch.spyre.graph_stats()) equal to the same model compiled without graphs
and to the CPU (rtol 1e-4, atol 1e-4, fp32), new inputs give new results, a
new shape captures again; a graph with an op that falls back to the CPU runs
eagerly with the reason and the right result; the tiny Hugging Face Llama's
forward (no cache) replayed or eager with a reason, its logits within 1e-4 of
the largest |logit| of the CPU's; the host time per call of a small compiled
MLP with and without replay (printed).
Run: python3 test_graphs.py [case ...]
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tap
from small_models import MLP, Gated
from tap import case

D = torch.device("spyre", 0)
RT, AT = 1e-4, 1e-4


class WithFallback(nn.Module):
    """cumsum has no kernel on the card: it falls back to the CPU, which a graph cannot hold."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 64)

    def forward(self, x):
        return torch.cumsum(torch.relu(self.a(x)), dim=-1) * 0.5


def reset():
    torch._dynamo.reset()
    torch.spyre.reset_compile_stats()
    torch.spyre.reset_counters()
    torch.spyre.reset_graph_stats()


def jobs():
    return torch.spyre.stream_stats()["jobs"]


@case
def graph_api(c):
    torch.manual_seed(10)
    w, b = torch.randn(128, 64), torch.randn(128)
    xs = [torch.randn(8, 64) for _ in range(3)]
    want = [torch.softmax(torch.relu(F.linear(x, w, b)), -1) for x in xs]
    wd, bd = w.to(D), b.to(D)
    with torch.no_grad():
        static = xs[0].to(D)
        torch.softmax(torch.relu(F.linear(static, wd, bd)), -1)  # warm-up: the kernels are built
        torch.spyre.synchronize()
        g = torch.spyre.SpyreGraph()
        j0 = jobs()
        with torch.spyre.graph(g):
            y = torch.softmax(torch.relu(F.linear(static, wd, bd)), -1)
        c.ok(jobs() == j0, f"nothing submitted while capturing ({jobs() - j0} jobs)")
        c.ok(g.nodes >= 3 and g.jobs == 1, f"captured {g}: 3+ nodes in one job")
        for i, x in enumerate(xs):
            static.copy_(x.to(D))
            torch.spyre.synchronize()
            j0 = jobs()
            g.replay()
            c.ok(jobs() - j0 == g.jobs, f"replay {i}: {jobs() - j0} SUBMITs, the graph's jobs {g.jobs}")
            c.close(y, want[i], RT, AT, f"replay {i} with new input data")
        s = torch.spyre.graph_stats()
        c.ok(s.get("captures", 0) >= 1 and s.get("replays", 0) >= 3, f"graph stats {s}")
        g.reset()
        # a CPU fallback inside a capture raises and drops it; the stream works on
        g2 = torch.spyre.SpyreGraph()
        c.raises(lambda: _capture(g2, lambda: torch.cumsum(static, -1)), RuntimeError, "cannot capture",
                 "a CPU fallback inside torch.spyre.graph")
        c.close(torch.relu(static), torch.relu(xs[-1]), RT, AT, "the stream after a failed capture")


def _capture(g, fn):
    with torch.spyre.graph(g):
        fn()


def replayed(c, model, shape, what, calls=5):
    """The model compiled with and without graphs, against the CPU, on @calls inputs of @shape."""
    torch.manual_seed(11)
    xs = [torch.randn(*shape) for _ in range(calls)]
    with torch.no_grad():
        want = [model(x) for x in xs]
        md = model.to(D)
        reset()
        plain = torch.compile(md, backend="spyre", dynamic=False)
        ref = [plain(x.to(D)).cpu() for x in xs]
        reset()
        f = torch.compile(md, backend="spyre", mode="reduce-overhead", dynamic=False)
        for i, x in enumerate(xs):
            xd = x.to(D)
            torch.spyre.synchronize()
            j0, s0 = jobs(), torch.spyre.graph_stats()
            got = f(xd).cpu()
            s1 = torch.spyre.graph_stats()
            if i >= 2:
                n = s1.get("input_copies", 0) - s0.get("input_copies", 0)
                c.ok(jobs() - j0 == 1 + n + 1, f"{what}: call {i}: {jobs() - j0} SUBMITs: the input copies ({n}), "
                     "one replay job, the copy back")
            c.close(got, want[i], RT, AT, f"{what}: call {i} against the CPU")
            c.ok(torch.equal(got, ref[i]), f"{what}: call {i} equals the graph compiled without replay")
        s = torch.spyre.graph_stats()
        c.ok(s.get("warmup_calls") == 1 and s.get("captures") == 1 and s.get("replays") == calls - 1
             and not s.get("eager_calls"), f"{what}: one warm-up, one capture, {calls - 1} replays: {s}")
    return f, xs


@case
def graph_compile_mlp(c):
    torch.manual_seed(12)
    replayed(c, MLP(), (2, 4, 64), "MLP relu/gelu")


@case
def graph_compile_gated(c):
    torch.manual_seed(13)
    replayed(c, Gated(), (8, 64), "gated MLP")
    c.ok(torch.spyre.compile_stats()["fused"].get("mlp") == 1, f"the MLP fused: {torch.spyre.compile_stats()}")
    c.ok(torch.spyre.compile_stats().get("graphs_replayable", 0) >= 1, "the backend made a replayable graph")


def calls(c, cls, rows, what, **kw):
    """A card copy of a new @cls compiled with mode="reduce-overhead" (and @kw), called on inputs of
    @rows rows against the CPU; the graph statistics of those calls."""
    m = cls()
    md = cls()
    md.load_state_dict(m.state_dict())
    md = md.to(D)
    reset()
    with torch.no_grad():
        f = torch.compile(md, backend="spyre", mode="reduce-overhead", **kw)
        for i, r in enumerate(rows):
            x = torch.randn(r, 64)
            c.close(f(x.to(D)), m(x), RT, AT, f"{what}, call {i}, {r} rows")
    return torch.spyre.graph_stats()


@case
def graph_shape_change(c):
    torch.manual_seed(14)
    s = calls(c, MLP, (4, 4, 4, 8, 8, 8, 4), "MLP", dynamic=False)
    # per shape: a warm-up, a capture (and its replay), a replay; the first shape's graph once more
    c.ok(s.get("warmup_calls") == 2 and s.get("captures") == 2 and s.get("replays") == 5,
         f"two shapes, two warm-ups, two captures, five replays: {s}")
    # automatic dynamic shapes (Dynamo's default): the second shape recompiles with a symbolic size; each
    # size the symbolic graph sees is a signature of its own, captured after its warm-up
    s = calls(c, MLP, (4, 4, 8, 8, 8, 16, 16, 16), "MLP, dynamic")
    c.ok(s.get("captures") == 3 and not s.get("eager_calls"), f"dynamic: a capture per size: {s}")


@case
def graph_fallback(c):
    torch.manual_seed(15)
    s = calls(c, WithFallback, (4, 4, 4), "a graph with a CPU fallback", dynamic=False)
    s = torch.spyre.graph_stats()
    reasons = " ".join(s.get("reasons", {}))
    c.ok(not s.get("captures") and s.get("eager_calls", 0) >= 2 and "cumsum" in reasons,
         f"the graph runs eagerly, the reason names the op: {s}")


@case
def graph_llama_tiny(c):
    import hf_models as H
    torch.manual_seed(16)
    model = H.build("llama-tiny").eval()
    ids = [torch.tensor([H.PROMPT]), torch.tensor([[5, 9, 33, 2, 77, 1, 200, 31]])]
    with torch.no_grad():
        want = [model(input_ids=i, use_cache=False).logits for i in ids]
        md = model.to(D)
        reset()
        fwd = torch.compile(md.forward, backend="spyre", mode="reduce-overhead", dynamic=False)
        for k in range(4):
            i = ids[k % 2]
            got = fwd(input_ids=i.to(D), use_cache=False).logits.cpu()
            w = want[k % 2]
            err = float((got - w).abs().max() / w.abs().max())
            c.ok(err <= 1e-4, f"tiny Llama forward, call {k}: logits within {err:.2e} of the largest |logit|")
    s = torch.spyre.graph_stats()
    print(f"# tiny Llama forward: graph stats {s}; fallbacks {torch.spyre.fallback_counts()}", flush=True)
    c.ok(s.get("replays", 0) + s.get("eager_calls", 0) > 0, "replayed or eager with a reason")


@case
def graph_timing(c):
    """Host time per call of a small compiled MLP (4 x 64): without and with replay."""
    torch.manual_seed(17)
    md = MLP().to(D)
    x = torch.randn(4, 64, device=D)
    n = 20
    res = {}
    with torch.no_grad():
        for name, kw in (("eager", None), ("compiled", {}), ("replayed", {"mode": "reduce-overhead"})):
            reset()
            f = md if kw is None else torch.compile(md, backend="spyre", dynamic=False, **kw)
            for _ in range(3):
                f(x)
            torch.spyre.synchronize()
            j0 = jobs()
            t = time.perf_counter()
            for _ in range(n):
                f(x)
            host = (time.perf_counter() - t) / n
            torch.spyre.synchronize()
            wall = (time.perf_counter() - t) / n
            res[name] = (host, wall, (jobs() - j0) / n)
        # by hand: the same ops eagerly vs one replay of their graph (no Dynamo, no signature check)
        g = torch.spyre.SpyreGraph()
        with torch.spyre.graph(g):
            y = md(x)
        for name, fn in (("ops by hand", lambda: md(x)), ("SpyreGraph.replay", g.replay)):
            fn()
            torch.spyre.synchronize()
            j0 = jobs()
            t = time.perf_counter()
            for _ in range(n):
                fn()
            host = (time.perf_counter() - t) / n
            torch.spyre.synchronize()
            wall = (time.perf_counter() - t) / n
            res[name] = (host, wall, (jobs() - j0) / n)
        c.close(y, md(x), 0, 0, "the by-hand graph's output equals the eager one")
        g.reset()
    for name, (host, wall, j) in res.items():
        print(f"# per call, {name}: host {host * 1e3:.2f} ms, with the card's work {wall * 1e3:.2f} ms, "
              f"{j:.1f} SUBMITs", flush=True)
    c.ok(res["replayed"][2] < res["compiled"][2], f"fewer SUBMITs per call replayed: {res}")


if __name__ == "__main__":
    raise SystemExit(tap.run())
