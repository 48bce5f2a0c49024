# SPDX-License-Identifier: MIT
"""
Description: the PyTorch device "spyre" (spyre_torch, PyTorch 2.13) in the
VM, against the CPU.
Devices, copies in every direction (dtypes, odd sizes, views, strided
sources and destinations), fill/zero, every registered op over edge shapes
and fp32/fp16/bf16 against torch on the CPU (the inputs rounded to the dtype;
tolerances: fp32 rtol 1e-4 atol 1e-5 (accumulation order), fp16 rtol/atol
1e-2, bf16 rtol/atol 5e-2 (one output rounding plus accumulation)), the CPU
fallback (counted, warned once), streams and events (torch.spyre.Stream and
torch.Event: a producer stream, a consumer waiting on an event, values
checked), memory statistics, out of
device memory (a RuntimeError naming the size and the device; empty_cache
recovers), and bad input (devices, shapes, dtypes): each a Python exception.
Run: python3 test_spyre_torch.py [case ...]
"""
import os
import sys
import warnings

import torch

import spyre_torch
import tap
from tap import case

D = spyre_torch.device(0) if spyre_torch.device_count() else None
TOL = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
EDGE = [1, 7, 64, 65, 129]


def rnd(*shape, dtype=torch.float32, lo=-1.0, hi=1.0):
    return (torch.rand(*shape) * (hi - lo) + lo).to(dtype)


@case
def devices(c):
    n = spyre_torch.device_count()
    c.ok(n >= 1, f"device_count() = {n}")
    c.ok(str(D) == "spyre:0", f"device(0) is {D}")
    c.ok(torch.spyre is spyre_torch, "torch.spyre is the module")
    c.raises(lambda: spyre_torch.device(n), RuntimeError, "out of range", "device(count)")
    c.raises(lambda: torch.ones(2).to(f"spyre:{n + 3}"), RuntimeError, f"device index {n + 3} is out of range",
             "a tensor on a device that does not exist")
    c.raises(lambda: spyre_torch.device("x"), RuntimeError, "out of range", "device('x')")
    spyre_torch.set_device(0)
    c.ok(spyre_torch.current_device() == 0, "set_device / current_device")


@case
def copies(c):
    for dt in [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8, torch.bool]:
        for n in [1, 3, 31, 32, 33, 127, 128, 129, 1000, 65537]:
            h = (torch.rand(n) * 100).to(dt)
            d = h.to(D)
            c.ok(d.device == D and d.dtype == dt and tuple(d.shape) == (n,), f"{dt} {n}: on the device")
            c.ok(torch.equal(d.cpu(), h), f"{dt} {n}: H2D then D2H is exact")
    h = torch.arange(12 * 37, dtype=torch.float32).reshape(12, 37)
    d = h.to(D)
    c.ok(torch.equal(d.t().cpu(), h.t()), "a transposed view comes back transposed")
    c.ok(torch.equal(d[3:9, 5:20].cpu(), h[3:9, 5:20]), "a slice (unaligned start) comes back")
    c.ok(torch.equal(d[1:].contiguous().cpu(), h[1:]), "contiguous() of an unaligned view on the card")
    e = d.clone()
    c.ok(torch.equal(e.cpu(), h) and e.data_ptr() != d.data_ptr(), "clone: device to device")
    e.t()[2:5].copy_(torch.full((3, 12), -1.0))
    want = h.clone()
    want.t()[2:5] = -1.0
    c.ok(torch.equal(e.cpu(), want), "copy into a strided destination on the card")
    f = torch.empty(37, 12, device=D)
    f.copy_(d.t())
    c.ok(torch.equal(f.cpu(), h.t()), "device-to-device copy from a transposed source")
    g = d.to(torch.float16)
    c.ok(torch.equal(g.cpu(), h.to(torch.float16)), "dtype conversion on the way")
    c.raises(lambda: torch.empty(3, 4, device=D).copy_(torch.ones(5, 6)), RuntimeError, "",
             "copy between mismatched shapes")


@case
def fill_zero(c):
    for n in [1, 33, 128, 1000]:
        d = torch.empty(n, device=D)
        d.fill_(2.5)
        c.ok(torch.equal(d.cpu(), torch.full((n,), 2.5)), f"fill_ {n}")
        d.zero_()
        c.ok(torch.equal(d.cpu(), torch.zeros(n)), f"zero_ {n}")
    d = torch.ones(8, 8, device=D)
    d[:, 3].zero_()
    want = torch.ones(8, 8)
    want[:, 3] = 0
    c.ok(torch.equal(d.cpu(), want), "zero_ of a column (strided)")
    c.ok(torch.equal(torch.zeros(5, 7, device=D).cpu(), torch.zeros(5, 7)), "torch.zeros on the card")
    c.ok(torch.equal(torch.full((3, 3), 7, device=D).cpu(), torch.full((3, 3), 7)), "torch.full on the card")


