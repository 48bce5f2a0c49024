# SPDX-License-Identifier: MIT
"""spyre_torch.compile: torch.compile for models whose tensors are on the card.

Two ways in, both registered by importing this module (spyre_torch imports it
lazily: torch.compile's Inductor asks torch.spyre for its Scheduling, Dynamo
finds the backend "spyre" through the entry point group torch_dynamo_backends),
so `import torch` stays as fast as before:

* ``torch.compile(model)`` (Inductor, the default): the device "spyre" is
  registered with Inductor (register_backend_for_device, a DeviceInterface,
  device op overrides). Device memory is not host-readable, so no code
  Inductor generates (C++, Triton) may touch it: a custom backend pass marks
  every node of a graph on the card "should_fallback", and Inductor lowers it
  to an extern call of the ATen op, which dispatches to the card (ops.cpp)
  or to its counted CPU fallback. Inductor's decompositions of ops the card
  has a kernel for (a PrivateUse1 kernel, not the boxed fallback) are skipped
  for card tensors, so softmax stays one SOFTMAX launch. SpyreScheduling
  raises rather than generate a kernel for the card.

* ``torch.compile(model, backend="spyre")``: Dynamo's torch-level FX graph,
  for inference (no_grad / inference_mode), with the patterns the kernel
  library has fused into one op each (fused.cpp): the gated MLP
  down(silu(gate(x)) * up(x)) -> MLP (its weights packed once, at compile
  time), causal scaled-dot-product attention -> ATTENTION, RMSNorm as Hugging
  Face writes it -> RMSNORM, linear + relu/gelu/silu -> LINEAR and the
  activation in one op. Every kernel the graph needs is built at compile time
  (for the example shapes); a call only launches. The rest runs as eager ops.

compile_stats() / reset_compile_stats(): graphs compiled, graph breaks,
patterns fused per kind, ops left to eager kernels, Inductor extern calls,
CPU fallbacks of the card's ops.
"""
import collections
import operator
import threading
import weakref

import torch
import torch.nn.functional as F

DEVICE = "spyre"
_ops = torch.ops.spyre
_stats = collections.Counter()
_rejected = []  # why the kernel library could not build a pattern's kernel
_lock = threading.Lock()
_registered = False


# ---- the device for Dynamo and Inductor ---------------------------------------------------

def _device_interface():
    from torch._dynamo.device_interface import DeviceInterface

    class SpyreInterface(DeviceInterface):
        class device:
            def __new__(cls, device):
                return torch.device(DEVICE, torch.spyre._index(device))

        class Event(torch.Event):
            def __new__(cls, enable_timing=True):
                return torch.spyre.Event(enable_timing=enable_timing)

        class Stream(torch.Stream):
            def __new__(cls, device=None, priority=0):
                return torch.spyre.Stream(device, priority)

        class Worker:
            @staticmethod
            def set_device(device):
                torch.spyre.set_device(device)

            @staticmethod
            def current_device():
                return torch.spyre.current_device()

            @staticmethod
            def get_device_properties(device=None):
                return None

        @staticmethod
        def current_device():
            return torch.spyre.current_device()

        @staticmethod
        def set_device(device):
            torch.spyre.set_device(device)

        @staticmethod
        def maybe_exchange_device(device):
            prev = torch.spyre.current_device()
            if device != prev:
                torch.spyre.set_device(device)
            return prev

        exchange_device = maybe_exchange_device

        @staticmethod
        def device_count():
            return torch.spyre.device_count()

        @staticmethod
        def is_available():
            return torch.spyre.is_available()

        @staticmethod
        def stream(stream):
            return torch.spyre.stream(stream)

        @staticmethod
        def current_stream():
            return torch.spyre.current_stream()

        @staticmethod
        def set_stream(stream):
            _ops.set_stream(stream.device_index, stream.stream_id)

        @staticmethod
        def _set_stream_by_id(stream_id, device_index, device_type):
            _ops.set_stream(device_index, stream_id)

        @staticmethod
        def get_raw_stream(device_idx):
            return torch.spyre.current_stream(device_idx).stream_id

        @staticmethod
        def synchronize(device=None):
            torch.spyre.synchronize(device)

        @staticmethod
        def get_device_properties(device=None):
            return None

        @staticmethod
        def get_compute_capability(device=None):
            return ""

        @staticmethod
        def is_bf16_supported(including_emulation=False):
            return True

        @staticmethod
        def is_dtype_supported(dtype, including_emulation=False):
            return dtype in (torch.float32, torch.float16, torch.bfloat16)

        @staticmethod
        def memory_allocated(device=None):
            return torch.spyre.memory_allocated(device)

        @staticmethod
        def is_triton_capable(device=None):
            return False

        @staticmethod
        def raise_if_triton_unavailable(device=None):
            raise RuntimeError("spyre: no Triton for the card (its memory is not host-readable)")

    return SpyreInterface


