# SPDX-License-Identifier: MIT
"""torch.distributed on the card: the c10d backend "spyreccl" (spyre_torch/distributed.py) in two
processes, rank r on card r, one group init_process_group("cpu:gloo,spyre:spyreccl") through a file
store; every result against the CPU (inputs are quarters in -7.5..7.5: sums, averages and products of
two are exact in float32, float16 and bfloat16, so equality is asked). all_reduce (three dtypes, odd
sizes, a 2-D tensor, async_op=True with wait() and is_completed()), all_gather (a list of tensors of 37
elements: staged through stick-padded buffers) and all_gather_into_tensor, reduce_scatter (list) and
reduce_scatter_tensor, broadcast from each root, send/recv both ways, barrier, a CPU tensor in the same
group (gloo), errors (an unsupported ReduceOp, an int32 reduction); ReduceOp SUM, AVG, MAX, MIN and
PRODUCT in all_reduce and reduce_scatter; reduce to each root (the others' tensors untouched); gather
and scatter from each root; all_to_all_single (equal and unequal splits) and all_to_all; data movement
in any dtype (int8 ... bool, float64, odd byte counts); Work as NCCL's (wait() on a second stream does
not block the host; a broadcast returns before its result is ready; synchronize(),
get_future(), exact results); a careless client (a CPU tensor or the other card's in a spyre list, an
unsupported op or dtype, bad splits: ValueError/RuntimeError naming it, the group still works;
mismatched shapes: an error on every rank, then "failed earlier"); destroy_process_group then a
collective (ValueError) and a new group that works; batch_isend_irecv's ring exchange (every rank
sends to the next and receives from the previous, both orders of the two, up to three 2 MiB pieces)
and isend/irecv outside a batch into a non-contiguous tensor, with 2 ranks and again with 3 (a
third card: tools/vm/run --devices 3; skipped with fewer), and with 3 a gather then dist.barrier() and an
all_reduce (the barrier after uneven send/recv); the queue of sends and receives run before a CPU
call, on the stream current when each was queued, and by destroy_process_group(); a rank exiting
early: the other's next collective raises (SPYRE_COMM_TIMEOUT_MS 120 s bounds it; the parent's
timeout catches a hang). The workers are fresh interpreters (each imports torch); the cases read
what they reported. Every group has a
120 s timeout: with torch's default (30 min), a rank that failed before a group's creation (e.g.
its card's context banned after three job timeouts: destroy_reuse's first tensor raises) left the
other in init_process_group past the parent's 1500 s, and the whole file reported nothing.
Run: python3 test_distributed.py [case ...]; a worker: python3 test_distributed.py --worker RANK N FILE
(--exit-worker: the early-exit pair)
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile

import torch

import tap
from tap import case

N = 2
# Rank 1's card busy before the broadcast it receives in work_semantics: BUSY_MM matmuls of BUSY_N x BUSY_N.
BUSY_N, BUSY_MM = 2048, 8
# The groups' timeout (torch's default is 30 min, beyond _pair's 1500 s per worker): a rank that
# failed before a group call (its card's context banned after job timeouts, say) leaves the other
# waiting there for it; with this bound that rank fails with gloo's timeout and both report.
GROUP_TIMEOUT = datetime.timedelta(seconds=120)


def val(rank, shape, dtype, seed):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return (torch.randint(-30, 31, shape, generator=g).float() * 0.25).to(dtype)


def ring(dist, rank, n, dev, check):
    """batch_isend_irecv's ring exchange: send to the next rank, receive from the previous one."""
    nxt, prv = (rank + 1) % n, (rank + n - 1) % n
    for shape, dt in (((1001,), torch.float32), ((600001,), torch.float32), ((33, 7), torch.bfloat16)):
        for order in (0, 1):
            send = val(rank, shape, dt, 140 + order).to(dev)
            recv = torch.zeros(shape, dtype=dt, device=dev)
            ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
            for w in dist.batch_isend_irecv(ops[::-1] if order else ops):
                w.wait()
            check("ring_exchange", recv, val(prv, shape, dt, 140 + order))
    # isend/irecv outside a batch, the receive into a transposed (non-contiguous) tensor.
    send = val(rank, (16, 8), torch.float32, 150).to(dev)
    recv = torch.zeros(8, 16, device=dev).t()
    works = [dist.isend(send, nxt), dist.irecv(recv, prv)]
    for w in works:
        w.wait()
    check("ring_exchange", recv, val(prv, (16, 8), torch.float32, 150))


