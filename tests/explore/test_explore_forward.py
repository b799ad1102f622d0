"""The forward-pass view's numbers are the model's own (forward hooks on the real modules, to 1e-5);
a knocked-out head or layer gives the prediction of the model with that part zeroed; the layer-by-layer
view is rollout's own arithmetic."""

import copy
import math

import numpy as np
import pytest
import torch

from vitlab.data import load_dataset, normalize
from vitlab.explain.maps import query_rows, rollout_matrix, to_grid
from vitlab.explain.record import attention_weights
from vitlab.explore import decode_array
from vitlab.runs import load_checkpoint


@pytest.fixture(scope="module")
def trained(runs_root):
    return load_checkpoint(runs_root / "digits-vit")


@pytest.fixture(scope="module")
def inputs(trained):
    image = load_dataset("digits").test.images[7:8]
    return normalize(image, trained.data.mean, trained.data.std)


def get(client, path, **params):
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def hooked(model, inputs, layer):
    """The model's own tensors by forward hooks: the qkv projection of block ``layer`` (q, k, v per head),
    its input and output, the patch embedding and the positioned tokens, and the logits."""
    seen = {}
    block = model.blocks[layer]
    hooks = [
        block.attn.qkv.register_forward_hook(lambda m, a, out: seen.__setitem__("qkv", out)),
        block.register_forward_pre_hook(lambda m, a: seen.__setitem__("input", a[0])),
        block.register_forward_hook(lambda m, a, out: seen.__setitem__("output", out)),
        model.patch_embed.register_forward_hook(lambda m, a, out: seen.__setitem__("embedded", out)),
        model.pos_embed.register_forward_hook(lambda m, a, out: seen.__setitem__("positioned", out)),
    ]
    with torch.no_grad():
        seen["logits"] = model(inputs)
    for hook in hooks:
        hook.remove()
    heads = block.attn.num_heads
    q, k, v = seen["qkv"].unflatten(-1, (3, heads, -1)).permute(2, 0, 3, 1, 4)  # (1, H, N, d) each
    return seen, q, k, v


@pytest.mark.parametrize(("query", "layer", "head"), [("5", 0, 0), ("0", 2, 3), ("15", 3, 1)])
def test_every_stage_is_the_models_own(client, trained, inputs, query, layer, head):
    answer = get(client, "/api/forward", model=0, ref="digits:7", query=query, layer=layer, head=head)
    seen, q, k, v = hooked(trained.model, inputs, layer)
    token = int(query)
    _, weights = attention_weights(trained.model, inputs)

    def close(name, expected):
        np.testing.assert_allclose(decode_array(answer[name]), expected.numpy(), atol=1e-5, err_msg=name)

    close("q", q[0, head, token])
    close("k", k[0, head])
    close("v", v[0, head])
    close("scores", q[0, head, token] @ k[0, head].T / math.sqrt(q.shape[-1]))
    close("weights", weights[layer][0, head, token])
    close("model_weights", weights[layer][0, head, token])
    close("head_output", weights[layer][0, head, token] @ v[0, head])
    close("block_input", seen["input"][0, token])
    close("block_output", seen["output"][0, token])
    embedding = answer["embedding"]
    np.testing.assert_allclose(decode_array(embedding["embedded"]), seen["embedded"][0, token].numpy(), atol=1e-6)
    np.testing.assert_allclose(
        decode_array(embedding["position"]), trained.model.pos_embed.weight[0, token].detach().numpy(), atol=1e-6
    )
    weight = decode_array(embedding["weight"])  # (D, P*P*C) acting on the normalised patch
    projected = weight @ decode_array(embedding["normalised"]) + decode_array(embedding["bias"])
    np.testing.assert_allclose(projected, seen["embedded"][0, token].numpy(), atol=1e-5)
    probs = seen["logits"].softmax(-1)[0]
    np.testing.assert_allclose(answer["prediction"]["probabilities"], probs.numpy(), atol=1e-5)
    assert answer["prediction"]["class"] == answer["original"]["class"]
    assert "√d_k = q·k / √16" in answer["scale"]


def zeroed_head(model, layer, head):
    """A copy of ``model`` whose head ``head`` of block ``layer`` gives 0: its value projection zeroed."""
    copied = copy.deepcopy(model)
    attn = copied.blocks[layer].attn
    dim, d = attn.qkv.in_features, attn.head_dim
    rows = slice(2 * dim + head * d, 2 * dim + (head + 1) * d)
    with torch.no_grad():
        attn.qkv.weight[rows] = 0
        attn.qkv.bias[rows] = 0
    return copied