def _inductor_classes():
    from torch._inductor.codegen.common import DeviceOpOverrides
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen
    from torch._inductor.custom_graph_pass import CustomGraphModulePass
    from torch._inductor.scheduler import BaseScheduling
    from torch.utils._ordered_set import OrderedSet

    class SpyreScheduling(BaseScheduling):
        """No kernels are generated for the card: every node of a card graph is an extern call (FallbackPass)."""

        def get_backend_features(self, device):
            return OrderedSet()

        def can_fuse_vertical(self, node1, node2):
            return False

        def can_fuse_horizontal(self, node1, node2):
            return False

        def group_fn(self, sizes):
            return tuple(tuple(s) for s in sizes)

        def codegen_node(self, node):
            names = ", ".join(n.get_name() for n in node.get_nodes())
            raise RuntimeError(f"spyre: Inductor asked for a generated kernel on the card ({names}); device memory "
                               "is not host-readable, so every op of a card graph must be an extern call")

        def codegen_template(self, *args, **kwargs):
            raise RuntimeError("spyre: no Inductor templates for the card")

        def codegen_sync(self):
            pass

        def ready_to_flush(self):
            return False

        def flush(self):
            pass

        def benchmark_fused_nodes(self, nodes):
            raise RuntimeError("spyre: no benchmarking of generated kernels")

    class SpyreWrapperCodegen(PythonWrapperCodegen):
        """Inductor's Python wrapper: the host program of extern calls (the ATen ops, dispatched to the card)."""

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:
                from torch._inductor.codegen.wrapper import SubgraphPythonWrapperCodegen
                return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
            return SpyreWrapperCodegen()

        def _codegen_assert_size_stride(self, code, name, size, stride, op_name):
            # Sizes only: the card's eager kernels may return a dense tensor in another order than the
            # meta function predicts (an elementwise op gives a contiguous result for permuted inputs).
            # Every view of a card graph is an extern call too, so the real strides are what flows on.
            code.writeline(f"assert {name}.shape == {size}, ({op_name!r}, tuple({name}.shape), {size})")

    class SpyreDeviceOpOverrides(DeviceOpOverrides):
        def import_get_raw_stream_as(self, name):
            return f"def {name}(i):\n    return torch.spyre.current_stream(i).stream_id\n"

        def set_device(self, device_idx):
            return f"torch.spyre.set_device({device_idx})"

        def synchronize(self):
            return "torch.spyre.synchronize()"

        def device_guard(self, device_idx):
            return f"torch.spyre._DeviceGuard({device_idx})"

        def current_stream(self):
            return "torch.spyre.current_stream()"

    class FallbackPass(CustomGraphModulePass):
        """Post-grad: every call on card tensors becomes an extern call of its ATen op (counted)."""

        def __call__(self, gm):
            from torch._inductor.lowering import lowerings, make_fallback
            n = 0
            for node in gm.graph.nodes:
                # ATen ops (not getitem of a multi-output op's results, which Inductor handles itself)
                if (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
                        and _touches_card(node)):
                    node.meta["should_fallback"] = True
                    n += 1
                    # an op whose decomposition was skipped for the card has no lowering: a fallback one
                    # (the decomposition still runs for other devices' tensors, so theirs never get here)
                    if node.target not in lowerings:
                        make_fallback(node.target, warn=False, override_decomp=True)
            _stats["inductor_graphs"] += 1
            _stats["inductor_extern_ops"] += n

        def uuid(self):
            return "spyre_torch.compile.FallbackPass 1"

    return SpyreScheduling, SpyreWrapperCodegen, SpyreDeviceOpOverrides, FallbackPass