def barrier_uneven(dist, rank, n, dev, check):
    """A gather (the root makes n - 1 calls, the others one), then dist.barrier() and an all_reduce:
    the barrier once waited for the ranks' call counts to agree (a hang with 3 ranks)."""
    for i in range(2):
        inp = val(rank, (5, 9), torch.float32, 160 + i).to(dev)
        outs = [torch.empty(5, 9, device=dev) for _ in range(n)] if rank == 0 else None
        dist.gather(inp, outs, dst=0)
        dist.barrier()
        t = val(rank, (100,), torch.float32, 170 + i).to(dev)
        dist.all_reduce(t)
        check("barrier_uneven_3", t, sum(val(k, (100,), torch.float32, 170 + i) for k in range(n)))
        if rank == 0:
            check("barrier_uneven_3", outs[n - 1], val(n - 1, (5, 9), torch.float32, 160 + i))


def ring_worker(rank, n, store_file):
    """The ring exchange and the barrier after a gather (with 3 ranks)."""
    import torch.distributed as dist

    counts = {}
    res = {"ring_exchange_3": [], "barrier_uneven_3": []}

    def check(name, got, want):
        name = name if name.endswith("_3") else name + "_3"  # ring() reports as "ring_exchange"
        counts[name] = counts.get(name, 0) + 1
        if not torch.equal(got.cpu(), want):
            res[name].append(f"rank {rank}: got {got.cpu().flatten()[:6].tolist()} "
                             f"want {want.flatten()[:6].tolist()}")

    torch.spyre.set_device(rank)
    dist.init_process_group("cpu:gloo,spyre:spyreccl", init_method=f"file://{store_file}", rank=rank,
                            world_size=n, timeout=GROUP_TIMEOUT)
    for name, fn in (("ring_exchange_3", ring), ("barrier_uneven_3", barrier_uneven)):
        try:
            fn(dist, rank, n, torch.device("spyre", rank), check)
        except Exception as e:  # reported
            res[name].append(f"rank {rank}: {type(e).__name__}: {e}")
    dist.destroy_process_group()
    print("RESULTS " + json.dumps({"failures": res, "checks": counts}), flush=True)


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
                            world_size=n, timeout=GROUP_TIMEOUT)
    dev = torch.device("spyre", rank)
    res["init"] = [] if dist.get_backend() == "cpu:gloo,spyre:spyreccl" else [f"backend {dist.get_backend()}"]

    def all_reduce():
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            for shape in ((1,), (1001,), (33, 70)):
                t = val(rank, shape, dt, 1).to(dev)
                w = dist.all_reduce(t, async_op=True)
                w.wait()  # the current stream waits; t.cpu() below is enqueued after it
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
        for op, exc, text in ((lambda: dist.all_reduce(t, op=dist.ReduceOp.BXOR), ValueError,
                               "ReduceOp.BXOR is not supported"),
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

    def expect(name, fn, exc, text):
        """fn() raises @exc whose message holds @text."""
        counts[name] = counts.get(name, 0) + 1
        try:
            fn()
            res.setdefault(name, []).append(f"rank {rank}: no {exc.__name__} ({text!r})")
        except exc as e:
            if text not in str(e):
                res.setdefault(name, []).append(f"rank {rank}: {type(e).__name__}: {str(e)[:300]!r} lacks {text!r}")
        except Exception as e:  # the wrong kind
            res.setdefault(name, []).append(f"rank {rank}: {type(e).__name__} (not {exc.__name__}): {e}")

    def want_of(op, vals):
        """The CPU's reduction of @vals (float32 inside, as the card)."""
        f = [v.float() for v in vals]
        acc = f[0]
        for v in f[1:]:
            acc = {"sum": acc + v, "avg": acc + v, "max": torch.maximum(acc, v), "min": torch.minimum(acc, v),
                   "product": acc * v}[op]
        return (acc / len(vals) if op == "avg" else acc).to(vals[0].dtype)

    def reduce_ops():
        # Quarters in -7.5..7.5 and a count of 2: sums, averages, products (at most 56.25), max and
        # min are exact in each dtype.
        for op in ("sum", "avg", "max", "min", "product"):
            rop = getattr(dist.ReduceOp, op.upper())
            for dt, shape in ((torch.float32, (1001,)), (torch.float16, (33, 7)), (torch.bfloat16, (64,))):
                t = val(rank, shape, dt, 50).to(dev)
                dist.all_reduce(t, op=rop)
                check("reduce_ops", t, want_of(op, [val(k, shape, dt, 50) for k in range(n)]))
            ins = [val(rank, (40,), torch.float32, 60 + j).to(dev) for j in range(n)]
            out = torch.empty(40, device=dev)
            dist.reduce_scatter(out, ins, op=rop)
            check("reduce_ops", out, want_of(op, [val(k, (40,), torch.float32, 60 + rank) for k in range(n)]))

    def reduce_root():
        for root in range(n):
            for op in ("sum", "max"):
                t = val(rank, (150,), torch.float32, 70 + root).to(dev)
                dist.reduce(t, dst=root, op=getattr(dist.ReduceOp, op.upper()))
                want = want_of(op, [val(k, (150,), torch.float32, 70 + root) for k in range(n)])
                check("reduce_root", t, want if rank == root else val(rank, (150,), torch.float32, 70 + root))

    def gather_scatter():
        for root in range(n):
            inp = val(rank, (5, 9), torch.float32, 80 + root).to(dev)
            outs = [torch.empty(5, 9, device=dev) for _ in range(n)] if rank == root else None
            dist.gather(inp, outs, dst=root)
            if rank == root:
                for k in range(n):
                    check("gather_scatter", outs[k], val(k, (5, 9), torch.float32, 80 + root))
            chunks = [val(root, (70,), torch.bfloat16, 90 + k).to(dev) for k in range(n)] if rank == root else None
            out = torch.empty(70, dtype=torch.bfloat16, device=dev)
            dist.scatter(out, chunks, src=root)
            check("gather_scatter", out, val(root, (70,), torch.bfloat16, 90 + rank))

    def all_to_all():
        # all_to_all_single, equal splits: chunk j of rank k goes to rank j.
        inp = val(rank, (n * 6, 3), torch.float32, 100).to(dev)
        out = torch.empty(n * 6, 3, device=dev)
        dist.all_to_all_single(out, inp)
        check("all_to_all", out, torch.cat([val(k, (n * 6, 3), torch.float32, 100)[rank * 6:(rank + 1) * 6]
                                            for k in range(n)]))
        # Unequal splits: rank k sends j + k + 1 rows to rank j (rank 0 sends rank 0 one row).
        def rows(k, j):
            return j + k + 1
        src = {k: val(k, (sum(rows(k, j) for j in range(n)), 4), torch.float16, 110) for k in range(n)}
        inp = src[rank].to(dev)
        out = torch.empty(sum(rows(k, rank) for k in range(n)), 4, dtype=torch.float16, device=dev)
        dist.all_to_all_single(out, inp, output_split_sizes=[rows(k, rank) for k in range(n)],
                               input_split_sizes=[rows(rank, j) for j in range(n)])
        want = torch.cat([src[k][sum(rows(k, j) for j in range(rank)):][:rows(k, rank)] for k in range(n)])
        check("all_to_all", out, want)
        # all_to_all of lists, int64 (data movement takes any dtype).
        ins = [torch.arange(10, dtype=torch.int64, device=dev) + 100 * rank + 10 * j for j in range(n)]
        outs = [torch.empty(10, dtype=torch.int64, device=dev) for _ in range(n)]
        dist.all_to_all(outs, ins)
        for k in range(n):
            check("all_to_all", outs[k], torch.arange(10, dtype=torch.int64) + 100 * k + 10 * rank)

    def any_dtype():
        # Bytes move whatever the dtype, odd byte counts too.
        for dt in (torch.int8, torch.uint8, torch.int32, torch.int64, torch.float64, torch.bool):
            want = (torch.arange(37) % 7 - 3).to(dt)
            t = (want if rank == 0 else torch.zeros(37, dtype=dt)).to(dev)
            dist.broadcast(t, src=0)
            check("any_dtype", t, want)
        inp = torch.full((13,), rank + 200, dtype=torch.uint8, device=dev)
        out = torch.empty(n * 13, dtype=torch.uint8, device=dev)
        dist.all_gather_into_tensor(out, inp)
        check("any_dtype", out, torch.cat([torch.full((13,), k + 200, dtype=torch.uint8) for k in range(n)]))

    def work_semantics():
        # Rank 1 receives a broadcast on a stream (coll) that waits (a torch.Event) for BUSY_MM
        # matmuls on the current stream. Asserted: rank 1's call returns with the Work pending (the
        # call waits for rank 0's message, not for its own card, which is a second or more into
        # the matmuls: libspyre's sender thread, docs/kernels.md), wait() on a third stream (side)
        # orders side's t * 2 after it (exact), synchronize() completes it, get_future() holds the
        # result. Printed: whether it was still pending after wait().
        import time
        want = val(0, (2048,), torch.float32, 120)
        t = (want if rank == 0 else torch.zeros(2048)).to(dev)
        side, coll = torch.Stream(device=dev), torch.Stream(device=dev)
        torch.spyre.synchronize()
        stamps = [time.monotonic()]
        prev = torch.accelerator.current_stream(rank)
        if rank == 1:
            a = torch.ones(BUSY_N, BUSY_N, device=dev) / BUSY_N
            busy = a
            for _ in range(BUSY_MM):
                busy = busy @ a
        stamps.append(time.monotonic())
        if rank == 1:
            ev = torch.Event(dev)
            ev.record(prev)
            coll.wait_event(ev)
        stamps.append(time.monotonic())
        torch.accelerator.set_stream(coll)
        try:
            w = dist.broadcast(t, src=0, async_op=True)
        finally:
            torch.accelerator.set_stream(prev)
        stamps.append(time.monotonic())
        pending = not w.is_completed()
        torch.accelerator.set_stream(side)
        try:
            w.wait()
            doubled = t * 2  # on the side stream, after the broadcast
            done, idle = w.is_completed(), side.query()
            stamps.append(time.monotonic())
        finally:
            torch.accelerator.set_stream(prev)
        w.synchronize()
        stamps.append(time.monotonic())
        print(f"# work_semantics rank {rank}: enqueue {BUSY_MM if rank == 1 else 0} matmuls of {BUSY_N}: "
              f"{stamps[1] - stamps[0]:.2f} s, event record + coll wait {stamps[2] - stamps[1]:.2f} s, "
              f"broadcast(async_op=True) {stamps[3] - stamps[2]:.2f} s (then completed: {not pending}), "
              f"wait() + t * 2 {stamps[4] - stamps[3]:.3f} s (then completed: {done}, side stream idle: {idle}), "
              f"synchronize() {stamps[5] - stamps[4]:.2f} s", flush=True)
        counts["work_semantics"] = counts.get("work_semantics", 0) + (2 if rank == 1 else 1)
        if rank == 1 and not pending:
            res.setdefault("work_semantics", []).append(
                f"rank 1: the Work was completed when broadcast(async_op=True) returned "
                f"({stamps[3] - stamps[2]:.2f} s): the call waited for its card")
        if not w.is_completed():
            res.setdefault("work_semantics", []).append(f"rank {rank}: not completed after synchronize()")
        side.synchronize()
        check("work_semantics", doubled, want * 2)
        if rank == 1:
            check("work_semantics", busy[:2, :2], torch.full((2, 2), 1.0 / BUSY_N))
        fut = dist.all_reduce(t, async_op=True).get_future()
        check("work_semantics", fut.value()[0], want * n)

    def careless():
        other = torch.device("spyre", (rank + 1) % n)
        mine = torch.ones(8, device=dev)
        expect("careless", lambda: dist.all_gather([torch.empty(8, device=dev), torch.empty(8)], mine),
               ValueError, f"a tensor on cpu, not on this rank's card spyre:{rank}")
        expect("careless", lambda: dist.all_reduce(torch.ones(8, device=other)),
               ValueError, f"a tensor on {other}, not on this rank's card spyre:{rank}")
        expect("careless", lambda: dist.all_reduce(mine, op=dist.ReduceOp.BAND), ValueError,
               "spyreccl all_reduce: ReduceOp.BAND is not supported (SUM, AVG, MAX, MIN, PRODUCT)")
        expect("careless", lambda: dist.all_reduce(torch.ones(8, dtype=torch.int32, device=dev)), RuntimeError,
               "spyreccl: dtype Int is not float32, float16 or bfloat16")
        expect("careless", lambda: dist.all_to_all_single(torch.empty(3 * n, device=dev), torch.ones(3 * n + 1, device=dev)),
               ValueError, "does not split into")
        t = torch.ones(8, device=dev)
        dist.all_reduce(t)  # the refusals above broke nothing
        check("careless", t, torch.full((8,), float(n)))
        # Mismatched shapes (different numbers of sticks): every rank gets an error, none hangs,
        # and the communicator stays broken.
        bad = torch.ones(256 * (rank + 1), device=dev)
        expect("careless", lambda: dist.all_reduce(bad), RuntimeError, "spyreccl all_reduce")
        expect("careless", lambda: dist.all_reduce(t), RuntimeError, "failed earlier")

    def queue_cpu():
        # Rank 0 queues an isend, then a CPU all_reduce; rank 1 receives at once (dist.recv), then
        # the same all_reduce: without the queue run before gloo's call, each waits for the other.
        t = val(0, (1000,), torch.float32, 180).to(dev) if rank == 0 else torch.zeros(1000, device=dev)
        c = val(rank, (9,), torch.float32, 181)
        if rank == 0:
            w = dist.isend(t, 1)
            dist.all_reduce(c)
            w.wait()
        else:
            dist.recv(t, 0)
            dist.all_reduce(c)
            check("queue_cpu", t, val(0, (1000,), torch.float32, 180))
        check("queue_cpu", c, sum(val(k, (9,), torch.float32, 181) for k in range(n)))

    def queue_stream():
        # A call queued under stream s runs on s, though the queue runs later under another current
        # stream; one queued under the default stream after it runs the queue first (one group, one
        # stream). libspyre's copies tell which stream moved which bytes: each call moves its bytes
        # once on this rank's side (into the peer's inbox or out of it, a box piece each).
        peer = 1 - rank
        s = torch.Stream(device=dev)
        a = val(rank, (2048,), torch.float32, 190).to(dev)
        b = val(rank, (1024,), torch.float32, 191).to(dev)
        ra, rb = torch.zeros(2048, device=dev), torch.zeros(1024, device=dev)
        prev = torch.accelerator.current_stream(rank)
        torch.spyre.synchronize()
        for st in (s, prev):
            torch.spyre.reset_stream_stats(st)
        torch.accelerator.set_stream(s)
        try:
            works = [dist.isend(a, peer) if rank == 0 else dist.irecv(ra, peer)]
        finally:
            torch.accelerator.set_stream(prev)
        works.append(dist.isend(b, peer) if rank == 0 else dist.irecv(rb, peer))
        for w in works:
            w.wait()
        torch.spyre.synchronize()
        moved = [torch.spyre.stream_stats(st)["d2d_bytes"] for st in (s, prev)]
        check("queue_stream", torch.tensor(moved), torch.tensor([2048 * 4, 1024 * 4]))
        if rank == 1:
            check("queue_stream", ra, val(0, (2048,), torch.float32, 190))
            check("queue_stream", rb, val(0, (1024,), torch.float32, 191))

    for name, fn in (("all_reduce", all_reduce), ("all_gather", all_gather),
                     ("reduce_scatter", reduce_scatter), ("broadcast", broadcast),
                     ("send_recv", send_recv), ("ring_exchange", lambda: ring(dist, rank, n, dev, check)),
                     ("barrier_and_cpu", barrier_and_cpu), ("errors", errors),
                     ("reduce_ops", reduce_ops), ("reduce_root", reduce_root), ("gather_scatter", gather_scatter),
                     ("all_to_all", all_to_all), ("any_dtype", any_dtype), ("work_semantics", work_semantics),
                     ("queue_cpu", queue_cpu), ("queue_stream", queue_stream), ("careless", careless)):
        run(name, fn)
    dist.destroy_process_group()

    def destroy_reuse():
        t = torch.ones(8, device=dev)
        expect("destroy_reuse", lambda: dist.all_reduce(t), ValueError, "Default process group has not been initialized")
        dist.init_process_group("cpu:gloo,spyre:spyreccl", init_method=f"file://{store_file}.2", rank=rank,
                                world_size=n, timeout=GROUP_TIMEOUT)
        t = val(rank, (99,), torch.float32, 130).to(dev)
        dist.all_reduce(t)
        check("destroy_reuse", t, sum(val(k, (99,), torch.float32, 130) for k in range(n)))
        dist.destroy_process_group()

    def destroy_runs_queue():
        # An isend and its irecv never waited for: destroy_process_group() runs them, no warning.
        import warnings
        dist.init_process_group("cpu:gloo,spyre:spyreccl", init_method=f"file://{store_file}.3", rank=rank,
                                world_size=n, timeout=GROUP_TIMEOUT)
        t = val(0, (500,), torch.float32, 200).to(dev) if rank == 0 else torch.zeros(500, device=dev)
        if rank == 0:
            dist.isend(t, 1)
        else:
            dist.irecv(t, 0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dist.destroy_process_group()
        torch.spyre.synchronize()
        if rank == 1:
            check("destroy_runs_queue", t, val(0, (500,), torch.float32, 200))
        lost = [str(x.message) for x in caught if "spyreccl" in str(x.message)]
        check("destroy_runs_queue", torch.tensor(len(lost)), torch.tensor(0))
        if lost:
            res.setdefault("destroy_runs_queue", []).append(f"rank {rank}: {lost}")

    run("destroy_reuse", destroy_reuse)
    run("destroy_runs_queue", destroy_runs_queue)
    print("RESULTS " + json.dumps({"failures": res, "checks": counts}), flush=True)


def exit_worker(rank, n, store_file):
    """Rank 1 exits after the group is up; rank 0's next collective raises instead of hanging."""
    import time
    import torch.distributed as dist

    res = {"early_exit": []}
    torch.spyre.set_device(rank)
    dist.init_process_group("cpu:gloo,spyre:spyreccl", init_method=f"file://{store_file}", rank=rank,
                            world_size=n, timeout=GROUP_TIMEOUT)
    dev = torch.device("spyre", rank)
    t = torch.ones(1000, device=dev)
    dist.all_reduce(t)
    dist.barrier()
    if rank != 0:
        os._exit(3)
    t0 = time.monotonic()
    try:
        dist.all_reduce(t)
        torch.spyre.synchronize()
        res["early_exit"].append("rank 0: no error from an all_reduce with rank 1 gone")
    except RuntimeError as e:
        print(f"# rank 0: {time.monotonic() - t0:.1f} s to: {e}".splitlines()[0], flush=True)
        for text in ("spyreccl all_reduce", "rank 1 (pid ", "closed its connection: it exited or was killed"):
            if text not in str(e):
                res["early_exit"].append(f"rank 0: {e!r} lacks {text!r}")
    try:
        dist.destroy_process_group()
    except Exception as e:  # reported
        res["early_exit"].append(f"rank 0: destroy_process_group: {type(e).__name__}: {e}")
    print("RESULTS " + json.dumps({"failures": res, "checks": {"early_exit": 1}}), flush=True)


_results = None
_counts = {}
# Comparisons with the CPU (and checked errors) both ranks make together, per case.
EXPECTED_CHECKS = {"init": 0, "all_reduce": 20, "all_gather": 6, "reduce_scatter": 4, "broadcast": 4,
                   "send_recv": 2, "barrier_and_cpu": 2, "errors": 2, "reduce_ops": 40, "reduce_root": 8,
                   "gather_scatter": 8, "all_to_all": 8, "any_dtype": 14, "work_semantics": 8, "careless": 16,
                   "destroy_reuse": 4, "early_exit": 1, "ring_exchange": 14, "ring_exchange_3": 21,
                   "barrier_uneven_3": 8, "queue_cpu": 3, "queue_stream": 4, "destroy_runs_queue": 3}


def _pair(mode, may_exit=None, n=N):
    """@n (two) workers of @mode (rank @may_exit may end early with status 3); their reports merged."""
    store = tempfile.mktemp(prefix="spyreccl-store-")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", SPYRE_COMM_TIMEOUT_MS="120000")
    procs = [subprocess.Popen([sys.executable, __file__, mode, str(r), str(n), store], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(n)]
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=1500)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        for line in out.splitlines():
            if line.startswith("# "):
                print(line, flush=True)
        lines = [x for x in out.splitlines() if x.startswith("RESULTS ")]
        if r == may_exit and p.returncode == 3 and not lines:
            continue
        if p.returncode or not lines:
            _results.setdefault("workers", []).append(f"{mode} rank {r} exited {p.returncode}: {out[-2000:]}")
            continue
        rep = json.loads(lines[-1][8:])
        for k, v in rep["failures"].items():
            _results.setdefault(k, []).extend(v)
        for k, v in rep["checks"].items():
            _counts[k] = _counts.get(k, 0) + v
    for f in (store, store + ".2", store + ".3"):
        if os.path.exists(f):
            os.unlink(f)


def results():
    """Both workers' reports, merged: {case: [failures]} (run once)."""
    global _results
    if _results is None:
        _results = {}
        _pair("--worker")
        _pair("--exit-worker", may_exit=1)
        if torch.spyre.device_count() >= 3:
            _pair("--ring-worker", n=3)
    return _results


def _case(name):
    def fn(c):
        if name.endswith("_3") and torch.spyre.device_count() < 3:
            raise tap.Skip(f"3 ranks need 3 cards, this machine has {torch.spyre.device_count()} "
                           "(tools/vm/run --devices 3)")
        r = results()
        c.ok(not r.get("workers"), f"workers: {r.get('workers')}")
        c.ok(name in r, f"{name}: not reported")
        c.ok(_counts.get(name, 0) == EXPECTED_CHECKS[name],
             f"{name}: {_counts.get(name, 0)} comparisons with the CPU, want {EXPECTED_CHECKS[name]}")
        for failure in r.get(name, []):
            c.ok(False, f"{name}: {failure}")
    fn.__name__ = "dist_" + name
    return case(fn)


for _n in EXPECTED_CHECKS:
    _case(_n)

if __name__ == "__main__":
    if sys.argv[1:2] in (["--worker"], ["--exit-worker"], ["--ring-worker"]):
        {"--worker": worker, "--exit-worker": exit_worker,
         "--ring-worker": ring_worker}[sys.argv[1]](int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        sys.exit(0)
    sys.exit(tap.run())
