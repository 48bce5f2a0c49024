# SPDX-License-Identifier: MIT
"""
Description: the PyTorch 2 side of the device "spyre" in the VM. Autoload: a
fresh interpreter's `import torch; torch.ones(2, device="spyre")` works
through the torch.backends entry point alone (run_all.py checks it right
after its import; python-torch-test sees no device "spyre" with
TORCH_DEVICE_BACKEND_AUTOLOAD=0); the generated methods (Tensor.spyre(),
is_spyre, Module.spyre()); random numbers: torch.randn(..., device="spyre")
after torch.manual_seed(s) equals the CPU's after the same seed, a
torch.Generator(device="spyre") equals a CPU generator of the same seed, RNG
state round trip; pinned memory (pin_memory(), torch.empty(pin_memory=True):
libspyre's pinned host memory, copies with non_blocking=True return before the
card is done, values exact); torch.Stream / torch.Event (pool round robin,
wait, query, synchronize, elapsed time, enable_timing checked); torch.accelerator
(current accelerator, device count, current device, synchronize, current
stream); memory statistics (torch.spyre.memory_* and torch.accelerator.memory_*
agree, exact byte counts); bad input raises Python exceptions.
Run: python3 test_torch2.py [case ...]
"""
import os
import subprocess
import sys

import torch

import spyre_torch
import tap
from tap import case

D = torch.device("spyre", 0)


def fresh(code, **env):
    """Run @code in a fresh interpreter (nothing imported but what it imports): (exit status, output)."""
    e = dict(os.environ, **env)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e)
    return p.returncode, (p.stdout + p.stderr).strip()


@case
def autoload(c):
    from importlib.metadata import entry_points
    eps = [ep.value for ep in entry_points(group="torch.backends")]
    c.ok("spyre_torch:_autoload" in eps, f"entry point of group torch.backends: {eps}")
    seen = getattr(sys.modules["__main__"], "AUTOLOADED", None)  # run_all.py's, right after its import torch
    if seen is None:  # run alone: a fresh interpreter (another import of torch: 30-70 s under TCG)
        rc, out = fresh("import sys, torch; t = torch.ones(2, device='spyre') * 3; "
                        "print(t.device, t.is_spyre, t.cpu().tolist(), torch.spyre.__name__, 'spyre_torch' in sys.modules)")
        seen = out.splitlines()[-1] if rc == 0 and out else out
    c.ok(seen == "spyre:0 True [3.0, 3.0] spyre_torch True",
         f"a fresh interpreter, import torch only, then torch.ones(2, device='spyre') * 3: {seen!r}")
    spyre_torch._autoload()
    spyre_torch._register()
    c.ok(torch.spyre is spyre_torch and torch._C._get_privateuse1_backend_name() == "spyre",
         "_autoload and _register again: nothing changes, nothing raises")


@case
def generated_methods(c):
    x = torch.arange(6.0).reshape(2, 3)
    d = x.spyre()
    c.ok(d.device == D and d.is_spyre and not x.is_spyre, f"Tensor.spyre(): {d.device}, is_spyre")
    c.ok(torch.equal(d.cpu(), x), "the values came along")
    m = torch.nn.Linear(3, 4)
    w = m.weight.detach().clone()
    m.spyre()
    c.ok(m.weight.device == D and m.bias.device == D, "Module.spyre() moves the parameters")
    c.close(m(d), x @ w.t() + m.bias.detach().cpu(), 1e-4, 1e-5, "and the module runs on the card")
    c.ok(torch.device("spyre:0") == D and torch.empty(1, device="spyre").device == D, "device strings")


