"""Mid-epoch exact resume: with ``checkpoint_every_steps`` (or ``_minutes``) a run SIGKILLed at a random (seeded)
step after a step commit resumes from that commit and ends with the weights and metrics of the uninterrupted run,
bit for bit on CPU in one process (in memory and streamed from image files) and under a 2-process gloo DDP run;
a mid-epoch state refuses changed settings (not the cadence of the commits), and the field is validated."""

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from tests.gloo import as_torchrun_rank, free_port

from vitlab.cli.main import main

# SIGKILL this process right after optimiser step AT (before that step's commit), then run the CLI; one thread as
# in this process (conftest): another thread count sums in another order
KILLED = """
import os, signal, sys
import torch
from vitlab.cli.main import main
torch.set_num_threads(1)
from vitlab.engine.loop import Engine
at, step = int(sys.argv[1]), Engine._optimiser_step
def killing(self):
    step(self)
    if self.step == at:
        os.kill(os.getpid(), signal.SIGKILL)
Engine._optimiser_step = killing
sys.exit(main(sys.argv[2:]))
"""

TINY = ["--set", "depth=1", "--set", "embed_dim=16", "--set", "num_heads=2", "--set", "warmup_epochs=0"]
TINY += ["--quiet", "--device", "cpu", "--epochs", "2"]


def killed_at(step: int, argv: list[str]) -> None:
    """Run ``vitlab ARGV`` in a child process SIGKILLed right after optimiser step ``step``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), *sys.path])}
    done = subprocess.run([sys.executable, "-c", KILLED, str(step), *argv], env=env, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]


def state(run: Path) -> dict:
    return torch.load(run / "last" / "state.pt", weights_only=True)


def figures(run: Path) -> list[dict]:
    """The deterministic part of each epoch's record (times left out)."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [
        {k: v for k, v in json.loads(line).items() if k not in ("seconds", "images_per_s", "data_wait")}
        for line in lines
    ]


def assert_same_run(resumed: Path, reference: Path) -> None:
    got, want = state(resumed), state(reference)
    assert got["position"] is None and got["step"] == want["step"]
    assert got["model"].keys() == want["model"].keys()
    for key, value in want["model"].items():
        assert torch.equal(got["model"][key], value), key
    assert got["ema"]["updates"] == want["ema"]["updates"]
    for key, value in want["ema"]["weights"].items():
        assert torch.equal(got["ema"]["weights"][key], value), key
    assert figures(resumed) == figures(reference)


