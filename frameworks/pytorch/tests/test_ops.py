# SPDX-License-Identifier: MIT
"""
Description: the ops Hugging Face models use most run on the card (spyre_torch,
PyTorch 2.13) and equal torch on the CPU: arithmetic with broadcasting (a bias
[n], a column [.., 1], a mask [1, 1, s, s]) and Python scalars, in-place and
out= forms, the math functions, tanh GELU, pow, sum / mean / amax, log_softmax,
argmax, where, masked_fill, tril / triu, cat, transposed views made contiguous
(PERMUTE), 4-D matmul, baddbmm. Each op in fp32 and fp16 (inputs rounded to the
dtype, the reference computed in fp32 from them), with non-stick-multiple
shapes, -inf and NaN; each asserts from the counters (card_counts(),
fallback_counts()) that it ran on the card and fell back nowhere, and an
unsupported variant of each family falls back, counted. Bad input raises.
Tolerances (one rounding of the output, fp32 inside the core):
  exact ops (arithmetic, where, copies)  fp32 rtol 1e-6 atol 1e-6, fp16 rtol 1e-3 atol 1e-3
  math functions                         fp32 rtol 1e-5 atol 1e-6, fp16 rtol 2e-3 atol 2e-3
  reductions, softmax (summation order)  fp32 rtol 1e-5 atol 1e-5, fp16 rtol 2e-3 atol 2e-3
  matmuls                                fp32 rtol 1e-4 atol 1e-5, fp16 rtol 1e-2 atol 1e-2
Run: python3 test_ops.py [case ...]
"""
import math
import sys

import torch

import spyre_torch
import tap
from tap import case

D = spyre_torch.device(0) if spyre_torch.device_count() else None
F = torch.nn.functional
DTYPES = [torch.float32, torch.float16]
EXACT = {torch.float32: (1e-6, 1e-6), torch.float16: (1e-3, 1e-3)}
MATH = {torch.float32: (1e-5, 1e-6), torch.float16: (2e-3, 2e-3)}
REDUCE = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3)}
MATMUL = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2)}


def rnd(*shape, dtype=torch.float32, lo=-2.0, hi=2.0):
    return (torch.rand(*shape) * (hi - lo) + lo).to(dtype)


def on_card(c, names, fn, what):
    """fn() on the card: every op of @names launched (card_counts() went up), nothing fell back."""
    names = [names] if isinstance(names, str) else names
    before, fb0 = spyre_torch.card_counts(), spyre_torch.fallback_counts()
    y = fn()
    after, fb1 = spyre_torch.card_counts(), spyre_torch.fallback_counts()
    missing = [n for n in names if after.get(n, 0) <= before.get(n, 0)]
    fell = {k: v - fb0.get(k, 0) for k, v in fb1.items() if v != fb0.get(k, 0)}
    c.ok(not missing and not fell, f"{what}: on the card (not launched: {missing}, fell back: {fell})")
    return y


def falls_back(c, op, fn, what):
    """fn() falls back: aten op @op (or an overload of it, e.g. its out= form) counted once more."""
    def count():
        return sum(v for k, v in spyre_torch.fallback_counts().items() if k == op or k.startswith(op + "."))
    before, fb0 = count(), spyre_torch.fallback_counts()
    y = fn()
    after = count()
    fell = {k: v - fb0.get(k, 0) for k, v in spyre_torch.fallback_counts().items() if v != fb0.get(k, 0)}
    c.ok(after == before + 1, f"{what}: {op} fell back, counted ({before} -> {after}; {fell})")
    c.ok(y.device == D, f"{what}: the result is on the card ({y.device})")
    return y


def same(c, names, f, xs, tol, what):
    """f on the card (ops @names, no fallback) equals f on the CPU in fp32 from the same (rounded) inputs."""
    dt = next((x.dtype for x in xs if isinstance(x, torch.Tensor) and x.is_floating_point()), torch.float32)
    rt, at = tol[dt]
    dev = [x.to(D) if isinstance(x, torch.Tensor) else x for x in xs]
    ref = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]
    got = on_card(c, names, lambda: f(*dev), what)
    want = f(*ref)
    c.ok(got.device == D and got.dtype == dt, f"{what}: {got.device} {got.dtype}")
    c.close(got, want, rt, at, what)
    return got