@case
def random_numbers(c):
    torch.manual_seed(1234)
    got = torch.randn(64, 3, device="spyre")
    torch.manual_seed(1234)
    want = torch.randn(64, 3)
    c.ok(got.device == D and torch.equal(got.cpu(), want),
         f"manual_seed(1234): randn on spyre == randn on the CPU (first {got[0, 0].item():.6f})")
    c.ok(torch.spyre.initial_seed() == 1234, f"initial_seed {torch.spyre.initial_seed()}")
    torch.manual_seed(7)
    a = [torch.rand(5, device="spyre").cpu(), torch.randint(0, 100, (5,), device="spyre").cpu(),
         torch.randperm(9, device="spyre").cpu()]
    torch.manual_seed(7)
    b = [torch.rand(5), torch.randint(0, 100, (5,)), torch.randperm(9)]
    c.ok(all(torch.equal(x, y) for x, y in zip(a, b)), f"rand, randint, randperm as the CPU's: {a[1].tolist()}")
    g = torch.Generator(device="spyre")
    c.ok(g.device == D, f"torch.Generator(device='spyre'): {g.device}")
    g.manual_seed(5)
    x = torch.randn(8, device="spyre", generator=g)
    y = torch.randn(8, generator=torch.Generator().manual_seed(5))
    c.ok(torch.equal(x.cpu(), y), "a spyre generator seeded 5 == a CPU generator seeded 5")
    st = torch.spyre.get_rng_state()
    u = torch.randn(4, device="spyre").cpu()
    torch.spyre.set_rng_state(st)
    v = torch.randn(4, device="spyre").cpu()
    c.ok(st.dtype == torch.uint8 and torch.equal(u, v), f"get/set_rng_state replays ({st.numel()} bytes)")
    e = torch.ones(1000, device="spyre")
    torch.manual_seed(3)
    e.bernoulli_(0.5)
    torch.manual_seed(3)
    f = torch.ones(1000).bernoulli_(0.5)
    c.ok(torch.equal(e.cpu(), f), f"bernoulli_ in place: {int(f.sum())} ones of 1000, as the CPU's")
    c.raises(lambda: torch.randn(3, device="spyre", generator=torch.Generator()), RuntimeError, "",
             "a CPU generator for a spyre tensor")
    c.raises(lambda: torch.spyre.set_rng_state(torch.zeros(3)), RuntimeError, "ByteTensor",
             "an RNG state that is not one")


@case
def pinned_memory(c):
    x = torch.arange(1 << 20, dtype=torch.float32)
    p = x.pin_memory()
    c.ok(p.is_pinned() and not x.is_pinned() and torch.equal(p, x), "pin_memory(): pinned, same values")
    c.ok(torch.ops.spyre.is_pinned_by_libspyre(p) and not torch.ops.spyre.is_pinned_by_libspyre(x),
         "libspyre's pinned host memory (spyre_pointer_get_attributes)")
    e = torch.empty(1 << 20, pin_memory=True)
    c.ok(e.is_pinned() and torch.ops.spyre.is_pinned_by_libspyre(e), "torch.empty(..., pin_memory=True)")
    c.ok(p[10:].is_pinned(), "a view into pinned memory is pinned")
    before = torch.spyre.async_copies()
    d = p.to("spyre", non_blocking=True)
    e.copy_(d.clone(), non_blocking=True)
    torch.spyre.synchronize()
    c.ok(torch.equal(e, x), "pinned -> card -> pinned with non_blocking=True: exact after synchronize")
    c.ok(torch.spyre.async_copies() - before == 2, f"both copies asynchronous ({torch.spyre.async_copies() - before})")
    before = torch.spyre.async_copies()
    h = x.to("spyre", non_blocking=True).cpu()
    c.ok(torch.equal(h, x) and torch.spyre.async_copies() == before,
         "pageable memory with non_blocking=True: staged, not counted as asynchronous")
    del p, e, d
    c.ok(torch.empty(0, pin_memory=True).is_pinned() is False, "an empty pinned tensor has no block")


@case
def streams_events(c):
    pool = [torch.Stream(device="spyre") for _ in range(5)]
    ids = [s.stream_id for s in pool]
    c.ok(len(set(ids[:4])) == 4 and ids[4] == ids[0] and 0 not in ids,
         f"torch.Stream(device='spyre'): a pool of 4 per priority, round robin: {ids}")
    hi = torch.Stream(device="spyre", priority=-1)
    c.ok(hi.stream_id not in ids and hi.device == D, f"priority -1: the high pool ({hi.stream_id})")
    s = pool[0]
    x = torch.rand(64, 64)
    xd = x.to(D)
    e1, e2 = torch.Event(device="spyre", enable_timing=True), torch.Event(device="spyre", enable_timing=True)
    with spyre_torch.stream(s):
        e1.record()
        for _ in range(3):
            y = xd @ xd
        e2.record()
    other = torch.accelerator.current_stream()
    other.wait_event(e2)
    z = y + y
    e2.synchronize()
    c.ok(e1.query() and e2.query() and s.query(), "events and stream complete after synchronize")
    ms = e1.elapsed_time(e2)
    c.ok(ms > 0, f"torch.Event elapsed_time: {ms:.4f} ms of device time for 3 matmuls")
    c.close(z, (x @ x) * 2, 1e-4, 1e-4, "the default stream waited for the event: the result is right")
    s.wait_stream(other)
    s.synchronize()
    f = torch.Event(device="spyre")
    f.record()
    f.synchronize()
    c.raises(lambda: f.elapsed_time(e2), ValueError, "enable_timing", "elapsed_time without enable_timing")
    c.raises(lambda: torch.Event(device="spyre", enable_timing=True).elapsed_time(e1), ValueError, "recorded",
             "elapsed_time of an event never recorded")
    own = spyre_torch.Stream(D)
    c.ok(isinstance(own, torch.Stream) and own.stream_id not in ids, f"torch.spyre.Stream is a torch.Stream: {own}")
    del own