def _is_card(v):
    return isinstance(v, torch.Tensor) and v.device.type == DEVICE


def _touches_card(node):
    vals = [node.meta.get("val")]
    for a in node.all_input_nodes:
        vals.append(a.meta.get("val"))
    return any(_is_card(t) for t in torch.utils._pytree.tree_leaves(vals))


def _card_kernel(op):
    """Whether the card has a kernel of its own for @op (not the boxed CPU fallback)."""
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1")
    except Exception:
        return False


def _skip_decomps_for_card():
    """Inductor's decompositions of ops the card has a kernel for: not for card tensors."""
    from torch._inductor import decomposition as d

    for op, fn in list(d.decompositions.items()):
        if not isinstance(op, torch._ops.OpOverload) or getattr(fn, "_spyre_wrapped", False) or not _card_kernel(op):
            continue

        def wrapped(*args, _fn=fn, **kwargs):
            if any(_is_card(t) for t in torch.utils._pytree.tree_leaves((args, kwargs))):
                return NotImplemented
            return _fn(*args, **kwargs)

        wrapped._spyre_wrapped = True
        d.decompositions[op] = wrapped
    if hasattr(d.fast_random_decomps, "cache_clear"):
        d.fast_random_decomps.cache_clear()


def _index(d):
    return torch.spyre._index(d)


class _DeviceGuard:
    """torch.spyre._DeviceGuard(i): the device of Inductor's generated host code."""

    def __init__(self, index):
        self.index = index

    def __enter__(self):
        self.prev = torch.spyre.current_device()
        if self.index != self.prev:
            torch.spyre.set_device(self.index)

    def __exit__(self, *exc):
        if self.index != self.prev:
            torch.spyre.set_device(self.prev)
        return False


def register():
    """Register the device with Dynamo and Inductor and the backend "spyre" (once; idempotent)."""
    global _registered, Scheduling, PythonWrapperCodegen
    with _lock:
        if _registered:
            return
        from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend
        from torch._dynamo.device_interface import register_interface_for_device
        from torch._inductor.codegen import common

        torch.spyre._DeviceGuard = _DeviceGuard
        register_interface_for_device(DEVICE, _device_interface())
        sched, wrapper, overrides, fpass = _inductor_classes()
        Scheduling, PythonWrapperCodegen = sched, wrapper
        common.register_backend_for_device(DEVICE, sched, wrapper, device_custom_pass=fpass())
        common.register_device_op_overrides(DEVICE, overrides())
        _skip_decomps_for_card()
        if "spyre" not in _COMPILER_FNS:
            register_backend(spyre_backend, name="spyre")
        _registered = True


# ---- backend="spyre": the kernel library's fused ops ---------------------------------------

_ACTS = {F.relu: "relu", torch.relu: "relu", torch.nn.functional.silu: "silu", torch._C._nn.gelu: "gelu",
         F.gelu: "gelu"}
_ACT_METHODS = {"relu": "relu"}
_LINEAR = (torch._C._nn.linear, F.linear)
_DT = (torch.float32, torch.float16, torch.bfloat16)


def _val(n):
    if isinstance(n, torch.fx.Node):
        return n.meta.get("example_value", n.meta.get("val"))
    return None


def _sticky(n, v=None):
    """A card tensor whose rows are whole 128-byte sticks (the kernels bind it as it is)."""
    v = _val(n) if v is None else v
    return (_is_card(v) and v.dtype in _DT and v.dim() >= 1 and isinstance(v.shape[-1], int) and _rows(v)
            and v.shape[-1] * v.element_size() % 128 == 0)