@case
def arith_broadcast(c):
    for dt in DTYPES:
        for sa, sb, kind in [((7, 33), (7, 33), "same shape, odd"),
                             ((3, 5, 64), (64,), "bias [.., n] + [n]"),
                             ((4, 6, 64), (4, 6, 1), "x op [.., 1]"),
                             ((2, 3, 8, 8), (1, 1, 8, 8), "[b, h, s, s] op [1, 1, s, s]"),
                             ((2, 3, 5, 5), (1, 1, 5, 5), "mask, s = 5 (staged rows)"),
                             ((64,), (5, 64), "[n] op [m, n] (reversed)"),
                             ((6, 1), (6, 96), "[m, 1] op [m, n] (reversed)")]:
            a, b = rnd(*sa, dtype=dt), rnd(*sb, dtype=dt, lo=0.5, hi=2)
            for name, f in [("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div)]:
                same(c, name, f, [a, b], EXACT, f"{name} {dt} {sa} {sb} ({kind})")
            for name, f in [("add", torch.add), ("sub", torch.sub)]:
                same(c, name, lambda x, y: f(x, y, alpha=0.5), [a, b], EXACT, f"{name} alpha 0.5 {dt} {sa} {sb}")
        # -inf in an additive mask, NaN in the data: as torch
        x = rnd(2, 4, 8, 8, dtype=dt)
        x[0, 1, 2, 3] = float("nan")
        mask = torch.full((8, 8), float("-inf")).triu(1).to(dt)[None, None]
        same(c, "add", torch.add, [x, mask], EXACT, f"scores + causal -inf mask {dt}, a NaN")
    a, b = rnd(4, 1), rnd(1, 4)
    got = falls_back(c, "aten::add.Tensor", lambda: a.to(D) + b.to(D), "[4, 1] + [1, 4]: both broadcast")
    c.close(got, a + b, 0, 0, "[4, 1] + [1, 4] on the CPU")
    a, b = rnd(3, 64), rnd(64, dtype=torch.float16)
    got = falls_back(c, "aten::add.Tensor", lambda: a.to(D) + b.to(D), "fp32 + fp16: type promotion")
    c.close(got, a + b.float(), 0, 0, "fp32 + fp16 on the CPU")


@case
def arith_scalar(c):
    for dt in DTYPES:
        for shape in [(7, 33), (2, 64)]:
            x = rnd(*shape, dtype=dt, lo=0.25, hi=2)
            for name, what, f in [("add", "x + 2.5", lambda t: t + 2.5), ("sub", "x - 1", lambda t: t - 1),
                                  ("mul", "2 * x", lambda t: 2 * t), ("div", "x / 8", lambda t: t / 8),
                                  ("div", "x / 3", lambda t: t / 3),
                                  ("add", "add alpha", lambda t: torch.add(t, 3, alpha=0.5))]:
                same(c, name, f, [x], EXACT, f"{what} {dt} {shape}")
            same(c, "sub", lambda t: 1 - t, [x], EXACT, f"1 - x (rsub.Scalar: sub(1, x)) {dt} {shape}")
            same(c, ["reciprocal", "mul"], lambda t: 3 / t, [x], EXACT, f"3 / x (Python: x.reciprocal() * 3) {dt}")
            same(c, "div", lambda t: torch.div(torch.tensor(3.0), t), [x], EXACT, f"div(3, x) {dt} {shape}")
            same(c, "rsub", lambda t, u: torch.rsub(t, u, alpha=2), [x, x.flip(0)], EXACT, f"rsub {dt} {shape}")
            same(c, "neg", torch.neg, [x], EXACT, f"-x {dt} {shape}")
            same(c, "mul", lambda t: t * torch.tensor(0.5), [x], EXACT, f"x * a CPU 0-dim tensor {dt}")
    m = (1.0 - torch.tensor([[1, 1, 0, 1]] * 3, dtype=torch.float32)) * torch.finfo(torch.float32).min
    same(c, "mul", lambda t: (1.0 - t) * torch.finfo(torch.float32).min, [torch.tensor([[1., 1, 0, 1]] * 3)], EXACT,
         "BERT's extended mask (1 - m) * finfo.min")
    c.ok(bool((m == torch.finfo(torch.float32).min).sum() == 3), "the reference mask")


@case
def inplace_out(c):
    for dt in DTYPES:
        rt, at = EXACT[dt]
        x, b = rnd(4, 64, dtype=dt), rnd(64, dtype=dt, lo=0.5, hi=2)
        for name, op in [("add", "add_"), ("sub", "sub_"), ("mul", "mul_"), ("div", "div_")]:
            xd = x.to(D)
            p = xd.data_ptr()
            on_card(c, name, lambda: getattr(xd, op)(b.to(D)), f"{op} {dt} broadcast")
            c.ok(xd.data_ptr() == p, f"{op}: in place")
            c.close(xd, getattr(x.float(), op)(b.float()), rt, at, f"{op} {dt}")
        xd = x.to(D)
        on_card(c, "mul", lambda: xd.mul_(0.5), f"mul_ by a number {dt}")
        c.close(xd, x.float() * 0.5, rt, at, f"mul_ 0.5 {dt}")
        out = torch.empty(0, device=D, dtype=dt)
        on_card(c, "add", lambda: torch.add(x.to(D), b.to(D), out=out), f"add out= {dt}")
        c.close(out, x.float() + b.float(), rt, at, f"add out= {dt} (resized)")
        xd = x.to(D)
        xd += 1
        c.close(xd, x.float() + 1, rt, at, f"x += 1 {dt}")
    c.raises(lambda: rnd(4, 1).to(D).add_(rnd(4, 64).to(D)), RuntimeError, "doesn't match the broadcast shape",
             "add_ that would grow self")


@case
def math_functions(c):
    for dt in DTYPES:
        for shape in [(7, 33), (4, 128)]:
            x, p = rnd(*shape, dtype=dt, lo=-4, hi=4), rnd(*shape, dtype=dt, lo=0.05, hi=4)
            for name, f, inp in [("exp", torch.exp, x), ("log", torch.log, p), ("sigmoid", torch.sigmoid, x),
                                 ("tanh", torch.tanh, x), ("rsqrt", torch.rsqrt, p), ("sqrt", torch.sqrt, p),
                                 ("reciprocal", torch.reciprocal, p), ("abs", torch.abs, x)]:
                same(c, name, f, [inp], MATH, f"{name} {dt} {shape}")
            same(c, "gelu", lambda t: F.gelu(t, approximate="tanh"), [x], MATH, f"gelu tanh {dt} {shape}")
            for e in [2, 3, 0.5, -1, 1.5]:
                same(c, "pow", lambda t: t.pow(e), [p if e % 1 else x], MATH, f"pow {e} {dt} {shape}")
    # edges: log 0 = -inf, log of a negative and sqrt of a negative NaN, exp overflows to inf
    e = torch.tensor([0.0, -1.0, 1.0, 100.0] * 8)
    same(c, "log", torch.log, [e], MATH, "log of 0, -1, 1, 100")
    same(c, "sqrt", torch.sqrt, [e], MATH, "sqrt of 0, -1, 1, 100")
    same(c, "exp", torch.exp, [e], MATH, "exp of 0, -1, 1, 100 (fp32: e^100 is finite)")
    same(c, "exp", torch.exp, [e.half()], MATH, "exp fp16 of 100: inf")
    x = rnd(3, 5)
    got = falls_back(c, "aten::cos", lambda: torch.cos(x.to(D)), "cos: no kernel")
    c.close(got, torch.cos(x), 1e-6, 1e-6, "cos on the CPU")


@case
def reductions(c):
    for dt in DTYPES:
        for shape in [(5, 64), (2, 3, 100)]:
            x = rnd(*shape, dtype=dt)
            for kd in [False, True]:
                same(c, "sum", lambda t: t.sum(-1, keepdim=kd), [x], REDUCE, f"sum -1 keepdim={kd} {dt} {shape}")
                same(c, "mean", lambda t: t.mean(-1, keepdim=kd), [x], REDUCE, f"mean -1 keepdim={kd} {dt} {shape}")
                same(c, "amax", lambda t: t.amax(-1, keepdim=kd), [x], EXACT, f"amax -1 keepdim={kd} {dt} {shape}")
            same(c, "sum", lambda t: t.sum((-2, -1)), [x], REDUCE, f"sum over the last two {dt} {shape}")
            same(c, "mean", lambda t: t.mean(), [x], REDUCE, f"mean of all {dt} {shape}")
            same(c, "mean", lambda t: t.pow(2).mean(-1, keepdim=True), [x], REDUCE, f"RMSNorm's variance {dt}")
            y = x.clone()
            y.view(-1)[3] = float("-inf")
            same(c, "log_softmax", lambda t: torch.log_softmax(t, -1), [y], REDUCE, f"log_softmax {dt} {shape}, -inf")
            for kd in [False, True]:
                got = on_card(c, "argmax", lambda: x.to(D).argmax(-1, keepdim=kd), f"argmax -1 {dt} {shape}")
                c.ok(got.dtype == torch.int64 and torch.equal(got.cpu(), x.float().argmax(-1, keepdim=kd)),
                     f"argmax -1 keepdim={kd} {dt} {shape}: int64, the same indices")
            got = on_card(c, "argmax", lambda: x.to(D).argmax(), f"argmax of all {dt}")
            c.ok(got.shape == () and int(got) == int(x.float().argmax()), f"argmax of all {dt}: {int(got)}")
    x = rnd(5, 64)
    got = falls_back(c, "aten::sum.dim_IntList", lambda: x.to(D).sum(0), "sum over dim 0")
    c.close(got, x.sum(0), 1e-5, 1e-5, "sum over dim 0 on the CPU")


@case
def where_masks(c):
    for dt in DTYPES:
        for shape in [(2, 4, 8, 8), (7, 33)]:
            x, y = rnd(*shape, dtype=dt), rnd(*shape, dtype=dt)
            m = torch.rand(*shape) > 0.5
            same(c, "masked_fill", lambda t, mm: t.masked_fill(mm, float("-inf")), [x, m], EXACT,
                 f"masked_fill -inf {dt} {shape}")
            same(c, "masked_fill", lambda t, mm: t.masked_fill(mm, torch.tensor(-3.5)), [x, m], EXACT,
                 f"masked_fill 0-dim CPU tensor {dt} {shape}")
            v = torch.tensor(2.0, device=D)
            got = on_card(c, "masked_fill", lambda: x.to(D).masked_fill(m.to(D), v), f"masked_fill card 0-dim {dt}")
            c.close(got, x.float().masked_fill(m, 2.0), *EXACT[dt], f"masked_fill card 0-dim value {dt}")
            xd = x.to(D)
            on_card(c, "masked_fill", lambda: xd.masked_fill_(m.to(D), 0.0), f"masked_fill_ {dt}")
            c.close(xd, x.float().masked_fill(m, 0.0), *EXACT[dt], f"masked_fill_ {dt} {shape}")
            same(c, "where", torch.where, [m, x, y], EXACT, f"where tensor tensor {dt} {shape}")
            same(c, "where", lambda mm, t: torch.where(mm, t, 0.0), [m, x], EXACT, f"where tensor scalar {dt}")
            same(c, "where", lambda mm, t: torch.where(mm, float("-inf"), t), [m, x], EXACT, f"where scalar tensor {dt}")
            got = on_card(c, "where", lambda: torch.where(m.to(D), torch.zeros((), device=D, dtype=dt),
                                                          torch.finfo(dt).min), f"where number number {dt}")
            c.close(got, torch.where(m, 0.0, torch.finfo(dt).min), 0, 0, f"HF's mask from a bool one {dt}")
            c.ok(got.dtype == dt, f"where of numbers: {got.dtype}")
        for shape in [(2, 8, 32), (5, 7), (16, 16)]:
            x = rnd(*shape, dtype=dt)
            for d in [-1, 0, 2]:
                same(c, "tril", lambda t: t.tril(d), [x], EXACT, f"tril {d} {dt} {shape}")
                same(c, "triu", lambda t: t.triu(d), [x], EXACT, f"triu {d} {dt} {shape}")
    x, m = rnd(2, 4, 8, 8), torch.rand(1, 1, 8, 8) > 0.5
    got = falls_back(c, "aten::masked_fill.Scalar", lambda: x.to(D).masked_fill(m.to(D), -1.0), "broadcast mask")
    c.close(got, x.masked_fill(m, -1.0), 0, 0, "broadcast mask on the CPU")
    b = torch.ones(8, 8, dtype=torch.bool)
    got = falls_back(c, "aten::tril", lambda: b.to(D).tril(), "tril of bool")
    c.ok(torch.equal(got.cpu(), b.tril()), "tril of bool on the CPU")


@case
def cat_permute(c):
    for dt in DTYPES:
        a, b = rnd(3, 40, dtype=dt), rnd(5, 40, dtype=dt)
        same(c, "cat", lambda x, y: torch.cat([x, y], 0), [rnd(4, 64, dtype=dt), rnd(2, 64, dtype=dt)], EXACT,
             f"cat dim 0 {dt}: device copies")
        same(c, "cat", lambda x, y: torch.cat([x, y, x], 1), [rnd(2, 3, 64, dtype=dt), rnd(2, 3, 64, dtype=dt)],
             EXACT, f"cat dim 1, equal pieces {dt}: CAT")
        same(c, "cat", lambda x: torch.cat([-x[..., 32:], x[..., :32]], -1), [rnd(2, 4, 64, dtype=dt)], EXACT,
             f"rotate_half {dt}: CAT of 32 + 32")
        same(c, "cat", lambda x, y: torch.cat([x, y], -2), [rnd(1, 2, 3, 64, dtype=dt), rnd(1, 2, 1, 64, dtype=dt)],
             EXACT, f"KV cache cat along tokens {dt}: device copies")
        got = falls_back(c, "aten::cat", lambda: torch.cat([a.to(D), b.to(D)], 0), f"cat dim 0, pieces off sticks {dt}")
        c.close(got, torch.cat([a, b], 0), 0, 0, f"cat dim 0 of 3 and 5 rows of 40 columns {dt}")
        # transposed views made contiguous on the card
        for shape, tr, what in [((2, 5, 3, 64), (1, 2), "heads <-> tokens, rows of 64"),
                                ((9, 40), (0, 1), "2-D transpose (k = 1)"),
                                ((2, 6, 64), (1, 2), "batched transpose")]:
            x = rnd(*shape, dtype=dt)
            same(c, "permute", lambda t: t.transpose(*tr).contiguous(), [x], EXACT, f"contiguous of {what} {dt}")
        x = rnd(2, 5, 3, 32, dtype=dt)
        same(c, "permute", lambda t: t.transpose(1, 2).transpose(2, 3).contiguous(), [x], EXACT,
             f"K^T of a [b, s, h, d] view: one transpose of [s x h d] {dt}")
        x = rnd(1, 2, 8, 64, dtype=dt)
        same(c, "block_copy", lambda t: t[:, :, None].expand(1, 2, 3, 8, 64).reshape(1, 6, 8, 64), [x], EXACT,
             f"repeat_kv (an expanded view made contiguous) {dt}: device copies")
        same(c, "block_copy", lambda t: t[:, 2:5].contiguous(), [rnd(4, 8, 64, dtype=dt)], EXACT,
             f"a slice of whole rows {dt}: device copies")
    x = rnd(3, 5)
    got = falls_back(c, "aten::cat", lambda: torch.cat([x.to(D), x[:, :2].to(D)], 1), "cat of 5 + 2 columns")
    c.close(got, torch.cat([x, x[:, :2]], 1), 0, 0, "cat of unequal, unaligned widths on the CPU")
    x = rnd(6, 10)
    c.close(x.to(D)[:, ::2].contiguous(), x[:, ::2], 0, 0, "a strided view that is no swap: via the host")
    c.raises(lambda: torch.cat([rnd(2, 3).to(D), rnd(2, 4).to(D)], 0), RuntimeError, "Sizes of tensors must match",
             "cat of mismatched sizes")


@case
def matmul_4d(c):
    for dt in DTYPES:
        q, k = rnd(2, 64, 3, 64, dtype=dt), rnd(2, 64, 3, 64, dtype=dt)   # [b, s, h, d]: s, d whole sticks
        r0 = spyre_torch.relayouts()
        qd, kd = (t.to(D).transpose(1, 2) for t in (q, k))   # [b, h, s, d] views, as HF's attention
        got = on_card(c, ["bmm", "permute"], lambda: qd @ kd.transpose(-1, -2), f"q @ k^T 4-D {dt}")
        want = q.float().transpose(1, 2) @ k.float().transpose(1, 2).transpose(-1, -2)
        c.close(got, want, *MATMUL[dt], f"q @ k^T {dt}")
        c.ok(spyre_torch.relayouts() == r0, f"no operand staged through the host ({spyre_torch.relayouts() - r0})")
        a, b = rnd(2, 3, 8, 64, dtype=dt), rnd(2, 3, 64, 16, dtype=dt)
        same(c, "bmm", torch.matmul, [a, b], MATMUL, f"contiguous 4-D matmul {dt}")
        mask = torch.full((8, 8), float("-inf")).triu(1)[None, None].to(dt)
        same(c, ["bmm", "softmax", "mul", "add"],
             lambda qq, kk, vv, mm: torch.softmax(qq @ kk.transpose(-1, -2) * 0.125 + mm, -1) @ vv,
             [rnd(1, 4, 8, 64, dtype=dt), rnd(1, 4, 8, 64, dtype=dt), rnd(1, 4, 8, 64, dtype=dt), mask], MATMUL,
             f"eager attention with a causal mask {dt}")


@case
def baddbmm(c):
    for dt in DTYPES:
        s, b1, b2 = rnd(3, 7, 64, dtype=dt), rnd(3, 7, 32, dtype=dt), rnd(3, 32, 64, dtype=dt)
        same(c, ["bmm", "baddbmm"], torch.baddbmm, [s, b1, b2], MATMUL, f"baddbmm {dt}")
        same(c, ["bmm", "baddbmm"], lambda x, y, z: torch.baddbmm(x, y, z, beta=0.5, alpha=2.0),
             [rnd(7, 64, dtype=dt), b1, b2], MATMUL, f"baddbmm beta 0.5 alpha 2, self broadcast {dt}")
        nan = torch.full((3, 7, 64), float("nan"), dtype=dt)
        same(c, "bmm", lambda x, y, z: torch.baddbmm(x, y, z, beta=0.0), [nan, b1, b2], MATMUL,
             f"baddbmm beta 0 ignores self (NaN) {dt}")


@case
def ops_bad_input(c):
    x = rnd(3, 4).to(D)
    c.raises(lambda: x + torch.ones(3, 4), RuntimeError, "same device", "card + CPU tensor")
    c.raises(lambda: x * rnd(5, 4).to(D), RuntimeError, "", "mul of shapes that do not broadcast")
    c.raises(lambda: x.masked_fill(torch.ones(3, 4, dtype=torch.bool).to(D), torch.ones(2)), RuntimeError,
             "0-dimensional", "masked_fill with a 1-D value")
    c.raises(lambda: torch.baddbmm(rnd(2, 4, 5).to(D), rnd(3, 4, 6).to(D), rnd(3, 6, 5).to(D)), RuntimeError, "",
             "baddbmm with a self that does not broadcast")
    c.ok(torch.equal((x * 2).cpu(), x.cpu() * 2), "the card still works")


if __name__ == "__main__":
    sys.exit(tap.run())