def kill_and_resume(tmp_path, argv: list[str], valid: list[int], capsys, *again: str) -> tuple[Path, Path]:
    """Kill ``vitlab ARGV`` at a step drawn (seeded) from ``valid``, check it stopped inside an epoch and refuses a
    changed setting, resume it (with ``again`` added), and run it uninterrupted: ``(resumed, reference)``."""
    at = random.Random(34).choice(valid)
    run, reference = tmp_path / "run", tmp_path / "reference"
    killed_at(at, [*argv, "--out", str(run)])
    stopped = state(run)
    assert stopped["position"] is not None and stopped["step"] < at, (at, stopped["step"])
    capsys.readouterr()
    assert main([*argv, "--set", "weight_decay=0.1", "--out", str(run), "--resume"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "weight_decay (run has 0.05, given 0.1)" in lines[0], lines
    assert main([*argv, *again, "--out", str(run), "--resume"]) == 0
    said = f"continues epoch {stopped['epoch'] + 1} after its batch {stopped['position']['batch']}"
    assert said in capsys.readouterr().err
    assert main([*argv, "--out", str(reference)]) == 0
    return run, reference


@pytest.mark.slow
def test_in_memory_run_killed_mid_epoch_resumes_to_the_uninterrupted_weights(tmp_path, capsys):
    # 64 rows / 8 = 8 steps an epoch, a commit every 3: steps 3, 6 | 8 (epoch) | 9, 12, 15 | 16 (epoch); a kill
    # at 9 finds the epoch's commit, any other a step's. Erasing (the task's generator), drop-path (torch's), EMA.
    argv = ["train", "--rows", "64", "--batch-size", "8", *TINY, "--set", "drop_path_rate=0.1"]
    argv += ["--set", "ema_decay=0.9", "--set", "checkpoint_every_steps=3"]
    # the cadence may change on resume: it does not change the weights
    again = ["--set", "checkpoint_every_steps=5"]
    run, reference = kill_and_resume(tmp_path, argv, [s for s in range(4, 17) if s != 9], capsys, *again)
    assert_same_run(run, reference)


@pytest.mark.slow
def test_a_run_committing_by_the_clock_resumes_to_the_uninterrupted_weights(tmp_path, capsys):
    # a commit at the first step a microsecond after the last: every step but an epoch's last (8 and 16, whose
    # epoch commit comes instead); a kill after step 9 finds the epoch's commit, after step 1 none
    argv = ["train", "--rows", "64", "--batch-size", "8", *TINY, "--set", "ema_decay=0.9"]
    argv += ["--set", "checkpoint_every_minutes=0.000001"]
    again = ["--set", "checkpoint_every_minutes=0"]
    run, reference = kill_and_resume(tmp_path, argv, [s for s in range(2, 16) if s != 9], capsys, *again)
    assert_same_run(run, reference)


@pytest.mark.slow
def test_streamed_run_killed_mid_epoch_resumes_to_the_uninterrupted_weights(tmp_path, capsys, hue_photos):
    # 24 photos: 18 train / 4 = 5 batches, 2 a step: 3 steps an epoch, a commit at every step inside an epoch;
    # each photo's crop and flip are drawn in a loader worker from (epoch seed, photo)
    photos = tmp_path / "photos"
    hue_photos(photos, 8, 0, sides=(40, 72))
    argv = ["train", "--dataset", "folder", "--data-dir", str(photos), "--image-size", "16", "--loader", "stream"]
    argv += ["--set", "data.workers=1", "--batch-size", "4", "--set", "accumulate=2", "--set", "patch_size=8", *TINY]
    argv += ["--set", "augment.resized_crop=0.5", "--set", "ema_decay=0.9", "--set", "checkpoint_every_steps=1"]
    run, reference = kill_and_resume(tmp_path, argv, [2, 3, 5, 6], capsys)
    assert_same_run(run, reference)


@pytest.mark.parametrize("value", ["-1", "1.5", "x"])
def test_checkpoint_every_steps_out_of_range_is_one_line(value, tmp_path, capsys):
    assert main(["train", "--set", f"checkpoint_every_steps={value}", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "checkpoint_every_steps" in err[0], err


# -- torchrun: two gloo processes -------------------------------------------------------------------

DDP = dict(
    model="vit-digits",
    model_overrides={"depth": 1, "embed_dim": 16, "num_heads": 2, "drop_path_rate": 0.1},
    rows=64,
    epochs=2,
    batch_size=8,
    warmup_epochs=0.0,
    device="cpu",
    checkpoint_every_steps=1,
)  # 64 / (2 ranks x 8) = 4 steps an epoch


def ddp_worker(rank: int, port: int, out: str, kill_at: int, resume: bool) -> None:
    from vitlab.engine.loop import Engine
    from vitlab.tasks import run
    from vitlab.tasks.classify import TrainConfig

    as_torchrun_rank(rank, 2, port)
    if kill_at:
        step = Engine._optimiser_step

        def killing(self):
            step(self)
            if self.step == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

        Engine._optimiser_step = killing
    run("classify", TrainConfig(out_dir=out, resume=resume, **DDP))


@pytest.mark.slow
def test_torchrun_run_killed_mid_epoch_resumes_to_the_uninterrupted_weights(tmp_path):
    run, reference = str(tmp_path / "run"), str(tmp_path / "reference")
    at = random.Random(34).choice([2, 3, 4, 6, 7, 8])  # not 5: the first step after epoch 1's commit
    with pytest.raises(mp.ProcessExitedException):
        mp.spawn(ddp_worker, args=(free_port(), run, at, False), nprocs=2, join=True)
    stopped = state(Path(run))
    assert stopped["position"]["world_size"] == 2 and len(stopped["position"]["ranks"]) == 2
    mp.spawn(ddp_worker, args=(free_port(), run, 0, True), nprocs=2, join=True)
    mp.spawn(ddp_worker, args=(free_port(), reference, 0, False), nprocs=2, join=True)
    got, want = state(Path(run)), state(Path(reference))
    for key, value in want["model"].items():
        assert torch.equal(got["model"][key], value), key  # bit-identical: gloo sums in a fixed order
    assert figures(Path(run)) == figures(Path(reference))