def _static(v):
    return all(isinstance(s, int) for s in v.shape)


def _rows(v):
    """Rows of a [..., n] value: an int, from the example's sizes (a symbolic size's hint); None if unknown.

    The fused ops take any number of rows; the kernel for the example's is built at compile time, another
    one at its first call."""
    m = 1
    for s in v.shape[:-1]:
        if isinstance(s, torch.SymInt):
            s = s.node.hint
            if s is None:
                return None
        m *= int(s)
    return m


def _linear_args(n):
    """(x, w, b) of a linear node, else None."""
    if n.op != "call_function" or n.target not in _LINEAR:
        return None
    a = list(n.args) + [None] * 3
    x, w, b = a[0], a[1], n.kwargs.get("bias", a[2])
    return x, w, b


def _act_kind(n):
    if n.op == "call_function" and n.target in _ACTS:
        if _ACTS[n.target] == "gelu" and n.kwargs.get("approximate", "none") != "none":
            return None
        if n.kwargs.get("inplace", False):
            return None
        return _ACTS[n.target]
    if n.op == "call_method" and n.target in _ACT_METHODS:
        return _ACT_METHODS[n.target]
    return None


def _is(n, fn, method=None):
    return isinstance(n, torch.fx.Node) and (
        (n.op == "call_function" and n.target in fn) or (method is not None and n.op == "call_method"
                                                          and n.target == method))


def _skip_to(n):
    """The node under .to(same dtype) / .float() no-ops (HF's RMSNorm upcast of an fp32 tensor)."""
    while (isinstance(n, torch.fx.Node) and n.op == "call_method" and n.target in ("to", "float")
           and _val(n) is not None and _val(n.args[0]) is not None and _val(n).dtype == _val(n.args[0]).dtype
           and _val(n).device == _val(n.args[0]).device):
        n = n.args[0]
    return n


