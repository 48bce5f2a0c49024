# SPDX-License-Identifier: MIT
"""PyTorch's own tests of the collectives on the c10d backend "spyreccl" with spyre tensors, as
PyTorch's test/distributed/test_distributed_spawn.py runs them for a backend: the installed wheel's
torch.testing._internal.distributed.distributed_test (DistributedTest._DistTestBase: the test bodies)
and common_distributed (MultiProcessTestCase through distributed_test.TestDistBackend: a process per
rank, the group through a file store, exit codes, skips) with BACKEND=spyreccl, rank r on card r:
RUN with WORLD_SIZE=2, then RUN and GROUP with WORLD_SIZE=3 (the _group tests' group is ranks [1, 2];
they need a third card: `tools/vm/run --devices 3`, as make check's Python boot has; with fewer cards
their cases skip (TAP "# SKIP"), naming it). Nothing of PyTorch's is copied here; the runner only picks
tests and adapts:

  1. torch.set_default_device(spyre:rank) in each rank before its group: the tests' CPU-tensor
     bodies (`_build_tensor()`, `torch.empty()`, ...) make spyre tensors, so their collectives go to
     spyreccl, and their expected values are built on the card too. This is the one device adapter:
     the *_cuda variants call the same helpers with `.cuda(rank_to_GPU[rank][0])`, which has no
     spyre meaning, so they are not run (SKIPPED says so).
  2. The ranks are forked from this runner (a fresh interpreter that imported torch and never
     touched a card), not spawned: each spawn imports torch again (15-60 s under TCG, per rank, per
     test); _spawn_processes() is torch's only starter, so setUp calls _start_processes() with the
     fork context, as torch's own test_distributed_fork.py did.
  3. PyTorch gates all_to_all and all_to_all_single on BACKEND == "mpi" (for CPU tensors) or
     "nccl" (CUDA); their bodies are backend-agnostic helpers, which the runner's test_* of the same
     name call exactly as PyTorch's test does (UNGATED).
  4. PyTorch runs the _group tests (on the group [1, 2]) only with 8 ranks or more for a backend
     other than MPI (common_distributed.skip_if_small_worldsize); with 3 the runner runs the test
     beneath that one decorator (its functools.wraps __wrapped__), checking that it is that gate.
  5. PyTorch's _test_all_reduce_helper never compares its result (torch 2.13), and MultiProcessTestCase
     checks rank 0's exit code only (the _group tests' rank 0 is outside the group). In the ranks,
     every all_reduce of a spyre tensor is checked against the same all_reduce of its CPU copy
     (gloo, on the same group), equal to the bit; every rank must exit 0.
  6. PyTorch gates test_batch_isend_irecv_gloo and _gloo_tags on BACKEND == "gloo" and
     test_batch_isend_irecv_op_list_err on "nccl" (skip_but_pass_in_sandcastle_if, which marks the
     test itself skipped); their bodies name no device: the runner runs each body (BACKEND_GATED,
     checking that the gate is that one).

RUN and GROUP list every test that runs and must pass: a test that fails, errors or skips is a
failure. SKIPPED names every other collective test of _DistTestBase with why it is not run.
Run: python3 test_dist_pytorch.py [case ...] (TAP, each world's suite in a subprocess);
     python3 test_dist_pytorch.py --suite WORLD OUT.json [test ...] (the suite itself).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import tap
from tap import case

WORLDS = (2, 3)

RUN = [
    "test_all_reduce_sum", "test_all_reduce_sum_async", "test_all_reduce_max", "test_all_reduce_min",
    "test_all_reduce_product", "test_all_reduce_full_group_sum", "test_all_reduce_full_group_max",
    "test_all_reduce_full_group_min", "test_all_reduce_full_group_product",
    "test_reduce_sum", "test_reduce_max", "test_reduce_min", "test_reduce_product", "test_reduce_sum_twice",
    "test_reduce_full_group_sum", "test_reduce_full_group_max", "test_reduce_full_group_min",
    "test_reduce_full_group_product",
    "test_broadcast", "test_broadcast_full_group",
    "test_all_gather", "test_all_gather_full_group",
    "test_gather", "test_gather_full_group", "test_gather_checks",
    "test_scatter", "test_scatter_full_group", "test_scatter_checks",
    "test_all_to_all", "test_all_to_all_full_group", "test_all_to_all_single_equal_split",
    "test_all_to_all_single_equal_split_full_group", "test_all_to_all_single_unequal_split",
    "test_all_to_all_single_unequal_split_full_group",
    "test_barrier", "test_barrier_full_group",
    "test_send_recv", "test_send_recv_with_tag",
    "test_batch_isend_irecv_gloo", "test_batch_isend_irecv_gloo_tags", "test_batch_isend_irecv_op_list_err",
]
# Adapter 6: tests of RUN gated on another backend's name, with the reason of their gate.
BACKEND_GATED = {
    "test_batch_isend_irecv_gloo": "GLOO Batch Send Recv CPU",
    "test_batch_isend_irecv_gloo_tags": "GLOO Batch Send Recv CPU",
    "test_batch_isend_irecv_op_list_err": "NCCL Batch Send Recv Only",
}

_CUDA = "the *_cuda variant of a test that runs above: .cuda(rank_to_GPU) has no spyre meaning"
_COMPLEX = "complex dtypes: spyreccl reduces float32, float16 and bfloat16"
# The tests on the group [1, 2] (they need 3 ranks; PyTorch's skip_if_small_worldsize skips them below 8 for a
# backend other than MPI: adapter 4): world 3 only.
GROUP = [
    *(f"test_all_reduce_group_{o}" for o in ("sum", "max", "min", "product")),
    *(f"test_reduce_group_{o}" for o in ("sum", "max", "min", "product")),
    "test_broadcast_group", "test_all_gather_group", "test_gather_group", "test_scatter_group",
    "test_barrier_group", "test_all_to_all_group", "test_all_to_all_single_equal_split_group",
    "test_all_to_all_single_unequal_split_group",
]
SKIPPED = {
    **{t: _CUDA for t in (
        "test_all_reduce_sum_cuda", "test_all_reduce_sum_cuda_async", "test_broadcast_cuda", "test_reduce_sum_cuda",
        "test_reduce_sum_cuda_twice", "test_all_gather_cuda", "test_gather_cuda", "test_scatter_cuda",
        "test_all_to_all_cuda", "test_all_to_all_full_group_cuda", "test_all_to_all_group_cuda",
        "test_all_to_all_single_equal_split_cuda", "test_all_to_all_single_equal_split_full_group_cuda",
        "test_all_to_all_single_equal_split_group_cuda", "test_all_to_all_single_unequal_split_cuda",
        "test_all_to_all_single_unequal_split_full_group_cuda", "test_all_to_all_single_unequal_split_group_cuda",
        "test_barrier_cuda", "test_barrier_full_group_cuda", "test_barrier_group_cuda",
        "test_all_gather_into_cat_tensor_cuda", "test_all_gather_into_stack_tensor_cuda", "test_all_gather_v_cuda",
        "test_reduce_scatter_tensor_cuda", "test_reduce_scatter_v_cuda", "test_send_recv_nccl")},
    **{t: _COMPLEX for t in (
        "test_all_reduce_sum_complex", "test_all_reduce_complex_unsupported_ops",
        "test_all_reduce_coalesced_max_complex_unsupported", "test_all_gather_complex",
        "test_all_gather_coalesced_complex", "test_scatter_complex", "test_all_to_all_complex",
        "test_all_to_all_single_equal_split_complex", "test_all_to_all_single_unequal_split_complex",
        "test_all_reduce_sum_cuda_complex", "test_all_gather_cuda_complex", "test_scatter_cuda_complex",
        "test_all_to_all_cuda_complex", "test_all_to_all_single_equal_split_cuda_complex",
        "test_all_to_all_single_unequal_split_cuda_complex")},
    **{f"test_all_gather_coalesced_{k}": "all_gather_coalesced: not in spyreccl"
       for k in ("simple", "full_group", "group", "with_empty")},
    **{t: "profiler variants: the profiler's record_param_comms events are c10d's C++ backends'" for t in (
        "test_isend_autograd_profiler", "test_isend_torch_profiler", "test_send_recv_autograd_profiler",
        "test_send_recv_torch_profiler", "test_send_recv_with_tag_autograd_profiler",
        "test_send_recv_with_tag_torch_profiler", "test_send_recv_any_source_autograd_profiler",
        "test_send_recv_any_source_torch_profiler", "test_send_recv_nccl_autograd_profiler",
        "test_send_recv_nccl_torch_profiler")},
    "test_send_recv_any_source": "recv from any source: libspyre's recv names its peer",
    **{t: "asserts is_completed() right after wait(): a CPU Work's wait(); a device Work's wait() makes "
          "the current stream wait, not the host (torch's Work.wait() docs; NCCL skips it too)"
       for t in ("test_isend", "test_irecv")},
    **{f"test_all_reduce_coalesced_{g}{o}": "PyTorch gates it to gloo (require_backend_is_available({'gloo'})); "
       "its SUM and PRODUCT cases reduce complex64"
       for g in ("", "full_group_", "group_") for o in ("sum", "max", "min", "product")},
    **{t: "barrier(timeout=...): spyreccl's barrier waits SPYRE_COMM_TIMEOUT_MS, not a per-call timeout"
       for t in ("test_barrier_timeout_arg", "test_barrier_timeout_full_group", "test_barrier_timeout_global",
                 "test_barrier_timeout_group")},
    **{t: "batch_isend_irecv's NCCL variants: torch.cuda.set_device and .cuda(rank_to_GPU) have no spyre "
          "meaning (the gloo variants run, adapter 6; test_distributed.py's ring_exchange is the ring)" for t in (
        "test_batch_isend_irecv_nccl", "test_batch_isend_irecv_no_rank_zero_nccl", "test_batch_isend_irecv_op_err",
        "test_batch_isend_irecv_ring_exchange_nccl")},
    "test_batch_isend_irecv_self_nccl": "a rank sending to itself: libspyre's send names another rank (and CUDA)",
    "test_batch_isend_irecv_mixed_backend_err": "new_group(backend=\"nccl\"): no NCCL here",
    **{t: "object collectives: pickles through CPU tensors (gloo), not spyreccl's card path" for t in (
        "test_all_gather_object_default_pg", "test_all_gather_object_subgroup", "test_broadcast_object_list",
        "test_gather_object", "test_gather_object_subgroup", "test_scatter_object_list")},
}
# PyTorch's all_to_all tests are gated on the backend's name (MPI for CPU tensors); these call
# the helper each calls, with the group each makes.
UNGATED = {
    "test_all_to_all": ("_test_all_to_all_helper", "_init_global_test"),
    "test_all_to_all_full_group": ("_test_all_to_all_helper", "_init_full_group_test"),
    "test_all_to_all_single_equal_split": ("_test_all_to_all_single_equal_split_helper", "_init_global_test"),
    "test_all_to_all_single_equal_split_full_group": ("_test_all_to_all_single_equal_split_helper",
                                                      "_init_full_group_test"),
    "test_all_to_all_single_unequal_split": ("_test_all_to_all_single_unequal_split_helper", "_init_global_test"),
    "test_all_to_all_single_unequal_split_full_group": ("_test_all_to_all_single_unequal_split_helper",
                                                        "_init_full_group_test"),
    "test_all_to_all_group": ("_test_all_to_all_helper", "_init_group_test"),
    "test_all_to_all_single_equal_split_group": ("_test_all_to_all_single_equal_split_helper", "_init_group_test"),
    "test_all_to_all_single_unequal_split_group": ("_test_all_to_all_single_unequal_split_helper",
                                                   "_init_group_test"),
}


# The collective tests of _DistTestBase: each is in RUN, GROUP or SKIPPED.
COLLECTIVE = re.compile(r"test_(all_reduce|reduce|broadcast|all_gather|gather|scatter|reduce_scatter|all_to_all"
                        r"|barrier|send_recv|isend|irecv|batch_isend)")


def cards():
    """The spyre cards of this machine, from sysfs (the runner touches no card before its ranks fork)."""
    base = "/sys/class/accel"
    names = os.listdir(base) if os.path.isdir(base) else []
    return sum(os.path.basename(os.path.realpath(f"{base}/{n}/device/driver")) == "spyre" for n in names)


def suite(world, out_file, names):
    """Run @names of PyTorch's _DistTestBase on spyreccl with @world ranks; write {test: [outcome, detail]}
    to @out_file."""
    import unittest

    os.environ.update(BACKEND="spyreccl", WORLD_SIZE=str(world), GLOO_SOCKET_IFNAME="lo")
    import torch
    import torch.multiprocessing as mp
    import torch.distributed as dist
    from torch.testing._internal.common_distributed import initialize_temp_directories, skip_if_small_worldsize
    from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend

    initialize_temp_directories()  # TEMP_DIR, before any test's setUp reads it
    all_reduce = dist.all_reduce

    def checked_all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):  # adapter 5
        if tensor.device.type != "spyre" or dist.distributed_c10d._rank_not_in_group(group):
            return all_reduce(tensor, op, group, async_op)
        want = tensor.cpu()
        work = all_reduce(tensor, op, group, async_op)
        if async_op:
            work.wait()
        all_reduce(want, op, group)  # the CPU copy: gloo's reduction
        got = tensor.cpu()
        if not torch.equal(got, want):
            raise AssertionError(f"all_reduce {op} of {tuple(got.shape)} {got.dtype} on rank {dist.get_rank()}: "
                                 f"spyreccl gave {got.flatten()[:8].tolist()}, gloo {want.flatten()[:8].tolist()}")
        return work

    class SpyreDistTest(TestDistBackend, DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._start_processes(mp.get_context("fork").Process)  # adapter 2

        @classmethod
        def _run(cls, rank, test_name, file_name, pipe, **kwargs):
            torch.spyre.set_device(rank)  # spyreccl's card: the process's current device
            torch.set_default_device(torch.device("spyre", rank))  # adapter 1
            dist.all_reduce = checked_all_reduce  # adapter 5, in this rank's process only
            super()._run(rank, test_name, file_name, pipe, **kwargs)

        def _check_return_codes(self, fn, elapsed_time):
            super()._check_return_codes(fn, elapsed_time)
            codes = [p.exitcode for p in self.processes]
            self.assertEqual(codes, [0] * len(codes), "every rank's exit code")  # adapter 5

    def ungated(helper, init):
        def test(self):
            group, group_id, rank = getattr(self, init)()
            getattr(self, helper)(group, group_id, rank)
        return test

    for name, (helper, init) in UNGATED.items():  # adapter 3
        setattr(SpyreDistTest, name, ungated(helper, init))

    for name, why in BACKEND_GATED.items():  # adapter 6
        fn = getattr(DistributedTest._DistTestBase, name)
        if getattr(fn, "__unittest_skip_why__", None) != why:
            print(f"# {name}: not gated by {why!r} alone: run as PyTorch has it", flush=True)
            continue

        def body(self, fn=fn):
            return fn(self)
        setattr(SpyreDistTest, name, body)

    world_gate = skip_if_small_worldsize(lambda: None).__code__
    for name in GROUP:  # adapter 4
        fn = getattr(DistributedTest._DistTestBase, name)
        if name in UNGATED:
            continue
        if getattr(fn, "__code__", None) is not world_gate or getattr(fn, "__unittest_skip__", False):
            print(f"# {name}: not gated by skip_if_small_worldsize alone: run as PyTorch has it", flush=True)
            continue
        setattr(SpyreDistTest, name, fn.__wrapped__)

    class Result(unittest.TestResult):
        def __init__(self):
            super().__init__()
            self.outcomes = {}

        def _name(self, t):
            return t.id().rsplit(".", 1)[-1]

        def addSuccess(self, t):
            self.outcomes[self._name(t)] = ["pass", ""]

        def addFailure(self, t, err):
            self.outcomes[self._name(t)] = ["fail", self._exc_info_to_string(err, t)[-3000:]]

        def addError(self, t, err):
            self.outcomes[self._name(t)] = ["error", self._exc_info_to_string(err, t)[-3000:]]

        def addSkip(self, t, reason):
            self.outcomes[self._name(t)] = ["skip", reason]

    res = Result()
    res.outcomes["_collectives"] = [n for n in dir(DistributedTest._DistTestBase) if COLLECTIVE.match(n)]
    for name in names:
        t0 = __import__("time").time()
        SpyreDistTest(name).run(res)
        print(f"# {name}: {res.outcomes.get(name, ['?'])[0]} ({__import__('time').time() - t0:.1f} s)", flush=True)
        with open(out_file, "w") as f:
            json.dump(res.outcomes, f)


_outcomes = {}


def tests(world):
    """What runs with @world ranks: RUN, and GROUP from 3 ranks."""
    return RUN + (GROUP if world >= 3 else [])


def outcomes(world=WORLDS[0]):
    """The suite's outcomes with @world ranks, run once in a fresh interpreter: {test: [outcome, detail]}."""
    if world not in _outcomes:
        fd, out = tempfile.mkstemp(prefix="spyreccl-suite-", suffix=".json")
        os.close(fd)
        print(f"# PyTorch's tests with {world} ranks:", flush=True)
        try:
            p = subprocess.run([sys.executable, __file__, "--suite", str(world), out, *tests(world)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3000)
            log = p.stdout
        except subprocess.TimeoutExpired as e:
            log = f"timed out: {e.stdout or ''}"
        for line in log.splitlines():
            if line.startswith("# test_"):
                print(line, flush=True)
        try:
            with open(out) as f:
                o = json.load(f)
        except (OSError, ValueError):
            o = {}
        o["_log"] = log[-4000:]
        os.unlink(out)
        _outcomes[world] = o
    return _outcomes[world]


def _case(world, name):
    def fn(c):
        if cards() < world:
            raise tap.Skip(f"{world} ranks need {world} cards, this machine has {cards()} "
                           f"(tools/vm/run --devices {world})")
        o = outcomes(world)
        got, detail = o.get(name, ["did not run", o["_log"]])
        c.ok(got == "pass", f"{name} with {world} ranks: {got}: {detail}")
    fn.__name__ = ("torchdist_" if world == WORLDS[0] else f"torchdist{world}_") + name
    return case(fn)


@case
def torchdist_lists(c):
    """RUN, GROUP and SKIPPED name every collective test of the installed _DistTestBase, each once."""
    have = set(outcomes().get("_collectives", []))
    c.ok(len(have) > 100, f"{len(have)} collective tests found in distributed_test: {outcomes()['_log']}")
    run = set(RUN) | set(GROUP)
    c.ok(len(run) == len(RUN) + len(GROUP), f"in RUN and GROUP: {sorted(set(RUN) & set(GROUP))}")
    c.ok(not run & set(SKIPPED), f"both run and skipped: {sorted(run & set(SKIPPED))}")
    c.ok(not have - run - set(SKIPPED), f"neither run nor skipped: {sorted(have - run - set(SKIPPED))}")
    c.ok(not (run | set(SKIPPED)) - have - set(UNGATED),
         f"not in _DistTestBase: {sorted((run | set(SKIPPED)) - have - set(UNGATED))}")
    print(f"# PyTorch's collective tests: {len(have)}; run {len(RUN)} with 2 ranks and {len(RUN) + len(GROUP)} "
          f"with 3, skipped {len(SKIPPED)}")


for _w in WORLDS:
    for _n in tests(_w):
        _case(_w, _n)

if __name__ == "__main__":
    if sys.argv[1:2] == ["--suite"]:
        suite(int(sys.argv[2]), sys.argv[3], sys.argv[4:] or tests(int(sys.argv[2])))
        sys.exit(0)
    sys.exit(tap.run())
