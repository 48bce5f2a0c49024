# SPDX-License-Identifier: MIT
"""The c10d backend "spyreccl": torch.distributed on spyre tensors over libspyre's communicators of
one card per process (spyre_comm_init_rank(3)), as torch-spyre names its backend, but asynchronous.

    torch.spyre.set_device(local_rank)              # the card of this process, before the group
    dist.init_process_group("cpu:gloo,spyre:spyreccl", rank=rank, world_size=n, ...)
    dist.all_reduce(t)                              # t on spyre: the card's ring; on the CPU: gloo

torch 2.13 cannot subclass c10d::Backend in Python, and a Python ProcessGroup (which it can) replaces
the whole group: this one therefore carries its own gloo backend for CPU tensors, on the same store.
Rank 0 makes the communicator's id and hands it to the others through the store.

Every collective is enqueued on the current stream of the tensor's card and returns a Work as NCCL's:
wait() makes the caller's current stream wait for the event recorded after the collective (the host
does not wait), synchronize() waits on the host, is_completed() queries the event, get_future() is a
Future completed (on the host) when the event is reached. libspyre's calls do wait on the host for the
other ranks' messages, not for this card's work (spyre_comm_all_reduce(3)).

Ops: all_reduce, reduce (to a root), reduce_scatter (list and _tensor), all_gather (list and
_into_tensor), broadcast, gather, scatter, all_to_all and all_to_all_single (equal or given splits),
send, recv, barrier. Data movement takes any dtype (bytes move); reductions float32, float16 and
bfloat16 with ReduceOp SUM (libspyre's ring), AVG (the sum scaled on the card), MAX, MIN and PRODUCT
(every rank's tensor gathered, then the kernel library's maximum/minimum/mul on the card); any other
op is a ValueError naming it.

send and recv (isend, irecv, and batch_isend_irecv, which torch 2.13 runs as isend/irecv one after the
other for a Python ProcessGroup: it coalesces only for a C++ one) are queued, not run: the queue runs
as one libspyre group (spyre_comm_group_start(3)) when a Work of it is waited for (wait, synchronize,
is_completed, get_future) or before the group's next call, CPU (gloo) calls and barrier included. In
one group no order of the ranks' sends and receives deadlocks (a ring exchange: every rank sends to
the next, receives from the previous); between two ranks they are matched in call order. dist.send
and dist.recv wait at once. A queued call runs on the stream that was current when it was made: one
made under another current stream than the queued ones' runs the queue first (a libspyre group is
of one stream). is_completed() of a queued call runs the queue (as NCCL's would have started it),
which waits on the host for the peers' matching calls, never for the card; wait(timeout) does not
use its timeout: that wait is bounded by SPYRE_COMM_TIMEOUT_MS. A call of the queue that fails breaks
the group (libspyre ran the calls before it): the error names the call, every later call raises.
destroy_process_group() runs calls never waited for before it destroys the communicator, and warns
with their number when they could not run.
"""
import datetime
import warnings

import torch
import torch.distributed as dist

_ops = torch.ops.spyre
NAME = "spyreccl"


class _Work(dist._Work):
    """Completed when the card's stream passes the event recorded after the collective."""

    def __init__(self, result, event=None):
        super().__init__()
        self._result = result
        self._event = event

    def wait(self, timeout=None):
        """The current stream of the event's card waits for the collective; the host does not (so
        @timeout is not used)."""
        if self._event is not None:
            torch.accelerator.current_stream(self._event.device.index).wait_event(self._event)
        return True

    def synchronize(self):
        """The host waits for the collective."""
        if self._event is not None:
            self._event.synchronize()

    def is_completed(self):
        return self._event is None or self._event.query()

    def is_success(self):
        return self.is_completed()

    def result(self):
        return self._result

    def get_future(self):
        """A Future whose value is the result, set once the card has passed the collective."""
        self.synchronize()
        fut = torch.futures.Future()
        fut.set_result(self._result)
        return fut


class _Queued(_Work):
    """A Work of a queued send or recv: waiting on it first runs the queue (SpyreCCL._flush)."""

    def __init__(self, pg, result, batch):
        super().__init__(result)
        self._pg = pg
        self._batch = batch

    def _ran(self):
        if self._batch["event"] is None and "error" not in self._batch:
            self._pg._flush()
        if "error" in self._batch:
            raise RuntimeError(f"{NAME} send/recv: the group of this call failed: {self._batch['error']}")
        self._event = self._batch["event"]

    def wait(self, timeout=None):
        self._ran()
        return super().wait(timeout)

    def synchronize(self):
        self._ran()
        super().synchronize()

    def is_completed(self):
        """Runs the queue (the module's doc: waits for the peers' calls, not for the card)."""
        self._ran()
        return super().is_completed()