class _Fuser:
    def __init__(self, gm, inputs):
        self.gm = gm
        self.g = gm.graph
        self.fused = collections.Counter()
        self.rejected = collections.Counter()
        self.packs = []
        # the real tensors of the placeholders (parameters arrive as inputs)
        ph = [n for n in self.g.nodes if n.op == "placeholder"]
        self.real = {n: t for n, t in zip(ph, inputs)}

    def replace(self, old, target, args, kind):
        with self.g.inserting_before(old):
            new = self.g.call_function(target, args)
        new.meta.update(old.meta)
        old.replace_all_uses_with(new)
        self.fused[kind] += 1
        return new

    def prepare(self, kind, fn, *args):
        """Build the fused op's kernels now (example shapes): False if the library cannot."""
        try:
            fn(*args)
            return True
        except RuntimeError as e:
            self.rejected[kind] += 1
            _stats[f"rejected_{kind}"] += 1
            _rejected.append(f"{kind}: {e}".splitlines()[0][:200])
            return False

    # the gated MLP: down(silu(gate(x)) * up(x)), no biases
    def mlp(self):
        for n in list(self.g.nodes):
            la = _linear_args(n)
            if not la or la[2] is not None:
                continue
            h, wd, _ = la
            if not _is(h, (operator.mul, torch.mul), "mul") or len(h.users) != 1 or len(h.args) != 2:
                continue
            a, b = h.args
            for act, up in ((a, b), (b, a)):
                if _act_kind(act) == "silu" and len(act.users) == 1:
                    g = _linear_args(act.args[0]) if isinstance(act.args[0], torch.fx.Node) else None
                    u = _linear_args(up) if isinstance(up, torch.fx.Node) else None
                    if g and u and g[2] is None and u[2] is None and g[0] is u[0] and \
                            len(act.args[0].users) == 1 and len(up.users) == 1:
                        if self.fuse_mlp(n, g[0], g[1], u[1], wd):
                            break

    def fuse_mlp(self, out, x, wg, wu, wd):
        xv = _val(x)
        ws = [self.real.get(w) for w in (wg, wu, wd)]
        if not (_sticky(x) and all(isinstance(w, torch.Tensor) and _is_card(w)
                                                        and w.dtype == xv.dtype for w in ws)):
            return False
        n_ffn = ws[0].shape[0]
        if ws[1].shape != ws[0].shape or tuple(ws[2].shape) != (xv.shape[-1], n_ffn):
            return False
        if not self.prepare("mlp", _ops.prepare_mlp, _rows(xv), n_ffn, xv.shape[-1], xv.dtype, xv.device.index or 0):
            return False
        name = f"_spyre_mlp_{self.fused['mlp']}"
        self.gm.add_submodule(name, _Packed(ws))  # the packed weights, held by the graph's module
        with self.g.inserting_before(out):
            entry = self.g.get_attr(name)
        self.replace(out, _mlp_call, (x, wg, wu, wd, entry), "mlp")
        return True

    # causal attention without a mask: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    def attention(self):
        for n in list(self.g.nodes):
            if n.op != "call_function" or n.target is not F.scaled_dot_product_attention:
                continue
            args = list(n.args) + [None] * 6
            q, k, v = args[:3]
            mask = n.kwargs.get("attn_mask", args[3])
            drop = n.kwargs.get("dropout_p", args[4] if args[4] is not None else 0.0)
            causal = n.kwargs.get("is_causal", args[5] if args[5] is not None else False)
            scale = n.kwargs.get("scale", None)
            gqa = n.kwargs.get("enable_gqa", False)
            qv, kv, vv = _val(q), _val(k), _val(v)
            if mask is not None or drop != 0.0 or causal is not True or qv is None or kv is None or vv is None:
                continue
            if not isinstance(scale, (float, int, type(None))) or scale == 0:
                continue  # the kernel takes scale 0 as 1/sqrt(head_dim)
            if not (qv.dim() == 4 and kv.dim() == 4 and vv.dim() == 4 and _static(qv) and _static(kv)):
                continue
            B, H, S, D = qv.shape
            KVH = kv.shape[1]
            if (kv.shape[2] != S or vv.shape != kv.shape or kv.shape[0] != B or kv.shape[3] != D
                    or H % KVH or (KVH != H and not gqa) or not all(_sticky(t) for t in (q, k, v))
                    or not (qv.dtype == kv.dtype == vv.dtype)):
                continue
            if not self.prepare("attention", _ops.prepare_attention, S, H, KVH, D, float(scale or 0.0),
                                qv.dtype, qv.device.index or 0):
                continue
            self.replace(n, _ops.attention, (q, k, v, float(scale or 0.0)), "attention")

    # RMSNorm as Hugging Face writes it: w * (h * rsqrt(mean(h^2, -1, keepdim) + eps)).to(dtype)
    def rmsnorm(self):
        for n in list(self.g.nodes):
            if not _is(n, (operator.mul, torch.mul), "mul") or len(n.args) != 2:
                continue
            for w, t in (n.args, reversed(n.args)):
                t = _skip_to(t)
                if not (_is(t, (operator.mul, torch.mul), "mul") and len(t.args) == 2):
                    continue
                for h, r in (t.args, reversed(t.args)):
                    eps, x = _rms_parts(h, r)
                    if eps is None:
                        continue
                    wv, xv, ov = self.real.get(w, _val(w)), _val(x), _val(n)
                    if not (isinstance(wv, torch.Tensor) and _sticky(x) and _is_card(wv) and wv.dim() == 1
                            and wv.shape[0] == xv.shape[-1] and wv.dtype == xv.dtype == ov.dtype
                            and tuple(ov.shape) == tuple(xv.shape)):
                        continue
                    if not self.prepare("rmsnorm", _ops.prepare_rms_norm, _rows(xv),
                                        xv.shape[-1], float(eps), xv.dtype, xv.device.index or 0):
                        continue
                    self.replace(n, _ops.rms_norm, (x, w, float(eps)), "rmsnorm")
                    break
                else:
                    continue
                break

    # linear + relu/gelu/silu
    def linear_act(self):
        for n in list(self.g.nodes):
            kind = _act_kind(n)
            if kind is None or not isinstance(n.args[0], torch.fx.Node):
                continue
            lin = n.args[0]
            la = _linear_args(lin)
            if not la or len(lin.users) != 1:
                continue
            x, w, b = la
            xv, wv, yv = _val(x), self.real.get(w, _val(w)), _val(lin)
            if not (isinstance(wv, torch.Tensor) and _sticky(x) and _sticky(lin, yv)
                    and _is_card(wv) and wv.dtype == xv.dtype):
                continue
            if b is not None and not _is_card(self.real.get(b, _val(b))):
                continue
            if not self.prepare("linear_" + kind, _ops.prepare_linear_act, _rows(xv),
                                wv.shape[0], wv.shape[1], b is not None, kind, xv.dtype, xv.device.index or 0):
                continue
            self.replace(n, _ops.linear_act, (x, w, b, kind), "linear_" + kind)

    def run(self):
        for fuse in (self.attention, self.mlp, self.rmsnorm, self.linear_act):
            fuse()
            self.g.eliminate_dead_code()  # the replaced nodes go before the next pattern looks
        self.gm.recompile()
        left = collections.Counter()
        for n in self.g.nodes:
            if n.op in ("call_function", "call_method", "call_module"):
                if n.target in (_mlp_call, _ops.attention, _ops.rms_norm, _ops.linear_act):
                    continue
                left[getattr(n.target, "__name__", str(n.target))] += 1
        return left


