# SPDX-License-Identifier: MIT
"""spyre_torch: the spyre card as the PyTorch device "spyre" (PrivateUse1).

    import torch                                     # autoloads this package
    x = torch.randn(4, 64, device="spyre")           # spyre:0
    y = torch.nn.functional.silu(x @ x.t())          # on the card
    torch.spyre.synchronize()

`import torch` loads it through the entry point of the group torch.backends
(spyre_torch-*.dist-info next to this package; TORCH_DEVICE_BACKEND_AUTOLOAD=0
turns that off): PrivateUse1 renamed "spyre", this module registered as
``torch.spyre`` (as torch.cuda), ``Tensor.spyre()``, ``Tensor.is_spyre`` and
``Module.spyre()``. Ops the card does not implement run on the CPU with a
one-time warning; ``fallback_counts()`` says which and how often. Docs:
frameworks/pytorch/README.md.
"""
import functools
import os
import sys

import torch

DEVICE_TYPE = "spyre"

_here = os.path.dirname(os.path.abspath(__file__))
torch.ops.load_library(os.path.join(_here, "_C.so"))
_ops = torch.ops.spyre

__all__ = ["device", "device_count", "is_available", "set_device", "current_device", "synchronize", "Stream",
           "Event", "stream", "current_stream", "manual_seed", "manual_seed_all", "initial_seed", "get_rng_state",
           "set_rng_state", "memory_allocated", "max_memory_allocated", "memory_reserved", "memory_stats",
           "reset_peak_memory_stats", "empty_cache", "async_copies", "rms_norm", "fallback_counts", "card_counts",
           "relayouts", "reset_counters", "compile_stats", "reset_compile_stats", "SpyreGraph", "graph",
           "graph_stats", "reset_graph_stats", "stream_stats", "reset_stream_stats"]


def device_count():
    """Number of spyre cards (0 without a driver or card)."""
    return _ops.device_count()


def is_available():
    return device_count() > 0


def _index(d):
    if d is None:
        return _ops.current_device()
    if isinstance(d, torch.device):
        if d.type != DEVICE_TYPE:
            raise ValueError(f"spyre: {d} is not a spyre device")
        return _ops.current_device() if d.index is None else d.index
    if isinstance(d, str):
        return _index(torch.device(d))
    if not isinstance(d, int):
        raise TypeError(f"spyre: a device is an int, a torch.device or a string, not {type(d).__name__}")
    return d


def device(index=0):
    """torch.device("spyre:<index>"), checked against the cards present."""
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


# ---- streams and events: torch.Stream / torch.Event on the device guard -------------------

class Stream(torch.Stream):
    """A stream of its own on a card (a libspyre stream), destroyed with the last reference to it.

    priority as torch's: -1 high, 0 normal, 1 low. torch.Stream(device="spyre", priority=p) gives
    one of a pool of streams instead (never destroyed).
    """

    def __new__(cls, device=None, priority=0):
        i = _index(device)
        if priority not in (-1, 0, 1):
            raise ValueError(f"spyre: stream priority {priority} is not -1 (high), 0 (normal) or 1 (low)")
        sid = _ops.stream_create(i, 1 - priority)
        try:
            s = super().__new__(cls, stream_id=sid, device_index=i, device_type=_DEVICE_TYPE_ID)
        except BaseException:
            _ops.stream_destroy(i, sid)
            raise
        s._owned = True
        return s

    def __init__(self, device=None, priority=0):
        pass

    def __del__(self):
        # the driver's queue goes with the last reference to a stream this object created
        if getattr(self, "_owned", False) and not sys.is_finalizing():
            try:
                _ops.stream_destroy(self.device_index, self.stream_id)
            except Exception:
                pass

    def __repr__(self):
        return f"<torch.spyre.Stream device=spyre:{self.device_index} id={self.stream_id}>"


def current_stream(d=None):
    """The current stream of the device (a torch.Stream)."""
    return torch.accelerator.current_stream(_index(d))


class stream:
    """Context manager: make s (a torch.Stream on spyre) the current stream of its device."""

    def __init__(self, s):
        self.s = s

    def __enter__(self):
        self.prev = torch.accelerator.current_stream(self.s.device_index)
        _ops.set_stream(self.s.device_index, self.s.stream_id)
        return self.s

    def __exit__(self, *exc):
        _ops.set_stream(self.prev.device_index, self.prev.stream_id)


