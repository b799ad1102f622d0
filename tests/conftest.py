"""Shared test settings: deterministic, offline, quiet, one CPU thread.

The suite trains many tiny models, which run fastest on one thread (and far faster than on two
threads that compete with anything else on the machine); DDP tests start their own processes.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