def _rms_parts(h, r):
    """(eps, x) if r is rsqrt(mean(h^2, -1, keepdim=True) + eps) with h (or h.to(fp32)) over x, else (None, None)."""
    if not _is(r, (torch.rsqrt,), "rsqrt"):
        return None, None
    a = r.args[0]
    if not (_is(a, (operator.add, torch.add), "add") and len(a.args) == 2):
        return None, None
    mean, eps = a.args
    if isinstance(mean, (float, int)):
        mean, eps = eps, mean
    if not isinstance(eps, (float, int)) or not _is(mean, (torch.mean,), "mean"):
        return None, None
    dim = mean.args[1] if len(mean.args) > 1 else mean.kwargs.get("dim")
    keep = mean.kwargs.get("keepdim", mean.args[2] if len(mean.args) > 2 else False)
    hv = _val(h)
    if hv is None or not keep or dim not in (-1, hv.dim() - 1, [-1], (-1,)):
        return None, None
    p = mean.args[0]
    sq = (_is(p, (torch.pow, operator.pow), "pow") and p.args[0] is h and p.args[1] == 2) or \
         (_is(p, (operator.mul, torch.mul), "mul") and p.args[0] is h and p.args[1] is h)
    if not sq:
        return None, None
    return eps, _skip_to(h)


_packs = {}  # (id(wg), id(wu), id(wd)) -> (weak references, versions, packed): shared by every graph


def _packed(ws):
    """The gated MLP's weights in the layout the kernel reads: packed once per weights (and version)."""
    key = tuple(id(w) for w in ws)
    e = _packs.get(key)
    if e and all(r() is w for r, w in zip(e[0], ws)) and e[1] == [w._version for w in ws]:
        return e[2]
    packed = _ops.pack_mlp(*ws)
    _stats["weights_packed"] += 3
    # the packed buffers go with the first of the weights
    _packs[key] = ([weakref.ref(w, lambda _, k=key, d=_packs: d.pop(k, None)) for w in ws],
                   [w._version for w in ws], packed)
    return packed


class _Packed(torch.nn.Module):
    """The graph's handle on an MLP's packed weights (packed at compile time; again if a weight changes)."""

    def __init__(self, ws):
        super().__init__()
        self.n = ws[0].shape[0]
        self.ws = list(ws)
        _packed(self.ws)

    def get(self, ws):
        return _packed(ws)


