# SPDX-License-Identifier: MIT
"""spyre_torch: the spyre card as a PyTorch device (PrivateUse1).

    import torch, spyre_torch
    x = torch.randn(4, 64).to(spyre_torch.device(0))   # privateuseone:0
    y = torch.nn.functional.silu(x @ x.t())            # on the card
    spyre_torch.synchronize()

PyTorch 1.13 names the device "privateuseone"; ``torch.spyre`` is this
module. Ops the card does not implement run on the CPU with a one-time
warning; ``fallback_counts()`` says which and how often. Docs:
frameworks/pytorch/README.md.
"""
import os
import sys

import torch

_here = os.path.dirname(os.path.abspath(__file__))
torch.ops.load_library(os.path.join(_here, "_C.so"))
_ops = torch.ops.spyre

DEVICE_TYPE = "privateuseone"

__all__ = ["device", "device_count", "set_device", "current_device", "synchronize", "Stream", "Event",
           "stream", "current_stream", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "empty_cache", "rms_norm", "fallback_counts", "card_counts", "relayouts", "reset_counters"]


def device_count():
    """Number of spyre cards (0 without a driver or card)."""
    return _ops.device_count()


def _index(d):
    if d is None:
        return _ops.current_device()
    if isinstance(d, torch.device):
        if d.type != DEVICE_TYPE:
            raise ValueError(f"spyre: {d} is not a spyre device (privateuseone)")
        return _ops.current_device() if d.index is None else d.index
    if isinstance(d, str):
        return _index(torch.device(d))
    if not isinstance(d, int):
        raise TypeError(f"spyre: a device is an int, a torch.device or a string, not {type(d).__name__}")
    return d


def device(index=0):
    """torch.device("privateuseone:<index>"), checked against the cards present."""
    n = device_count()
    if not isinstance(index, int) or index < 0 or index >= n:
        raise RuntimeError(f"spyre: device index {index} is out of range ({n} device{'s' if n != 1 else ''})")
    return torch.device(DEVICE_TYPE, index)


def set_device(d):
    _ops.set_device(_index(d))


def current_device():
    return _ops.current_device()


def synchronize(d=None):
    """Wait for all work on every stream of the device."""
    _ops.synchronize(_index(d))


class Stream:
    """An ordered queue of work on a card (a libspyre stream). priority: 0 low, 1 normal, 2 high."""

    def __init__(self, device=None, priority=1, _id=None):
        self.device_index = _index(device)
        self._owned = _id is None
        self.id = _ops.stream_create(self.device_index, priority) if _id is None else _id

    def __del__(self):
        # the driver's queue goes with the last reference to a stream this object created
        if getattr(self, "_owned", False) and not sys.is_finalizing():
            try:
                _ops.stream_destroy(self.device_index, self.id)
            except Exception:
                pass

    def synchronize(self):
        _ops.stream_synchronize(self.device_index, self.id)

    def query(self):
        return _ops.stream_query(self.device_index, self.id)

    def wait_event(self, event):
        event.wait(self)

    def wait_stream(self, other):
        e = Event(other.device_index)
        e.record(other)
        self.wait_event(e)

    def record_event(self, event=None):
        event = event or Event(self.device_index)
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self.device_index, self.id) == (other.device_index, other.id)

    def __hash__(self):
        return hash((self.device_index, self.id))

    def __repr__(self):
        return f"<spyre_torch.Stream device={self.device_index} id={self.id}>"


def current_stream(d=None):
    i = _index(d)
    return Stream(i, _id=_ops.current_stream(i))


class stream:
    """Context manager: make s the current stream of its device."""

    def __init__(self, s):
        self.s = s

    def __enter__(self):
        self.prev = _ops.current_stream(self.s.device_index)
        _ops.set_stream(self.s.device_index, self.s.id)
        return self.s

    def __exit__(self, *exc):
        _ops.set_stream(self.s.device_index, self.prev)


class Event:
    """A point in a stream: record, wait (from another stream), query, synchronize, elapsed_time."""

    def __init__(self, device=None):
        self.device_index = _index(device)
        self.handle = _ops.event_create(self.device_index)

    def record(self, s=None):
        s = s or current_stream(self.device_index)
        _ops.event_record(self.handle, s.id)

    def wait(self, s=None):
        s = s or current_stream(self.device_index)
        _ops.event_wait(self.handle, s.id)

    def query(self):
        return _ops.event_query(self.handle)

    def synchronize(self):
        _ops.event_synchronize(self.handle)

    def elapsed_time(self, end):
        """Device time from this event to end, in ms (both recorded and reached)."""
        return _ops.event_elapsed_ms(self.handle, end.handle)

    def __del__(self):
        if sys.is_finalizing():  # the process is going: nothing to give back
            return
        try:
            _ops.event_destroy(self.handle)
        except Exception:
            pass


def memory_allocated(d=None):
    """Bytes held by tensors (libspyre's allocator)."""
    return _ops.memory_stat(_index(d), 0)


def max_memory_allocated(d=None):
    return _ops.memory_stat(_index(d), 1)


def memory_reserved(d=None):
    """Device memory held by the caching allocator (in use + cached)."""
    return _ops.memory_stat(_index(d), 2)


def empty_cache(d=None):
    """Give cached, unused device memory back to the driver."""
    _ops.empty_cache(_index(d))


def rms_norm(x, w, eps=1e-6):
    """RMSNorm over the last dimension: on the card for card tensors, else in torch."""
    if x.device.type == DEVICE_TYPE:
        return _ops.rms_norm(x, w, float(eps))
    v = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(v + eps) * w.float()).to(x.dtype)


def _report(s):
    out = {}
    for line in s.splitlines():
        name, n = line.rsplit(" ", 1)
        out[name] = int(n)
    return out


def fallback_counts():
    """{aten op: calls} of the ops that ran on the CPU instead of the card."""
    return _report(_ops.fallback_report())


def card_counts():
    """{op: calls} of the ops that ran on the card."""
    return _report(_ops.card_report())


def relayouts():
    """Operands staged into the stick layout (rows not a whole number of 128-byte sticks)."""
    return _ops.relayouts()


def reset_counters():
    _ops.reset_counters()


# torch.spyre, as torch.cuda (1.13 has no backend renaming: tensors show privateuseone)
torch.spyre = sys.modules[__name__]
sys.modules["torch.spyre"] = torch.spyre