def on_card(name):
    return spyre_torch.card_counts().get(name, 0)


@case
def matmuls(c):
    for dt in DTYPES:
        rt, at = TOL[dt]
        for m in [1, 7, 65]:
            for k in [1, 64, 129]:
                for n in [1, 65, 128]:
                    a, b = rnd(m, k, dtype=dt), rnd(k, n, dtype=dt)
                    want = a.float() @ b.float()
                    before = on_card("mm")
                    got = a.to(D) @ b.to(D)
                    c.ok(on_card("mm") == before + 1, f"mm {dt} {m}x{k}x{n} ran on the card")
                    c.close(got, want, rt, at, f"mm {dt} {m}x{k}x{n}")
        for m, k, n in [(5, 64, 33), (1, 129, 7)]:
            x, w, bias = rnd(m, k, dtype=dt), rnd(n, k, dtype=dt), rnd(n, dtype=dt)
            want = x.float() @ w.float().t() + bias.float()
            xd, wd, bd = x.to(D), w.to(D), bias.to(D)
            c.close(torch.addmm(bd, xd, wd.t()), want, rt, at, f"addmm {dt} {m}x{k}x{n}")
            with torch.inference_mode():
                c.close(torch.nn.functional.linear(xd, wd, bd), want, rt, at, f"linear {dt} {m}x{k}x{n}")
                c.close(torch.nn.functional.linear(xd, wd), x.float() @ w.float().t(), rt, at,
                        f"linear without bias {dt}")
            c.close(torch.nn.functional.linear(xd, wd, bd), want, rt, at, f"linear (autograd on) {dt}")
        for bt, m, k, n in [(1, 1, 64, 64), (3, 7, 65, 9), (4, 33, 32, 129)]:
            a, b = rnd(bt, m, k, dtype=dt), rnd(bt, k, n, dtype=dt)
            c.close(torch.bmm(a.to(D), b.to(D)), torch.bmm(a.float(), b.float()), rt, at,
                    f"bmm {dt} {bt}x{m}x{k}x{n}")


@case
def weight_layout(c):
    # LINEAR reads W [n, k] as it is (SPYRE_KF_WEIGHT_NK): nothing transposed, nothing cached, so a new or
    # changed W is always the one used, and a stick-aligned W needs no relayout
    x = rnd(4, 64)
    for dt in DTYPES:
        rt, at = TOL[dt]
        xs, w = rnd(3, 128, dtype=dt), rnd(64, 128, dtype=dt)
        xd, wd = xs.to(D), w.to(D)
        r0, t0 = spyre_torch.relayouts(), on_card("transpose")
        with torch.inference_mode():
            c.close(torch.nn.functional.linear(xd, wd), xs.float() @ w.float().t(), rt, at, f"linear {dt} W [64, 128]")
        c.close(xd @ wd.t(), xs.float() @ w.float().t(), rt, at, f"mm {dt} with W.t()")
        c.ok(spyre_torch.relayouts() == r0 and on_card("transpose") == t0,
             f"{dt}: W bound as it is (relayouts {spyre_torch.relayouts() - r0}, transposes {on_card('transpose') - t0})")
    for it in range(6):
        w = rnd(32, 64)
        wd = w.to(D)
        c.close(x.to(D) @ wd.t(), x @ w.t(), 1e-4, 1e-5, f"weight {it}: a fresh W (perhaps at a freed W's address)")
        wd.mul_(2) if it % 2 else wd.copy_(w * 2)
        c.close(x.to(D) @ wd.t(), x @ (w * 2).t(), 1e-4, 1e-5, f"weight {it}: W changed in place")
        del wd
    with torch.inference_mode():
        # inference tensors (no version counter) likewise: read where they are
        w = rnd(32, 64)
        wd = w.to(D)
        c.close(torch.nn.functional.linear(x.to(D), wd), x @ w.t(), 1e-4, 1e-5, "linear of an inference tensor")
        wd.mul_(2)
        c.close(torch.nn.functional.linear(x.to(D), wd), x @ (2 * w).t(), 1e-4, 1e-5,
                "an inference tensor changed in place")
        c.close(x.to(D) @ wd.t(), x @ (2 * w).t(), 1e-4, 1e-5, "mm with an inference tensor's transpose")


