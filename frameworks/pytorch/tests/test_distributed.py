# SPDX-License-Identifier: MIT
"""torch.distributed on the card: the c10d backend "spyreccl" (spyre_torch/distributed.py) in two
processes, rank r on card r, one group init_process_group("cpu:gloo,spyre:spyreccl") through a file
store; every result against the CPU (inputs are quarters in -7.5..7.5: sums of two are exact in
float32, float16 and bfloat16, so equality is asked). all_reduce (three dtypes, odd sizes, a 2-D tensor,
async_op=True with wait() and is_completed()), all_gather (a list of tensors of 37 elements: staged
through stick-padded buffers) and all_gather_into_tensor, reduce_scatter (list) and
reduce_scatter_tensor, broadcast from each root, send/recv both ways, barrier, a CPU tensor in the same
group (gloo), and errors (ReduceOp.MAX, an int32 tensor). The two workers are fresh interpreters (each
imports torch); the cases read what they reported.
Run: python3 test_distributed.py [case ...]; a worker: python3 test_distributed.py --worker RANK N FILE
"""
import json
import os
import subprocess
import sys
import tempfile

import torch

import tap
from tap import case

N = 2


def val(rank, shape, dtype, seed):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return (torch.randint(-30, 31, shape, generator=g).float() * 0.25).to(dtype)


def worker(rank, n, store_file):
    import torch.distributed as dist

    res = {}
    counts = {}

    def check(name, got, want):
        counts[name] = counts.get(name, 0) + 1
        ok = torch.equal(got.cpu(), want)
        if not ok:
            res.setdefault(name, []).append(f"rank {rank}: got {got.cpu().flatten()[:6].tolist()} "
                                            f"want {want.flatten()[:6].tolist()}")
        else:
            res.setdefault(name, [])

    def run(name, fn):
        try:
            fn()
            res.setdefault(name, [])
        except Exception as e:  # reported
            res.setdefault(name, []).append(f"rank {rank}: {type(e).__name__}: {e}")

    torch.spyre.set_device(rank)
    dist.init_process_group("cpu:gloo,spyre:spyreccl", init_method=f"file://{store_file}", rank=rank,
                            world_size=n)
    dev = torch.device("spyre", rank)
    res["init"] = [] if dist.get_backend() == "cpu:gloo,spyre:spyreccl" else [f"backend {dist.get_backend()}"]

    def all_reduce():
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            for shape in ((1,), (1001,), (33, 70)):
                t = val(rank, shape, dt, 1).to(dev)
                w = dist.all_reduce(t, async_op=True)
                w.wait()
                if not w.is_completed():
                    res.setdefault("all_reduce", []).append(f"rank {rank}: not completed after wait()")
                check("all_reduce", t, sum(val(k, shape, dt, 1).float() for k in range(n)).to(dt))
        t = val(rank, (4096,), torch.float32, 2).to(dev)
        dist.all_reduce(t)
        check("all_reduce", t, sum(val(k, (4096,), torch.float32, 2) for k in range(n)))

    def all_gather():
        inp = val(rank, (37,), torch.float32, 3).to(dev)
        outs = [torch.empty(37, device=dev) for _ in range(n)]
        dist.all_gather(outs, inp)
        for k in range(n):
            check("all_gather", outs[k], val(k, (37,), torch.float32, 3))
        inp = val(rank, (64,), torch.bfloat16, 4).to(dev)
        out = torch.empty(n * 64, dtype=torch.bfloat16, device=dev)
        dist.all_gather_into_tensor(out, inp)
        check("all_gather", out, torch.cat([val(k, (64,), torch.bfloat16, 4) for k in range(n)]))

    def reduce_scatter():
        ins = [val(rank, (45,), torch.float32, 10 + j).to(dev) for j in range(n)]
        out = torch.empty(45, device=dev)
        dist.reduce_scatter(out, ins)
        check("reduce_scatter", out, sum(val(k, (45,), torch.float32, 10 + rank) for k in range(n)))
        inp = val(rank, (n * 32,), torch.float16, 5).to(dev)
        out = torch.empty(32, dtype=torch.float16, device=dev)
        dist.reduce_scatter_tensor(out, inp)
        want = sum(val(k, (n * 32,), torch.float16, 5).float() for k in range(n)).to(torch.float16)
        check("reduce_scatter", out, want[rank * 32:(rank + 1) * 32])

    def broadcast():
        for root in range(n):
            t = val(rank, (77,), torch.float32, 20 + root).to(dev)
            dist.broadcast(t, src=root)
            check("broadcast", t, val(root, (77,), torch.float32, 20 + root))

    def send_recv():
        for src in range(n):
            for dst in range(n):
                if src == dst or rank not in (src, dst):
                    continue
                t = val(rank, (300,), torch.float32, 30 + src).to(dev)
                if rank == src:
                    dist.send(t, dst)
                else:
                    dist.recv(t, src)
                    check("send_recv", t, val(src, (300,), torch.float32, 30 + src))

    def barrier_and_cpu():
        dist.barrier()
        t = val(rank, (9,), torch.float32, 40)
        dist.all_reduce(t)
        check("barrier_and_cpu", t, sum(val(k, (9,), torch.float32, 40) for k in range(n)))
        dist.barrier()

    def errors():
        t = torch.ones(8, device=dev)
        for op, exc, text in ((lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX), ValueError,
                               "only ReduceOp.SUM"),
                              (lambda: dist.all_reduce(torch.ones(8, dtype=torch.int32, device=dev)),
                               RuntimeError, "is not float32, float16 or bfloat16")):
            try:
                op()
                res.setdefault("errors", []).append(f"rank {rank}: no {exc.__name__}")
            except exc as e:
                if text not in str(e):
                    res.setdefault("errors", []).append(f"rank {rank}: {e!r} lacks {text!r}")
        dist.all_reduce(t)  # the group still works
        check("errors", t, torch.full((8,), float(n)))

    for name, fn in (("all_reduce", all_reduce), ("all_gather", all_gather),
                     ("reduce_scatter", reduce_scatter), ("broadcast", broadcast),
                     ("send_recv", send_recv), ("barrier_and_cpu", barrier_and_cpu), ("errors", errors)):
        run(name, fn)
    dist.destroy_process_group()
    print("RESULTS " + json.dumps({"failures": res, "checks": counts}), flush=True)


