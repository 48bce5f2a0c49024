# SPDX-License-Identifier: MIT
"""Every spyre_torch test in one process (import torch once: 15-60 s under TCG). Args: case names."""
import sys
import time

t0 = time.time()
import torch  # noqa: E402

print(f"# import torch {torch.__version__}: {time.time() - t0:.1f} s", flush=True)
# A fresh interpreter that imported torch and nothing else: the device must be there
# (the torch.backends entry point); test_torch2's autoload case reports what it saw.
try:
    _x = torch.ones(2, device="spyre") * 3
    AUTOLOADED = f"{_x.device} {_x.is_spyre} {_x.cpu().tolist()} {torch.spyre.__name__} {'spyre_torch' in sys.modules}"
except Exception as e:  # reported by the test
    AUTOLOADED = f"{type(e).__name__}: {e}"
import tap  # noqa: E402
import test_spyre_torch  # noqa: E402,F401
import test_torch2  # noqa: E402,F401
import test_model  # noqa: E402,F401
import test_ops  # noqa: E402,F401
import test_compile  # noqa: E402,F401
import test_graphs  # noqa: E402,F401
import test_hf  # noqa: E402,F401
import test_opinfo  # noqa: E402,F401
import test_distributed  # noqa: E402,F401
import test_dist_pytorch  # noqa: E402,F401

rc = tap.run()
print(f"# total {time.time() - t0:.1f} s (guest time)")
sys.exit(rc)
