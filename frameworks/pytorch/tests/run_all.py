# SPDX-License-Identifier: MIT
"""Every spyre_torch test in one process (import torch once: minutes under TCG). Args: case names."""
import sys
import time

t0 = time.time()
import torch  # noqa: E402

print(f"# import torch {torch.__version__}: {time.time() - t0:.1f} s", flush=True)
import tap  # noqa: E402
import test_spyre_torch  # noqa: E402,F401
import test_model  # noqa: E402,F401

rc = tap.run()
print(f"# total {time.time() - t0:.1f} s (guest time)")
sys.exit(rc)