@case
def threads(c):
    import threading
    errors, results = [], {}

    def work(t):
        try:
            s = spyre_torch.Stream(D)
            x, w, b = rnd(16, 64), rnd(64, 64), rnd(64)
            with spyre_torch.stream(s):
                xd, wd, bd = x.to(D), w.to(D), b.to(D)
                bad = 0
                for _ in range(10):
                    y = torch.relu(torch.addmm(bd, xd, wd))
                    bad += int(((y.cpu() - torch.relu(x @ w + b)).abs() > 1e-4).sum())
            results[t] = bad
        except Exception as e:  # reported below
            errors.append(f"thread {t}: {e}")

    th = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    c.ok(not errors, f"no errors: {errors}")
    c.ok(sorted(results) == [0, 1, 2, 3] and not any(results.values()),
         f"4 threads x 10 addmm+relu on their own streams, every value right: {results}")


@case
def elementwise(c):
    for dt in DTYPES:
        rt, at = TOL[dt]
        for shape in [(1,), (7,), (64,), (65, 3), (129, 129), (2, 3, 33)]:
            a, b = rnd(*shape, dtype=dt, lo=-3, hi=3), rnd(*shape, dtype=dt, lo=-3, hi=3)
            ad, bd = a.to(D), b.to(D)
            c.close(ad + bd, a.float() + b.float(), rt, at, f"add {dt} {shape}")
            c.close(torch.add(ad, bd, alpha=0.22), a.float() + 0.22 * b.float(), rt, at, f"add alpha {dt} {shape}")
            c.close(ad * bd, a.float() * b.float(), rt, at, f"mul {dt} {shape}")
            c.close(torch.relu(ad), torch.relu(a.float()), rt, at, f"relu {dt} {shape}")
            c.close(torch.nn.functional.gelu(ad), torch.nn.functional.gelu(a.float()), 4 * rt, 4 * at,
                    f"gelu {dt} {shape}")
            c.close(torch.nn.functional.silu(ad), torch.nn.functional.silu(a.float()), 4 * rt, 4 * at,
                    f"silu {dt} {shape}")
    for name in ["add", "mul", "relu", "gelu", "silu"]:
        c.ok(on_card(name) > 0, f"{name} ran on the card ({on_card(name)} launches)")


@case
def softmax_norms_embedding(c):
    for dt in DTYPES:
        rt, at = TOL[dt]
        for m, n in [(1, 1), (7, 65), (33, 128), (4, 1000)]:
            x = rnd(m, n, dtype=dt, lo=-4, hi=4)
            xd = x.to(D)
            c.close(torch.softmax(xd, -1), torch.softmax(x.float(), -1), rt, at, f"softmax {dt} {m}x{n}")
            w, b = rnd(n, dtype=torch.float32), rnd(n, dtype=torch.float32)
            with torch.inference_mode():
                c.close(torch.nn.functional.layer_norm(xd, (n,), w.to(D), b.to(D), 1e-5),
                        torch.nn.functional.layer_norm(x.float(), (n,), w, b, 1e-5), 4 * rt, 4 * at,
                        f"layer_norm {dt} {m}x{n}")
            c.close(torch.nn.functional.layer_norm(xd, (n,), w.to(D), b.to(D), 1e-5),
                    torch.nn.functional.layer_norm(x.float(), (n,), w, b, 1e-5), 4 * rt, 4 * at,
                    f"layer_norm (autograd on) {dt} {m}x{n}")
            ref = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w
            c.close(spyre_torch.rms_norm(xd, w.to(D), 1e-6), ref, 4 * rt, 4 * at, f"rms_norm {dt} {m}x{n}")
        for vocab, hidden in [(10, 64), (512, 128), (33, 7)]:
            table = rnd(vocab, hidden, dtype=dt)
            ids = torch.tensor([[0, vocab - 1, 3 % vocab], [1, 1, 2]], dtype=torch.int64)
            c.close(torch.nn.functional.embedding(ids.to(D), table.to(D)),
                    torch.nn.functional.embedding(ids, table).float(), 0, 0, f"embedding {dt} {vocab}x{hidden}")
    c.raises(lambda: torch.nn.functional.embedding(torch.tensor([10]).to(D), rnd(10, 64).to(D)), RuntimeError,
             "out of range", "embedding index past the table")
    for name in ["softmax", "layer_norm", "native_layer_norm", "rms_norm", "embedding"]:
        c.ok(on_card(name) > 0, f"{name} ran on the card ({on_card(name)} launches)")