def _mlp_call(x, wg, wu, wd, entry):
    pg, pu, pd = entry.get((wg, wu, wd))
    return _ops.mlp(x, pg, pu, pd, entry.n)


# ---- mode="reduce-overhead": replay each compiled graph as a libspyre launch graph -------------

_MAX_GRAPHS = 16  # input signatures captured per compiled graph; more run eagerly


def _graphs_wanted(kwargs):
    mode = kwargs.get("mode")
    opts = kwargs.get("options") or {}
    if "spyre.graphs" in opts:
        return bool(opts["spyre.graphs"])
    return mode in ("reduce-overhead", "max-autotune")


def _static_input(t):
    """A parameter or buffer of the module (Dynamo passes them as inputs): bound by address, not copied."""
    return isinstance(t, torch.nn.Parameter) or getattr(t, "_dynamo_static_input_type", None) is not None


class _Entry:
    __slots__ = ("warm", "graph", "static", "copy_idx", "out", "out_alias", "reason")

    def __init__(self):
        self.warm, self.graph, self.static, self.copy_idx, self.out, self.out_alias, self.reason = (
            0, None, None, None, None, None, None)


class _Replayer:
    """A compiled graph run as CUDA graph trees run one (mode="reduce-overhead").

    Per input signature (shapes, strides, dtypes, the stream; the addresses of parameters and buffers):
    the first call runs eagerly (a warm-up: kernels built, scratch memory made), the second captures
    the graph's launches on the current stream into a SpyreGraph and replays it, later calls copy
    inputs whose storage changed into the graph's static inputs and replay it (one SUBMIT per job).
    The outputs are the graph's static tensors: the next replay of the same signature overwrites
    them (clone what you keep, as with CUDA graphs). A graph the card cannot capture (a host
    synchronize, a value read back, a CPU fallback, an operand staged through the host) runs eagerly
    from then on; graph_stats()["reasons"] says why."""

    def __init__(self, fn, example_inputs):
        self.fn = fn
        self.static_idx = {i for i, t in enumerate(example_inputs) if isinstance(t, torch.Tensor) and _static_input(t)}
        self.entries = {}
        self.full = False

    def key(self, args):
        """The input signature of a call; a str (why not) when the call cannot be replayed."""
        dev = torch.spyre.current_device()
        k = [dev, torch.accelerator.current_stream(dev).stream_id]
        static = self.static_idx
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                d = a.device
                if d.type != DEVICE and not (a.dim() == 0 and d.type == "cpu"):
                    return "an input is not on the card"
                k.append((a.shape, a.stride(), a.dtype, d, a.data_ptr() if i in static else a.storage_offset()))
            elif isinstance(a, (int, float, bool, str, type(None))):
                k.append(a)
            else:
                return "an input of another type than a tensor or a number"
        return tuple(k)

    def eager(self, args, reason):
        from . import graphs
        graphs._eager(reason)
        return self.fn(*args)

    def __call__(self, *args):
        from . import graphs
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return self.eager(args, "autograd: gradients required")
        k = self.key(args)
        if isinstance(k, str):
            return self.eager(args, k)
        e = self.entries.get(k)
        if e is not None and e.graph is not None:
            return self.replay(e, args)
        if e is None:
            if len(self.entries) >= _MAX_GRAPHS:
                return self.eager(args, f"more than {_MAX_GRAPHS} input signatures")
            e = self.entries[k] = _Entry()
        if e.reason:
            return self.eager(args, e.reason)
        if not e.warm:
            e.warm = 1
            graphs._count("warmup_calls")
            return self.fn(*args)
        return self.capture(e, args)

    def capture(self, e, args):
        from . import graphs
        static = list(args)
        copy_idx = [i for i, a in enumerate(args) if _is_card(a) and i not in self.static_idx]
        for i in copy_idx:
            static[i] = torch.empty_like(args[i]).copy_(args[i])  # the graph's own input, outside its pool
        g = graphs.SpyreGraph()
        g.capture_begin()
        try:
            out = self.fn(*static)
            g.capture_end()
        except Exception as ex:  # noqa: BLE001  (the capture's reason; the call runs eagerly)
            g.capture_abort()
            e.reason = "cannot capture: " + (str(ex).strip().splitlines() or [type(ex).__name__])[0][:200]
            import warnings
            warnings.warn(f"spyre: a compiled graph runs eagerly ({e.reason})", stacklevel=2)
            return self.eager(args, e.reason)
        e.graph, e.static, e.out, e.copy_idx = g, static, out, copy_idx
        # outputs that are inputs themselves are the caller's tensors, not the graph's copies
        ids = {id(t): i for i, t in enumerate(static) if isinstance(t, torch.Tensor)}
        flat, spec = torch.utils._pytree.tree_flatten(out)
        alias = [ids.get(id(t)) if isinstance(t, torch.Tensor) else None for t in flat]
        e.out_alias = (alias if any(i is not None for i in alias) else None, spec)
        g.replay()
        return self.result(e, args)

    def replay(self, e, args):
        from . import graphs
        for i in e.copy_idx:
            a, s = args[i], e.static[i]
            if a.data_ptr() != s.data_ptr():
                s.copy_(a)
                graphs._count("input_copies")
        e.graph.replay()
        return self.result(e, args)

    def result(self, e, args):
        alias, spec = e.out_alias
        if alias is None:
            return e.out
        flat, _ = torch.utils._pytree.tree_flatten(e.out)
        flat = [args[i] if i is not None else t for t, i in zip(flat, alias)]
        return torch.utils._pytree.tree_unflatten(flat, spec)