_results = None
_counts = {}
# Comparisons with the CPU both ranks make together, per case.
EXPECTED_CHECKS = {"init": 0, "all_reduce": 20, "all_gather": 6, "reduce_scatter": 4, "broadcast": 4,
                   "send_recv": 2, "barrier_and_cpu": 2, "errors": 2}


def results():
    """Both workers' reports, merged: {case: [failures]} (run once)."""
    global _results
    if _results is None:
        store = tempfile.mktemp(prefix="spyreccl-store-")
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r), str(N), store], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in range(N)]
        _results = {}
        for r, p in enumerate(procs):
            try:
                out, _ = p.communicate(timeout=1500)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            lines = [x for x in out.splitlines() if x.startswith("RESULTS ")]
            if p.returncode or not lines:
                _results.setdefault("workers", []).append(f"rank {r} exited {p.returncode}: {out[-2000:]}")
                continue
            rep = json.loads(lines[-1][8:])
            for k, v in rep["failures"].items():
                _results.setdefault(k, []).extend(v)
            for k, v in rep["checks"].items():
                _counts[k] = _counts.get(k, 0) + v
        if os.path.exists(store):
            os.unlink(store)
    return _results


def _case(name):
    def fn(c):
        r = results()
        c.ok(not r.get("workers"), f"workers: {r.get('workers')}")
        c.ok(name in r, f"{name}: not reported")
        c.ok(_counts.get(name, 0) == EXPECTED_CHECKS[name],
             f"{name}: {_counts.get(name, 0)} comparisons with the CPU, want {EXPECTED_CHECKS[name]}")
        for failure in r.get(name, []):
            c.ok(False, f"{name}: {failure}")
    fn.__name__ = "dist_" + name
    return case(fn)


for _n in ("init", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "send_recv", "barrier_and_cpu",
           "errors"):
    _case(_n)

if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        sys.exit(0)
    sys.exit(tap.run())
