"""``compile``: a run through ``torch.compile`` has the eager run's losses, weights and names, and
``--compile`` on evaluate / predict scores as eager."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.models import build_registered
from vitlab.runs import DataConfig, save_checkpoint
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig

TINY = {"depth": 1, "embed_dim": 32, "num_heads": 2}


@pytest.fixture(scope="module", autouse=True)
def inductor():
    """Skip where inductor cannot build a kernel (no C++ compiler); forget compiled graphs after."""
    try:
        torch.compile(lambda x: x * 2 + 1)(torch.ones(3))
    except Exception as err:  # torch raises many kinds here (BackendCompilerFailed, CalledProcessError, ...)
        pytest.skip(f"torch.compile cannot compile here: {type(err).__name__}: {str(err).splitlines()[0][:200]}")
    yield
    torch._dynamo.reset()


@pytest.mark.slow
def test_compiled_run_has_the_eager_losses():
    config = dict(model_overrides=TINY, rows=128, epochs=2, batch_size=32, augment="none", warmup_epochs=0.0)
    eager = run("classify", TrainConfig(**config))
    compiled = run("classify", TrainConfig(**config, compile=True))
    for a, b in zip(eager.history, compiled.history, strict=True):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-4)
        assert b["val_loss"] == pytest.approx(a["val_loss"], rel=1e-4)
    state = compiled.model.state_dict()
    assert state.keys() == eager.model.state_dict().keys()  # no `_orig_mod.` prefix
    for key, value in eager.model.state_dict().items():
        assert torch.allclose(state[key], value, atol=1e-4), key


@pytest.mark.slow
def test_evaluate_and_predict_compile_to_the_same_scores(tmp_path, capsys):
    torch.manual_seed(1)
    data = DataConfig((8, 8), 1, (0.3,), (0.2,), [str(i) for i in range(10)], dataset="digits")
    path = save_checkpoint(build_registered("vit-digits", **TINY), tmp_path / "model.safetensors", "classifier", data)
    pixels = np.random.default_rng(0).integers(0, 256, (8, 8), dtype=np.uint8)
    Image.fromarray(pixels, mode="L").save(tmp_path / "digit.png")
    scores = {}
    for flags in ([], ["--compile"]):
        assert main(["evaluate", str(path), "--out", str(tmp_path / f"eval{len(flags)}"), *flags]) == 0
        capsys.readouterr()
        assert main(["predict", str(path), str(tmp_path / "digit.png"), "--json", *flags]) == 0
        (entry,) = json.loads(capsys.readouterr().out)
        metrics = json.loads((tmp_path / f"eval{len(flags)}" / "metrics.json").read_text())
        scores[bool(flags)] = (metrics["accuracy"], metrics["nll"], [t["probability"] for t in entry["top"]])
    assert scores[True][0] == scores[False][0] and scores[True][1] == pytest.approx(scores[False][1], abs=1e-5)
    assert scores[True][2] == pytest.approx(scores[False][2], abs=1e-5)