@case
def fallback(c):
    spyre_torch.reset_counters()
    x = rnd(5, 9)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got1 = torch.cumsum(x.to(D), 1)
        got2 = torch.cumsum(x.to(D), 1)
    c.close(got1, torch.cumsum(x, 1), 1e-6, 1e-6, "cumsum runs (on the CPU) and is right")
    c.ok(got2.device == D, "the result comes back to the card")
    counts = spyre_torch.fallback_counts()
    c.ok(counts.get("aten::cumsum.out", 0) + counts.get("aten::cumsum", 0) == 2, f"counted twice: {counts}")
    named = [str(x.message) for x in w if "cumsum" in str(x.message)]
    c.ok(len(named) == 1, f"one warning naming the op: {named}")
    y = torch.softmax(x.to(D), 0)
    c.close(y, torch.softmax(x, 0), 1e-5, 1e-6, "softmax over dim 0 falls back and is right")
    c.ok(spyre_torch.fallback_counts().get("aten::_softmax.out", 0) +
         spyre_torch.fallback_counts().get("aten::_softmax", 0) >= 1, "and is counted")


@case
def streams_events(c):
    s1, s2 = spyre_torch.Stream(D, priority=-1), spyre_torch.Stream(D, priority=1)
    c.ok(s1 != s2 and s1.stream_id > 0 and isinstance(s1, torch.Stream), f"two streams {s1} {s2}")
    x = rnd(64, 64).to(D)
    xc = x.cpu()
    for it in range(5):
        with spyre_torch.stream(s1):
            y = x @ x
            y = y + y
            e = spyre_torch.Event(D)
            e.record()
        with spyre_torch.stream(s2):
            e.wait()
            z = torch.relu(y) * y
        s2.synchronize()
        want = torch.relu((xc @ xc) * 2) * ((xc @ xc) * 2)
        c.close(z, want, 1e-4, 1e-4, f"iteration {it}: the consumer stream saw the producer's result")
    c.ok(e.query() and s1.query() and s2.query(), "event and streams complete")
    a, b = spyre_torch.Event(D), spyre_torch.Event(D)
    a.record(s1)
    for _ in range(4):
        with spyre_torch.stream(s1):
            y = x @ x
    b.record(s1)
    b.synchronize()
    ms = a.elapsed_time(b)
    c.ok(ms > 0, f"elapsed_time between events: {ms:.4f} ms")
    c.raises(lambda: spyre_torch.Stream(D, priority=7), ValueError, "priority 7", "a bad priority")
    made = 0
    for i in range(100):  # more than a file's 64 driver queues: each is destroyed with its object
        s3 = spyre_torch.Stream(D)
        with spyre_torch.stream(s3):
            v = torch.relu(x)
        s3.synchronize()
        made += int(torch.equal(v.cpu(), torch.relu(xc)))
        del s3
    c.ok(made == 100, f"100 streams made, used and destroyed in turn: {made} right")
    c.ok(spyre_torch.current_stream(D).stream_id == 0, "back on the default stream")
    spyre_torch.synchronize()


@case
def memory(c):
    spyre_torch.synchronize()
    base = spyre_torch.memory_allocated()
    t = torch.empty(1 << 20, device=D)
    c.ok(spyre_torch.memory_allocated() - base >= 4 << 20, "4 MiB tensor counted in memory_allocated")
    del t
    c.ok(spyre_torch.memory_allocated() == base, "freed when the tensor dies")
    c.ok(spyre_torch.memory_reserved() >= spyre_torch.memory_allocated(), "reserved >= allocated")
    huge = 1 << 40
    c.raises(lambda: torch.empty(huge, dtype=torch.uint8, device=D), RuntimeError,
             f"cannot allocate {huge} bytes on spyre:0", "1 TiB: an error naming the size and the device")
    keep = []
    try:
        for _ in range(4096):
            keep.append(torch.empty(64 << 20, dtype=torch.uint8, device=D))
    except RuntimeError as e:
        c.ok("out of device memory" in str(e), f"filling the card ends in a clear error: {e}")
    n = len(keep)
    del keep
    spyre_torch.empty_cache()
    again = torch.ones(64 << 20, dtype=torch.uint8, device=D)
    c.ok(n > 0 and int(again[-1].item()) == 1, f"after {n} x 64 MiB, empty_cache() and a new tensor works")


@case
def bad_input(c):
    z = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    got = z.to(D) @ z.to(D)
    c.ok(got.device == D and complex(got.cpu()) == complex(z @ z), "complex dot: no kernel, the CPU fallback")
    c.ok(spyre_torch.fallback_counts().get("aten::dot", 0) >= 1, "and counted")
    c.raises(lambda: torch.ones(3, 4).to(D) @ torch.ones(5, 6).to(D), RuntimeError, "", "mm of mismatched shapes")
    c.raises(lambda: spyre_torch.rms_norm(torch.ones(3, 4).to(D), torch.ones(5).to(D)), RuntimeError,
             "rms_norm", "rms_norm with a wrong weight")
    c.raises(lambda: torch.ones(2, device=torch.device("spyre", 99)), RuntimeError, "out of range",
             "device index 99")


if __name__ == "__main__":
    sys.exit(tap.run())