def Event(device=None, enable_timing=True):
    """A torch.Event on a card: record, wait (from another stream), query, synchronize, elapsed_time (ms)."""
    return torch.Event(torch.device(DEVICE_TYPE, _index(device)), enable_timing=enable_timing)


# ---- random numbers: a CPU generator per device inside the spyre generator (hooks.cpp) -----

def manual_seed(seed, d=None):
    _ops.manual_seed(_index(d), int(seed))


def manual_seed_all(seed):
    for i in range(device_count()):
        _ops.manual_seed(i, int(seed))


def initial_seed(d=None):
    return _ops.initial_seed(_index(d))


def get_rng_state(d=None):
    return _ops.get_rng_state(_index(d))


def set_rng_state(state, d=None):
    _ops.set_rng_state(_index(d), state)


def _is_in_bad_fork():
    return False


# ---- memory: libspyre's allocator as a c10::DeviceAllocator (torch.accelerator.memory_*) ---

def memory_allocated(d=None):
    """Bytes held by tensors."""
    return torch.accelerator.memory_allocated(_index(d))


def max_memory_allocated(d=None):
    return torch.accelerator.max_memory_allocated(_index(d))


def memory_reserved(d=None):
    """Device memory libspyre holds in buffers (in use + cached)."""
    return torch.accelerator.memory_reserved(_index(d))


def memory_stats(d=None):
    """torch.accelerator.memory_stats() of the device: allocated_bytes.all.current, reserved_bytes..."""
    return torch.accelerator.memory_stats(_index(d))


def reset_peak_memory_stats(d=None):
    torch.accelerator.reset_peak_memory_stats(_index(d))


def empty_cache(d=None):
    """Give cached, unused device memory back to the driver."""
    _ops.empty_cache(_index(d))


def async_copies():
    """Copies that returned before the card was done (non_blocking, from or to pinned memory)."""
    return _ops.async_copies()


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16]


# ---- the kernel library's extras and the counters -------------------------------------------

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


# ---- registration: once per process -------------------------------------------------------

def _register():
    if torch._C._get_privateuse1_backend_name() != DEVICE_TYPE:
        torch.utils.rename_privateuse1_backend(DEVICE_TYPE)
    if getattr(torch, DEVICE_TYPE, None) is not sys.modules[__name__]:
        torch._register_device_module(DEVICE_TYPE, sys.modules[__name__])
    if not hasattr(torch.Tensor, "is_" + DEVICE_TYPE):
        torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True,
                                                             for_packed_sequence=True, for_storage=False)


_register()
_DEVICE_TYPE_ID = _ops.device_type_id()

# ---- launch graphs (spyre_torch/graphs.py): torch.spyre.SpyreGraph, torch.spyre.graph, as torch.cuda's ----

from .graphs import SpyreGraph, graph, graph_stats, reset_graph_stats, stream_stats, reset_stream_stats  # noqa: E402  # c10::DeviceType::PrivateUse1, for torch.Stream(device_type=)


# ---- torch.compile: spyre_torch.compile, imported on first use (import torch stays fast) ----

_COMPILE_ATTRS = ("Scheduling", "PythonWrapperCodegen", "compile_stats", "reset_compile_stats")


def __getattr__(name):
    """Inductor asks torch.spyre for its Scheduling and PythonWrapperCodegen (init_backend_registration):
    importing spyre_torch.compile registers the device with Dynamo and Inductor then."""
    if name in _COMPILE_ATTRS:
        from . import compile as _compile
        return getattr(_compile, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _hook_compile():
    """torch.compile imports spyre_torch.compile first: the device is registered with Dynamo and Inductor
    before Inductor picks its decompositions (once; the wrapper is torch.compile otherwise)."""
    orig = torch.compile
    if getattr(orig, "_spyre_hook", False):
        return

    @functools.wraps(orig)
    def compile(*args, **kwargs):
        from . import compile as _compile  # noqa: F401  (registers on first import)
        return orig(*args, **kwargs)

    compile._spyre_hook = True
    torch.compile = compile


def _autoload():
    """The torch.backends entry point: importing this module registered the device; nothing more to do."""


_hook_compile()


# ---- torch.distributed: the c10d backend "spyreccl" (spyre_torch/distributed.py) ----

from . import distributed as _distributed  # noqa: E402

_distributed.register()