def spyre_backend(gm, example_inputs, **kwargs):
    """torch.compile(model, backend="spyre"): Dynamo's FX graph with the kernel library's patterns fused.

    mode="reduce-overhead" (or options={"spyre.graphs": True}): replayed as a launch graph (_Replayer)."""
    fn = _spyre_backend(gm, example_inputs)
    if _graphs_wanted(kwargs) and any(_is_card(t) for t in example_inputs):
        _stats["graphs_replayable"] += 1
        return _Replayer(fn, example_inputs)
    return fn


def _spyre_backend(gm, example_inputs):
    register()
    _stats["spyre_graphs"] += 1
    grad = torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)
    card = any(_is_card(t) for t in example_inputs)
    devs = {str(t.device) for t in example_inputs if isinstance(t, torch.Tensor) and t.dim() > 0}
    if card and len(devs) > 1:
        raise RuntimeError(f"spyre: a compiled graph's tensors are on {', '.join(sorted(devs))}; "
                           "a model on the card takes card tensors")
    if grad or not card:
        # training graphs keep autograd's ops; graphs without card tensors have nothing to fuse
        _stats["spyre_graphs_unfused"] += 1
        return gm.forward
    f = _Fuser(gm, example_inputs)
    left = f.run()
    for k, v in f.fused.items():
        _stats["fused_" + k] += v
    _stats["eager_ops"] += sum(left.values())
    return gm.forward


# ---- counters -------------------------------------------------------------------------------

def compile_stats():
    """What torch.compile did on the card since reset_compile_stats()."""
    from torch._dynamo.utils import counters
    out = {k: v for k, v in _stats.items()}
    out["graph_breaks"] = sum(counters["graph_break"].values())
    out["graph_break_reasons"] = dict(counters["graph_break"])
    out["rejected"] = list(_rejected)
    out["fused"] = {k[6:]: v for k, v in _stats.items() if k.startswith("fused_")}
    out["fallbacks"] = torch.spyre.fallback_counts()
    out["fused_launches"] = torch.spyre._report(_ops.fused_report())
    return out


def reset_compile_stats():
    from torch._dynamo.utils import counters
    _stats.clear()
    _rejected.clear()
    counters.clear()
    _ops.fused_reset()


Scheduling = PythonWrapperCodegen = None
register()