def _stream_key(s):
    return (s.device_index, s.stream_id)


def _done(result, t):
    ev = torch.Event(t.device)
    ev.record(torch.accelerator.current_stream(t.device.index))
    return _Work(result, ev)


def _on_cpu(tensors):
    return all(t.device.type == "cpu" for t in tensors)


def _gloo_call(gloo, name, old):
    return getattr(gloo, name, None) or getattr(gloo, old)


R = dist.ReduceOp
# Reductions of gathered tensors by the kernel library's elementwise ops on the card.
_ELEMENTWISE = {R.MAX: torch.maximum, R.MIN: torch.minimum, R.PRODUCT: torch.mul}


def _check_op(op, what):
    """The RedOpType of @op (a ReduceOp of the options), or a ValueError naming it."""
    op = getattr(op, "op", op)
    if op not in (R.SUM, R.AVG) and op not in _ELEMENTWISE:
        name = str(op).replace("RedOpType.", "ReduceOp.")
        raise ValueError(f"{NAME} {what}: {name} is not supported (SUM, AVG, MAX, MIN, PRODUCT)")
    return op


class SpyreCCL(dist.ProcessGroup):
    """One card per process: rank r uses the current spyre device of its process at creation."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("gloo", store), rank, size, timeout)
        self._device = torch.spyre.current_device()
        if rank == 0:
            ident = _ops.comm_unique_id()
            store.set(f"{NAME}/id", bytes(ident.tolist()))
        else:
            store.wait([f"{NAME}/id"], timeout)
            ident = torch.tensor(list(store.get(f"{NAME}/id")), dtype=torch.uint8, device="cpu")
        self._h = _ops.comm_init(ident, size, rank, self._device)
        # Queued send and recv calls: (kind, tensor it moves, tensor to fill, peer, stream current then).
        self._queue = []
        self._batch = {"event": None}  # what their Works wait for, set when the queue ran
        self._broken = None  # why a queued call failed: the group takes no more calls

    def getBackendName(self):
        return NAME

    def _comm(self, what):
        if not self._h:
            raise RuntimeError(f"{NAME} {what}: the process group was destroyed")
        self._drain()
        if self._broken:
            raise RuntimeError(f"{NAME} {what}: the group is broken: {self._broken}")
        return self._h

    def _drain(self):
        """Run the queued send and recv calls, if any: before every other call of the group."""
        if self._queue:
            self._flush()

    def _cpu(self, tensors):
        """Whether @tensors are on the CPU (gloo's), the queue run first: gloo's call may wait for a
        peer that waits for a queued call of this rank."""
        self._drain()
        return _on_cpu(tensors)

    def _spyre(self, tensors, what):
        """@tensors (any nesting of lists), checked to be on this process's card."""
        for t in tensors:
            if isinstance(t, (list, tuple)):
                self._spyre(t, what)
            elif t.device.type != "spyre" or t.device.index != self._device:
                raise ValueError(f"{NAME} {what}: a tensor on {t.device}, not on this rank's card "
                                 f"spyre:{self._device}")
        return tensors

    # ---- reductions ----

    def _reduce_into(self, t, op, what):
        """@t (contiguous, on the card) = op over the ranks of their @t."""
        h = self._comm(what)
        if op in (R.SUM, R.AVG):
            _ops.comm_all_reduce(h, t)
            if op == R.AVG:
                t.div_(self.size())
            return
        flat = torch.empty((self.size(), *t.shape), dtype=t.dtype, device=t.device)
        _ops.comm_all_gather(h, flat, t)
        acc = flat[0]
        for r in range(1, self.size()):
            acc = _ELEMENTWISE[op](acc, flat[r])
        t.copy_(acc)

    def _reduce(self, t, op, what):
        """Reduce @t in place (staged through a contiguous copy when it is not contiguous)."""
        if t.is_contiguous():
            self._reduce_into(t, op, what)
        else:
            tmp = t.contiguous()
            self._reduce_into(tmp, op, what)
            t.copy_(tmp)

    def allreduce(self, tensors, opts=None):
        opts = opts or dist.AllreduceOptions()
        if self._cpu(tensors):
            return self._gloo.allreduce(tensors, opts)
        op = _check_op(opts.reduceOp, "all_reduce")
        for t in self._spyre(tensors, "all_reduce"):
            self._reduce(t, op, "all_reduce")
        return _done(tensors, tensors[0])

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts or dist.AllreduceCoalescedOptions()
        if self._cpu(tensors):
            return self._gloo.allreduce_coalesced(tensors, opts)
        op = _check_op(opts.reduceOp, "all_reduce_coalesced")
        for t in self._spyre(tensors, "all_reduce_coalesced"):
            self._reduce(t, op, "all_reduce_coalesced")
        return _done(tensors, tensors[0])

    def reduce(self, tensors, opts=None):
        """The root's tensor = op over the ranks; the others' tensors are left as they were."""
        opts = opts or dist.ReduceOptions()
        if self._cpu(tensors):
            return self._gloo.reduce(tensors, opts)
        op = _check_op(opts.reduceOp, "reduce")
        for t in self._spyre(tensors, "reduce"):
            if self.rank() == opts.rootRank:
                self._reduce(t, op, "reduce")
            else:
                self._reduce_into(t.contiguous().clone(), op, "reduce")
        return _done(tensors, tensors[0])

    def reduce_scatter_single(self, output, inp, opts=None):
        """reduce_scatter_tensor (torch calls it on the group object, not through c10d)."""
        opts = opts or dist.ReduceScatterOptions()
        if self._cpu([output, inp]):
            return _gloo_call(self._gloo, "reduce_scatter_single", "_reduce_scatter_base")(output, inp, opts)
        op = _check_op(opts.reduceOp, "reduce_scatter")
        self._spyre([output, inp], "reduce_scatter")
        if op == R.SUM and output.is_contiguous() and inp.is_contiguous():
            _ops.comm_reduce_scatter(self._comm("reduce_scatter"), output, inp)
        else:
            if inp.numel() != output.numel() * self.size():
                raise ValueError(f"{NAME} reduce_scatter: the input has {inp.numel()} elements, not "
                                 f"{self.size()} x the output's {output.numel()}")
            full = inp.contiguous().clone()
            self._reduce_into(full, op, "reduce_scatter")
            output.copy_(full.view(self.size(), -1)[self.rank()].view(output.shape))
        return _done([output], output)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter(self, outputs, input_lists, opts=None):
        opts = opts or dist.ReduceScatterOptions()
        if self._cpu(outputs):
            return self._gloo.reduce_scatter(outputs, input_lists, opts)
        _check_op(opts.reduceOp, "reduce_scatter")
        self._spyre([outputs, input_lists], "reduce_scatter")
        for out, ins in zip(outputs, input_lists):
            flat = torch.empty((self.size(), *out.shape), dtype=out.dtype, device=out.device)
            for r, i in enumerate(ins):
                flat[r].copy_(i)
            res = out if out.is_contiguous() else torch.empty_like(out, memory_format=torch.contiguous_format)
            self.reduce_scatter_single(res, flat, opts)
            if res is not out:
                out.copy_(res)
        return _done(outputs, outputs[0])

    # ---- data movement (any dtype) ----

    def all_gather_single(self, output, inp, opts=None):
        """all_gather_into_tensor (torch calls it on the group object, not through c10d)."""
        if self._cpu([output, inp]):
            return _gloo_call(self._gloo, "all_gather_single", "_allgather_base")(
                output, inp, opts or dist.AllgatherOptions())
        self._spyre([output, inp], "all_gather")
        _ops.comm_all_gather(self._comm("all_gather"), output, inp.contiguous())
        return _done([output], output)

    _allgather_base = all_gather_single

    def allgather(self, output_lists, inputs, opts=None):
        if self._cpu(inputs):
            return self._gloo.allgather(output_lists, inputs, opts or dist.AllgatherOptions())
        self._spyre([output_lists, inputs], "all_gather")
        for outs, inp in zip(output_lists, inputs):
            flat = torch.empty((self.size(), *inp.shape), dtype=inp.dtype, device=inp.device)
            _ops.comm_all_gather(self._comm("all_gather"), flat, inp.contiguous())
            for r, o in enumerate(outs):
                o.copy_(flat[r])
        return _done(output_lists, inputs[0])

    def broadcast(self, tensors, opts=None):
        opts = opts or dist.BroadcastOptions()
        if self._cpu(tensors):
            return self._gloo.broadcast(tensors, opts)
        for t in self._spyre(tensors, "broadcast"):
            buf = t if t.is_contiguous() else t.contiguous()
            _ops.comm_broadcast(self._comm("broadcast"), buf, opts.rootRank)
            if buf is not t:
                t.copy_(buf)
        return _done(tensors, tensors[0])

    def _send(self, t, peer, what):
        _ops.comm_send(self._comm(what), t.contiguous(), peer)

    def _recv(self, t, peer, what):
        buf = t if t.is_contiguous() else torch.empty_like(t, memory_format=torch.contiguous_format)
        _ops.comm_recv(self._comm(what), buf, peer)
        if buf is not t:
            t.copy_(buf)

    def _flush(self):
        """Run the queued sends and receives as one libspyre group on the stream current when they
        were queued; their Works' event after it. A failure breaks the group (self._broken)."""
        queue, batch = self._queue, self._batch
        self._queue, self._batch = [], {"event": None}
        if not queue:
            return
        if not self._h:
            batch["error"] = "the process group was destroyed"
        elif self._broken:
            batch["error"] = f"the group is broken: {self._broken}"
        if "error" in batch:
            raise RuntimeError(f"{NAME} send/recv: {batch['error']}")
        prev = torch.accelerator.current_stream(self._device)
        torch.accelerator.set_stream(queue[0][4])
        try:
            self._run_group(queue, batch)
            for kind, buf, t, *_ in queue:
                if buf is not t:
                    t.copy_(buf)
            batch["event"] = torch.Event(torch.device("spyre", self._device))
            batch["event"].record(queue[0][4])
        finally:
            torch.accelerator.set_stream(prev)

    def _run_group(self, queue, batch):
        """@queue as one libspyre group on the current stream, or a RuntimeError naming the call that
        failed, the group then broken: libspyre has no way to drop the calls queued before it."""
        why = None
        _ops.comm_group_start()
        try:
            for i, (kind, buf, _, peer, _) in enumerate(queue):
                try:
                    (_ops.comm_send if kind == "send" else _ops.comm_recv)(self._h, buf, peer)
                except Exception as e:
                    why = (f"call {i + 1} of {len(queue)} ({kind} of {buf.numel()} {buf.dtype} "
                           f"{'to' if kind == 'send' else 'from'} rank {peer}): {e}")
                    break
        finally:
            try:
                _ops.comm_group_end()
            except Exception as e:
                why = why or f"the group of {len(queue)} calls: {e}"
        if why:
            self._broken = batch["error"] = f"queued send/recv {why}"
            raise RuntimeError(f"{NAME} send/recv: {why} (the group is broken: its later calls raise)")

    def _enqueue(self, kind, tensors, peer):
        if not 0 <= peer < self.size() or peer == self.rank():
            raise ValueError(f"{NAME} {kind}: peer {peer} is not another rank of the {self.size()}")
        self._spyre(tensors, kind)
        if not self._h:
            raise RuntimeError(f"{NAME} {kind}: the process group was destroyed")
        if self._broken:
            raise RuntimeError(f"{NAME} {kind}: the group is broken: {self._broken}")
        stream = torch.accelerator.current_stream(self._device)
        if self._queue and _stream_key(self._queue[0][4]) != _stream_key(stream):
            self._flush()  # one libspyre group, one stream
        for t in tensors:
            if kind == "send" or t.is_contiguous():
                buf = t.contiguous()
            else:
                buf = torch.empty_like(t, memory_format=torch.contiguous_format)
            self._queue.append((kind, buf, t, peer, stream))
        return _Queued(self, tensors, self._batch)

    def send(self, tensors, dst, tag=0):
        """Queued (the module's doc): runs when its Work is waited for or before the next call."""
        if _on_cpu(tensors):
            self._drain()
            return self._gloo.send(tensors, dst, tag)
        return self._enqueue("send", tensors, dst)

    def recv(self, tensors, src, tag=0):
        """Queued as send is."""
        if _on_cpu(tensors):
            self._drain()
            return self._gloo.recv(tensors, src, tag)
        return self._enqueue("recv", tensors, src)

    def gather(self, output_lists, inputs, opts=None):
        """The root receives every rank's input in rank order; the others send theirs."""
        opts = opts or dist.GatherOptions()
        if self._cpu(inputs):
            return self._gloo.gather(output_lists, inputs, opts)
        self._spyre([output_lists, inputs], "gather")
        root, inp = opts.rootRank, inputs[0]
        if self.rank() != root:
            self._send(inp, root, "gather")
            return _done(inputs, inp)
        outs = output_lists[0]
        if len(outs) != self.size():
            raise ValueError(f"{NAME} gather: {len(outs)} output tensors on the root, not {self.size()}")
        for r, o in enumerate(outs):
            if r == root:
                o.copy_(inp)
            else:
                self._recv(o, r, "gather")
        return _done(output_lists, inp)

    def scatter(self, outputs, input_lists, opts=None):
        """The root sends chunk r to rank r in rank order; the others receive theirs."""
        opts = opts or dist.ScatterOptions()
        if self._cpu(outputs):
            return self._gloo.scatter(outputs, input_lists, opts)
        self._spyre([outputs, input_lists], "scatter")
        root, out = opts.rootRank, outputs[0]
        if self.rank() != root:
            self._recv(out, root, "scatter")
            return _done(outputs, out)
        ins = input_lists[0]
        if len(ins) != self.size():
            raise ValueError(f"{NAME} scatter: {len(ins)} input tensors on the root, not {self.size()}")
        for r, i in enumerate(ins):
            if r == root:
                out.copy_(i)
            else:
                self._send(i, r, "scatter")
        return _done(outputs, out)

    def _exchange(self, outs, ins, what):
        """outs[j] = rank j's ins[this rank]: pairs (i < j) in one global order, the lower rank
        sending first, so that every rank meets its peers in the same order (no cycle of waits)."""
        me, n = self.rank(), self.size()
        outs[me].copy_(ins[me])
        for i in range(n):
            for j in range(i + 1, n):
                if me not in (i, j):
                    continue
                peer = j if me == i else i
                steps = ((self._send, ins[peer]), (self._recv, outs[peer]))
                for fn, t in (steps if me == i else steps[::-1]):
                    if t.numel():
                        fn(t, peer, what)

    def alltoall_base(self, output, inp, output_split_sizes, input_split_sizes, opts=None):
        """all_to_all_single: dim 0 of @inp split by @input_split_sizes (equal when empty)."""
        if self._cpu([output, inp]):
            return _gloo_call(self._gloo, "all_to_all_single", "alltoall_base")(output, inp, output_split_sizes, input_split_sizes,
                                            opts or dist.AllToAllOptions())
        self._spyre([output, inp], "all_to_all_single")
        n = self.size()

        def split(t, sizes, which):
            if not sizes:
                if t.shape[0] % n:
                    raise ValueError(f"{NAME} all_to_all_single: dim 0 of the {which} ({t.shape[0]}) "
                                     f"does not split into {n} equal parts")
                sizes = [t.shape[0] // n] * n
            if len(sizes) != n or sum(sizes) != t.shape[0]:
                raise ValueError(f"{NAME} all_to_all_single: {which} splits {list(sizes)} do not "
                                 f"cover dim 0 ({t.shape[0]}) in {n} parts")
            return list(torch.split(t, list(sizes)))

        res = output if output.is_contiguous() else torch.empty_like(output,
                                                                    memory_format=torch.contiguous_format)
        self._exchange(split(res, output_split_sizes, "output"),
                       split(inp.contiguous(), input_split_sizes, "input"), "all_to_all_single")
        if res is not output:
            output.copy_(res)
        return _done([output], output)

    all_to_all_single = alltoall_base

    def alltoall(self, outputs, inputs, opts=None):
        if self._cpu(inputs):
            return self._gloo.alltoall(outputs, inputs, opts or dist.AllToAllOptions())
        self._spyre([outputs, inputs], "all_to_all")
        if len(outputs) != self.size() or len(inputs) != self.size():
            raise ValueError(f"{NAME} all_to_all: {len(inputs)} inputs and {len(outputs)} outputs, "
                             f"not {self.size()} of each")
        self._exchange(outputs, inputs, "all_to_all")
        return _done(outputs, outputs[0])

    def barrier(self, opts=None):
        _ops.comm_barrier(self._comm("barrier"))
        return _Work(None)

    def shutdown(self):
        """Run the calls never waited for, then destroy the communicator; a warning, not an exception,
        when they could not run (their peers' matching calls then fail or time out)."""
        lost = len(self._queue)
        if lost:
            try:
                self._flush()
            except Exception as e:
                warnings.warn(f"{NAME}: destroying the process group: {lost} queued send/recv calls "
                              f"never waited for are lost: {e}", RuntimeWarning, stacklevel=2)
        self._queue = []
        if self._h:
            _ops.comm_destroy(self._h)
            self._h = 0

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass


def _create(store, rank, size, timeout):
    return SpyreCCL(store, rank, size, timeout if timeout is not None else datetime.timedelta(minutes=30))


def register():
    """Register "spyreccl" for the device "spyre" (done when spyre_torch is imported)."""
    if dist.is_available() and NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(NAME, _create, devices=["spyre"])