@case
def accelerator(c):
    n = torch.spyre.device_count()
    c.ok(torch.accelerator.current_accelerator() == torch.device("spyre"),
         f"current_accelerator {torch.accelerator.current_accelerator()}")
    c.ok(torch.accelerator.is_available() and torch.accelerator.device_count() == n >= 1,
         f"device_count {torch.accelerator.device_count()} == torch.spyre's {n}")
    last = n - 1
    torch.accelerator.set_device_index(last)
    c.ok(torch.accelerator.current_device_index() == last and torch.spyre.current_device() == last,
         f"set_device_index({last}): current device {torch.accelerator.current_device_index()}")
    t = torch.ones(3, device="spyre")
    c.ok(t.device == torch.device("spyre", last), f"a tensor without an index lands there: {t.device}")
    torch.accelerator.set_device_index(0)
    s = torch.accelerator.current_stream()
    c.ok(isinstance(s, torch.Stream) and s.device == D and s.stream_id == 0, f"current_stream {s}")
    y = torch.rand(256, 256, device="spyre") @ torch.rand(256, 256, device="spyre")
    torch.accelerator.synchronize()
    c.ok(s.query(), "torch.accelerator.synchronize(): the default stream is idle")
    c.raises(lambda: torch.accelerator.set_device_index(n + 5), RuntimeError, "out of range",
             "set_device_index past the cards")
    del y


@case
def memory_stats(c):
    torch.spyre.synchronize()
    base = torch.spyre.memory_allocated()
    blocks = torch.spyre.memory_stats()["allocation.all.current"]
    t = torch.empty(1 << 20, device=D)
    st = torch.spyre.memory_stats()
    c.ok(torch.spyre.memory_allocated() - base == 4 << 20, f"4 MiB tensor: +{torch.spyre.memory_allocated() - base}")
    c.ok(st["allocated_bytes.all.current"] == torch.spyre.memory_allocated() == torch.accelerator.memory_allocated(),
         "memory_stats, memory_allocated and torch.accelerator.memory_allocated agree")
    c.ok(st["allocation.all.current"] == blocks + 1, f"one more block: {st['allocation.all.current']}")
    c.ok(torch.spyre.max_memory_allocated() >= base + (4 << 20), "max_memory_allocated covers it")
    c.ok(torch.spyre.memory_reserved() >= torch.spyre.memory_allocated(), "reserved >= allocated")
    del t
    c.ok(torch.spyre.memory_allocated() == base, "freed when the tensor dies")
    torch.spyre.reset_peak_memory_stats()
    c.ok(torch.spyre.max_memory_allocated() == base, f"reset_peak_memory_stats: peak {torch.spyre.max_memory_allocated()}")
    u = torch.empty(8 << 20, dtype=torch.uint8, device=D)
    del u
    r0 = torch.spyre.memory_reserved()
    torch.spyre.empty_cache()
    c.ok(torch.spyre.memory_reserved() <= r0, f"empty_cache: reserved {r0} -> {torch.spyre.memory_reserved()}")
    torch.accelerator.empty_cache()
    c.ok(torch.spyre.memory_allocated() == base, "torch.accelerator.empty_cache() keeps live tensors")


@case
def bad_input(c):
    n = torch.spyre.device_count()
    c.raises(lambda: torch.Stream(device=f"spyre:{n + 2}"), RuntimeError, "out of range", "a stream on no card")
    c.raises(lambda: torch.Generator(device="spyre").manual_seed(1).get_offset(), RuntimeError, "offset",
             "get_offset of a spyre generator")
    c.raises(lambda: torch.spyre.memory_stats(n + 1), RuntimeError, "out of range", "memory_stats of no card")
    c.raises(lambda: torch.empty(2, device="spyre").pin_memory(), RuntimeError, "", "pin_memory of a card tensor")


if __name__ == "__main__":
    sys.exit(tap.run())
