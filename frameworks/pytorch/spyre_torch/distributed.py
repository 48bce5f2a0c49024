# SPDX-License-Identifier: MIT
"""The c10d backend "spyreccl": torch.distributed on spyre tensors over libspyre's communicators of
one card per process (spyre_comm_init_rank(3)), as torch-spyre names its backend, but asynchronous.

    torch.spyre.set_device(local_rank)              # the card of this process, before the group
    dist.init_process_group("cpu:gloo,spyre:spyreccl", rank=rank, world_size=n, ...)
    dist.all_reduce(t)                              # t on spyre: the card's ring; on the CPU: gloo

torch 2.13 cannot subclass c10d::Backend in Python, and a Python ProcessGroup (which it can) replaces
the whole group: this one therefore carries its own gloo backend for CPU tensors, on the same store.
Rank 0 makes the communicator's id and hands it to the others through the store. Every collective is
enqueued on the current stream of the tensor's card and returns a Work completed by an event recorded
after it: wait() waits for that event (the host), is_completed() queries it. Sums only (ReduceOp.SUM),
float32, float16 and bfloat16; all_reduce, all_gather (list and _into_tensor), reduce_scatter (list
and _tensor), broadcast, send, recv, barrier.
"""
import datetime

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
        if self._event is not None:
            self._event.synchronize()
        return True

    def is_completed(self):
        return self._event is None or self._event.query()

    def is_success(self):
        return self.is_completed()

    def result(self):
        return self._result

    def get_future(self):
        self.wait()
        fut = torch.futures.Future()
        fut.set_result(self._result)
        return fut


def _done(result, t):
    ev = torch.Event(t.device)
    ev.record(torch.accelerator.current_stream(t.device.index))
    return _Work(result, ev)


def _on_cpu(tensors):
    return all(t.device.type == "cpu" for t in tensors)


def _gloo_call(gloo, name, old):
    return getattr(gloo, name, None) or getattr(gloo, old)


def _check_sum(opts):
    if opts.reduceOp != dist.ReduceOp.SUM:
        raise ValueError(f"{NAME}: only ReduceOp.SUM, not {opts.reduceOp}")


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
            ident = torch.tensor(list(store.get(f"{NAME}/id")), dtype=torch.uint8)
        self._h = _ops.comm_init(ident, size, rank, self._device)

    def getBackendName(self):
        return NAME

    def _spyre(self, tensors, what):
        for t in tensors:
            if t.device.type != "spyre":
                raise ValueError(f"{NAME} {what}: a tensor on {t.device} among spyre tensors")
        return tensors

    def allreduce(self, tensors, opts=None):
        if _on_cpu(tensors):
            return self._gloo.allreduce(tensors, opts or dist.AllreduceOptions())
        _check_sum(opts)
        for t in self._spyre(tensors, "all_reduce"):
            _ops.comm_all_reduce(self._h, t)
        return _done(tensors, tensors[0])

    def all_gather_single(self, output, inp, opts=None):
        """all_gather_into_tensor (torch calls it on the group object, not through c10d)."""
        if _on_cpu([output, inp]):
            return _gloo_call(self._gloo, "all_gather_single", "_allgather_base")(
                output, inp, opts or dist.AllgatherOptions())
        _ops.comm_all_gather(self._h, output, inp)
        return _done([output], output)

    _allgather_base = all_gather_single

    def allgather(self, output_lists, inputs, opts=None):
        if _on_cpu(inputs):
            return self._gloo.allgather(output_lists, inputs, opts or dist.AllgatherOptions())
        for outs, inp in zip(output_lists, self._spyre(inputs, "all_gather")):
            flat = torch.empty((self.size(), *inp.shape), dtype=inp.dtype, device=inp.device)
            _ops.comm_all_gather(self._h, flat, inp.contiguous())
            for r, o in enumerate(outs):
                o.copy_(flat[r])
        return _done(output_lists, inputs[0])

    def reduce_scatter_single(self, output, inp, opts=None):
        """reduce_scatter_tensor (torch calls it on the group object, not through c10d)."""
        if _on_cpu([output, inp]):
            return _gloo_call(self._gloo, "reduce_scatter_single", "_reduce_scatter_base")(
                output, inp, opts or dist.ReduceScatterOptions())
        _check_sum(opts)
        _ops.comm_reduce_scatter(self._h, output, inp)
        return _done([output], output)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter(self, outputs, input_lists, opts=None):
        if _on_cpu(outputs):
            return self._gloo.reduce_scatter(outputs, input_lists, opts or dist.ReduceScatterOptions())
        _check_sum(opts)
        for out, ins in zip(self._spyre(outputs, "reduce_scatter"), input_lists):
            flat = torch.empty((self.size(), *out.shape), dtype=out.dtype, device=out.device)
            for r, i in enumerate(ins):
                flat[r].copy_(i)
            res = out if out.is_contiguous() else torch.empty_like(out, memory_format=torch.contiguous_format)
            _ops.comm_reduce_scatter(self._h, res, flat)
            if res is not out:
                out.copy_(res)
        return _done(outputs, outputs[0])

    def broadcast(self, tensors, opts=None):
        if _on_cpu(tensors):
            return self._gloo.broadcast(tensors, opts or dist.BroadcastOptions())
        for t in self._spyre(tensors, "broadcast"):
            _ops.comm_broadcast(self._h, t, opts.rootRank)
        return _done(tensors, tensors[0])

    def send(self, tensors, dst, tag=0):
        if _on_cpu(tensors):
            return self._gloo.send(tensors, dst, tag)
        for t in self._spyre(tensors, "send"):
            _ops.comm_send(self._h, t.contiguous(), dst)
        return _done(tensors, tensors[0])

    def recv(self, tensors, src, tag=0):
        if _on_cpu(tensors):
            return self._gloo.recv(tensors, src, tag)
        for t in self._spyre(tensors, "recv"):
            _ops.comm_recv(self._h, t, src)
        return _done(tensors, tensors[0])

    def barrier(self, opts=None):
        _ops.comm_barrier(self._h)
        return _Work(None)

    def shutdown(self):
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
