# SPDX-License-Identifier: MIT
"""A small TAP producer for the guest's Python tests (one process: import torch once)."""
import sys
import traceback

_cases = []


def case(fn):
    _cases.append(fn)
    return fn


class Skip(Exception):
    """Raised by a case that cannot run here: TAP "ok N - name # SKIP reason"."""


class Check:
    def __init__(self):
        self.failed = 0
        self.count = 0

    def ok(self, cond, what):
        self.count += 1
        if not cond:
            self.failed += 1
            print(f"#   not ok: {what}", flush=True)
        return cond

    def close(self, got, want, rtol, atol, what):
        import torch
        got = got.detach().cpu().double()
        want = want.detach().cpu().double()
        if got.shape != want.shape:
            return self.ok(False, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}")
        err = (got - want).abs()
        bound = atol + rtol * want.abs()
        bad = int((err > bound).sum()) + int(torch.isnan(got).sum() != torch.isnan(want).sum())
        worst = float((err - bound).max()) if err.numel() else 0.0
        return self.ok(bad == 0, f"{what}: {bad} of {got.numel()} elements beyond rtol {rtol} atol {atol} "
                                  f"(worst excess {worst:.3g})")

    def raises(self, fn, exc, text, what):
        try:
            fn()
        except exc as e:
            return self.ok(text in str(e), f"{what}: message {str(e)!r} lacks {text!r}")
        except Exception as e:  # the wrong kind
            return self.ok(False, f"{what}: raised {type(e).__name__}: {e}")
        return self.ok(False, f"{what}: did not raise {exc.__name__}")


def run(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cases = [c for c in _cases if not argv or c.__name__ in argv]
    print("TAP version 13")
    print(f"1..{len(cases)}", flush=True)
    failed = skipped = 0
    for i, fn in enumerate(cases, 1):
        c = Check()
        try:
            fn(c)
        except Skip as e:
            skipped += 1
            print(f"ok {i} - {fn.__name__} # SKIP {e}", flush=True)
            continue
        except Exception:
            c.failed += 1
            for line in traceback.format_exc().splitlines():
                print(f"#   {line}")
        status = "ok" if not c.failed else "not ok"
        failed += bool(c.failed)
        print(f"{status} {i} - {fn.__name__} ({c.count} checks)", flush=True)
    print(f"# {len(cases)} cases: {len(cases) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0
