"""benchmarks/gpu_check.sh on a machine without a GPU: one clear skip line, exit 0 (CI never has a GPU)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "gpu_check.sh"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: gpu_check.sh runs for real")
def test_gpu_check_skips_cleanly_without_cuda() -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT)], env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "gpu_check: no CUDA device (torch.cuda.is_available() is False): skipped"