def test_knocking_out_a_head_gives_the_model_with_that_head_zeroed(client, trained, inputs):
    answer = get(client, "/api/forward", model=0, ref="digits:7", query="5", layer=1, head=2, knockout="head")
    with torch.no_grad():
        expected = zeroed_head(trained.model, 1, 2)(inputs).softmax(-1)[0]
        original = trained.model(inputs).softmax(-1)[0]
    np.testing.assert_allclose(answer["prediction"]["probabilities"], expected.numpy(), atol=1e-5)
    np.testing.assert_allclose(answer["original"]["probabilities"], original.numpy(), atol=1e-5)
    assert not np.allclose(expected.numpy(), original.numpy(), atol=1e-4)  # the bars move
    assert np.all(decode_array(answer["head_output"]) == 0)


def test_knocking_out_a_layers_attention_leaves_only_the_residual(client, trained, inputs):
    answer = get(client, "/api/forward", model=0, ref="digits:7", query="5", layer=0, head=0, knockout="layer")
    copied = copy.deepcopy(trained.model)
    with torch.no_grad():
        copied.blocks[0].attn.proj.weight.zero_()
        copied.blocks[0].attn.proj.bias.zero_()
        expected = copied(inputs).softmax(-1)[0]
    np.testing.assert_allclose(answer["prediction"]["probabilities"], expected.numpy(), atol=1e-5)
    np.testing.assert_allclose(decode_array(answer["residual"]), decode_array(answer["block_input"]), atol=1e-6)


def test_the_temperature_re_runs_the_head_at_that_temperature(client, trained, inputs):
    sharp = get(client, "/api/forward", model=0, ref="digits:7", query="3", layer=3, head=0, temperature=0.2)
    scores = torch.from_numpy(decode_array(sharp["scores"]).copy())
    np.testing.assert_allclose(decode_array(sharp["weights"]), (scores / 0.2).softmax(-1).numpy(), atol=1e-6)
    np.testing.assert_allclose(decode_array(sharp["model_weights"]), scores.softmax(-1).numpy(), atol=1e-6)
    assert sharp["prediction"]["probabilities"] != sharp["original"]["probabilities"]


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"query": "16"}, "patch index in [0, 16)"),
        ({"query": "cls"}, "no class token"),
        ({"layer": 4}, "layer must lie in [0, 4)"),
        ({"head": -1}, "head must lie in [0, 4)"),
        ({"knockout": "all"}, "knockout must be one of"),
        ({"temperature": 0}, "temperature must lie in"),
    ],
)
def test_bad_probes_are_refused_in_one_line(client, params, words):
    response = client.get("/api/forward", params={"model": 0, "ref": "digits:7", **params})
    assert response.status_code == 400 and words in response.json()["error"]


def test_layer_by_layer_is_rollouts_own_arithmetic(client, trained, inputs):
    answer = get(client, "/api/layers", model=0, ref="digits:7", query="6")
    _, weights = attention_weights(trained.model, inputs)
    raw, rollout = decode_array(answer["kinds"]["raw"]), decode_array(answer["kinds"]["rollout"])
    for layer in range(4):
        mean = weights[layer].mean(1)
        np.testing.assert_allclose(raw[layer], to_grid(query_rows(mean, 6, 0), 0, (4, 4))[0].numpy(), atol=1e-6)
        expected = to_grid(query_rows(rollout_matrix(weights[: layer + 1]), 6, 0), 0, (4, 4))[0]
        np.testing.assert_allclose(rollout[layer], expected.numpy(), atol=1e-6)
    mixed = decode_array(answer["kinds"]["mixed"])
    np.testing.assert_allclose(mixed.reshape(4, -1).sum(-1), 1.0, atol=1e-5)  # no prefix tokens: rows sum to 1
    assert answer["max"] == pytest.approx(max(float(v.max()) for v in (raw, mixed, rollout)))


def test_mean_attention_distance_is_the_weighted_distance_between_patches(client, trained, inputs):
    answer = get(client, "/api/attention", model=0, ref="digits:7")
    _, weights = attention_weights(trained.model, inputs)
    cells = torch.tensor([(r, c) for r in range(4) for c in range(4)], dtype=torch.float64)
    distance = torch.cdist(cells, cells)
    expected = torch.stack([(w[0].double() * distance).sum(-1).mean(-1) for w in weights])
    np.testing.assert_allclose(decode_array(answer["distance"]), expected.numpy(), atol=1e-5)
