"""The NumPy oracle on its own: torch-free, and each listing against an independent computation."""

import ast
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vitlab.reference as ref
from vitlab import create_model

REFERENCE_DIR = Path(ref.__file__).parent

# Runs in a fresh interpreter: load the folder as a standalone package (the parent package
# `vitlab` imports torch), run a whole forward pass, and prove torch never got loaded.
STANDALONE = """
import importlib.util, json, sys
import numpy as np
folder, arrays, config, out = sys.argv[1:]
spec = importlib.util.spec_from_file_location("reference", folder + "/__init__.py",
                                              submodule_search_locations=[folder])
reference = importlib.util.module_from_spec(spec)
sys.modules["reference"] = reference
spec.loader.exec_module(reference)
data = np.load(arrays)
state = {k: data[k] for k in data.files if k != "images"}
params = reference.params_from_state_dict(state, json.load(open(config)))
np.save(out, reference.vit_forward(data["images"], params)[0])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "vitlab"))
assert not loaded, loaded
"""


def test_reference_runs_without_torch(tmp_path):
    model = create_model("vit-seed", depth=1).double().eval()
    images = torch.randn(2, 1, 28, 28, dtype=torch.float64)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    np.savez(tmp_path / "arrays.npz", images=images.permute(0, 2, 3, 1).numpy(), **state)
    (tmp_path / "config.json").write_text(json.dumps(model.config.to_dict()))
    subprocess.run(
        [
            sys.executable,
            "-c",
            STANDALONE,
            str(REFERENCE_DIR),
            str(tmp_path / "arrays.npz"),
            str(tmp_path / "config.json"),
            str(tmp_path / "logits.npy"),
        ],
        check=True,
    )
    with torch.no_grad():
        expected = model(images).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "logits.npy"), expected, rtol=0, atol=1e-10)


def test_reference_imports_only_numpy_and_stdlib():
    allowed = {"__future__", "collections", "math", "typing", "numpy"}
    for path in REFERENCE_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                names = set() if node.level else {node.module.split(".")[0]}
            else:
                continue
            assert names <= allowed, f"{path.name} imports {names - allowed}"


def test_softmax_is_stable_and_row_stochastic():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1e4, 0.0, 1e4]])
    w = ref.softmax(x)
    assert np.isfinite(w).all()
    np.testing.assert_allclose(w.sum(axis=-1), 1.0)
    np.testing.assert_allclose(w[0], ref.softmax(x[0] - 1000.0))  # shift invariance


def test_layer_norm_and_gelu_match_torch():
    x = np.random.default_rng(0).normal(size=(2, 5, 8)) * 3 + 1
    gamma, beta = np.linspace(0.5, 2, 8), np.linspace(-1, 1, 8)
    expected = F.layer_norm(torch.from_numpy(x), (8,), torch.from_numpy(gamma), torch.from_numpy(beta), eps=1e-6)
    np.testing.assert_allclose(ref.layer_norm(x, gamma, beta), expected.numpy(), atol=1e-12)
    np.testing.assert_allclose(ref.gelu(x), F.gelu(torch.from_numpy(x)).numpy(), atol=1e-12)
    # x*Phi(x) - (-x)*Phi(-x) = x: the exact (erf) form, not the tanh approximation
    np.testing.assert_allclose(ref.gelu(x) - ref.gelu(-x), x, atol=1e-12)


def test_heads_split_and_combine_are_inverse():
    x = np.random.default_rng(1).normal(size=(2, 5, 12))
    heads = ref.split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    np.testing.assert_array_equal(heads[:, 1], x[:, :, 4:8])  # head h owns columns h*d:(h+1)*d
    np.testing.assert_array_equal(ref.combine_heads(heads), x)
    with pytest.raises(ValueError, match="12 is not divisible by num_heads=5"):
        ref.split_heads(x, 5)


def test_attention_single_head_is_the_textbook_formula():
    rng = np.random.default_rng(2)
    x, wq, wk, wv, wo = rng.normal(size=(1, 6, 4)), *rng.normal(size=(4, 4, 4))
    out, weights = ref.multihead_self_attention(x, wq, wk, wv, wo, num_heads=1)
    q, k, v = x[0] @ wq, x[0] @ wk, x[0] @ wv
    scores = q @ k.T / 2.0
    a = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(weights[0, 0], a, atol=1e-12)
    np.testing.assert_allclose(out[0], a @ v @ wo, atol=1e-12)


def test_linear_embedding_is_the_strided_convolution():
    """Exercise 31.3: a linear map on flattened patches is a PxP convolution with stride P."""
    rng = np.random.default_rng(3)
    images, kernel, bias = rng.normal(size=(2, 6, 9, 2)), rng.normal(size=(3, 3, 2, 5)), rng.normal(size=5)
    conv = ref.conv2d_strided(images, kernel, bias, stride=3)
    linear = ref.linear_patch_embedding(ref.patchify(images, 3), kernel.reshape(-1, 5), bias)
    assert conv.shape == (2, 2, 3, 5)
    np.testing.assert_allclose(conv.reshape(2, 6, 5), linear, atol=1e-12)


def test_sincos_tables():
    t1 = ref.sincos_1d(7, 8)
    np.testing.assert_allclose(t1[:, :4] ** 2 + t1[:, 4:] ** 2, 1.0)  # each frequency is a unit circle
    np.testing.assert_allclose(t1[3, 1], math.sin(3 * 10000 ** (-1 / 4)))
    t2 = ref.sincos_2d((3, 4), 8)
    for r in range(3):
        for c in range(4):
            np.testing.assert_array_equal(
                t2[r * 4 + c], np.concatenate([ref.sincos_1d(3, 4)[r], ref.sincos_1d(4, 4)[c]])
            )


def test_row_column_positions_and_prefix():
    rng = np.random.default_rng(4)
    tokens, row, col = rng.normal(size=(2, 6, 3)), rng.normal(size=(2, 3)), rng.normal(size=(3, 3))
    out = ref.add_2d_position(tokens, (2, 3), row, col)
    for r in range(2):
        for c in range(3):
            np.testing.assert_allclose(out[:, r * 3 + c], tokens[:, r * 3 + c] + row[r] + col[c])
    prefix = rng.normal(size=(2, 3))
    seq = ref.prepend_tokens(tokens, prefix)
    assert seq.shape == (2, 8, 3)
    np.testing.assert_array_equal(seq[1, :2], prefix)
    np.testing.assert_array_equal(ref.pool_sequence(seq, "token", 2), seq[:, 0])
    np.testing.assert_allclose(ref.pool_sequence(seq, "mean", 2), tokens.mean(axis=1))


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(pos_embed="rope"), "rope"),
        (dict(block="postnorm"), "postnorm"),
        (dict(layer_scale=0.1), "ls1.gamma"),
        (dict(qk_norm=True), "q_norm"),
    ],
)
def test_params_from_state_dict_refuses_what_it_would_get_wrong(overrides, match):
    model = create_model("vit-seed", depth=1, **overrides)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=match):
        ref.params_from_state_dict(state, model.config.to_dict())


def test_params_from_state_dict_needs_the_matching_state_dict():
    model = create_model("vit-seed", depth=1)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match="no 'blocks.1.attn.qkv.weight': pass the state dict"):
        ref.params_from_state_dict(state, {**model.config.to_dict(), "depth": 2})
