# SPDX-License-Identifier: MIT
"""spyre_torch.graphs: libspyre launch graphs for the device, as torch.cuda's graphs (torch.spyre.*).

    g = torch.spyre.SpyreGraph()
    with torch.spyre.graph(g):          # the current stream captures: nothing runs
        y = model(x_static)             # y: the graph's static output
    x_static.copy_(x_new); g.replay()   # one SUBMIT per job of the graph; y has the new result

While the current stream captures, the ops' launches, device copies and fills become the graph's
nodes (csrc/graphs.cpp); the tensors made meanwhile live in the graph's memory pool (no other tensor
gets their memory while the graph exists), and a replay rewrites them in place. Work a graph cannot
hold raises inside the capture (the capture is dropped): a host synchronize, a value read back, a
copy of pageable host memory, an op that falls back to the CPU. Run the code once before capturing
(kernels are built, scratch memory is made on the first call; a capture only records launches).

torch.compile(model, backend="spyre", mode="reduce-overhead") (or options={"spyre.graphs": True})
does this per input signature of each compiled graph: compile.py's _Replayer.
"""
import collections
import threading

import torch

_ops = torch.ops.spyre
_stats = collections.Counter()
_reasons = collections.Counter()  # why a compiled graph runs eagerly instead
_lock = threading.Lock()


def _count(key, n=1):
    with _lock:
        _stats[key] += n


class SpyreGraph:
    """A captured sequence of the current stream's work, replayed with one SUBMIT ioctl per job.

    nodes, jobs (SUBMIT ioctls per replay), packets, arg_bytes: set by capture_end()."""

    def __init__(self):
        self._id = None
        self.device = None
        self.stream = None
        self.nodes = self.jobs = self.packets = self.arg_bytes = 0

    def capture_begin(self):
        if self._id is not None:
            raise RuntimeError("spyre: this SpyreGraph was captured already; reset() it first")
        d = torch.spyre.current_device()
        self.device, self.stream = d, torch.spyre.current_stream(d)
        self._id = _ops.graph_capture_begin(d)

    def capture_end(self):
        self.nodes, self.jobs, self.packets, self.arg_bytes = _ops.graph_capture_end(self._id)
        _count("captures")

    def capture_abort(self):
        if self._id is not None:
            _ops.graph_capture_abort(self._id)
            self._id = None
        _count("aborted_captures")

    def replay(self):
        """Run the graph on the stream it was captured on (after the work queued there so far)."""
        if self._id is None:
            raise RuntimeError("spyre: replay of a SpyreGraph that was not captured")
        _ops.graph_replay(self._id)
        _count("replays")

    def reset(self):
        """Free the graph (after its replays) and its memory pool."""
        if self._id is not None:
            _ops.graph_destroy(self._id)
            self._id = None

    def __del__(self):
        try:
            self.reset()
        except Exception:
            pass

    def __repr__(self):
        return (f"SpyreGraph(spyre:{self.device}, nodes={self.nodes}, jobs={self.jobs}, "
                f"packets={self.packets})" if self._id is not None else "SpyreGraph(empty)")


class graph:
    """torch.spyre.graph(g): capture the block's work on the current stream into SpyreGraph @g
    (torch.cuda.graph's context); an exception inside drops the capture and propagates."""

    def __init__(self, g):
        self.g = g

    def __enter__(self):
        self.g.capture_begin()
        return self.g

    def __exit__(self, typ, exc, tb):
        if typ is None:
            self.g.capture_end()
        else:
            self.g.capture_abort()
        return False


def graph_stats():
    """Captures, replays, aborted captures, warm-up and eager calls of compiled graphs, the inputs
    copied into a graph's static inputs, and why graphs ran eagerly (`reasons`)."""
    with _lock:
        out = dict(_stats)
        out["reasons"] = dict(_reasons)
    return out


def reset_graph_stats():
    with _lock:
        _stats.clear()
        _reasons.clear()


def stream_stats(stream=None):
    """libspyre's totals of @stream (default: the current one), after its work: launches, jobs (SUBMIT
    ioctls: one per launch, copy or event record; one per job of a graph replay), device_ns, bytes."""
    s = torch.spyre.current_stream() if stream is None else stream
    v = _ops.stream_stats(s.device_index, s.stream_id)
    return dict(zip(("launches", "jobs", "device_ns", "h2d_bytes", "d2h_bytes", "d2d_bytes", "arg_bytes"), v))


def reset_stream_stats(stream=None):
    s = torch.spyre.current_stream() if stream is None else stream
    _ops.stream_reset_stats(s.device_index, s.stream_id)


def _eager(reason):
    with _lock:
        _stats["eager_calls"] += 1
        _reasons[reason] += 1
