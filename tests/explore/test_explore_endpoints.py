"""Every endpoint's numbers equal a direct call of the vitlab function behind it."""

import json
import math

import numpy as np
import pytest
import torch

from vitlab.analysis.cost import ATTENTION_COSTS, Workload, attention_cost, flops
from vitlab.data import load_dataset, normalize
from vitlab.explain.maps import gradient_map, head_statistics, occlusion_map, query_attention, rollout_map
from vitlab.explain.record import attention_weights as record_weights
from vitlab.explore import decode_array, encode_array
from vitlab.explore.run_index import Table, rank_table
from vitlab.layers.attention import MultiHeadSelfAttention
from vitlab.ops.patches import num_tokens, patchify
from vitlab.ops.positions import sincos_2d
from vitlab.runs import load_checkpoint


@pytest.fixture(scope="module")
def digits_test():
    return load_dataset("digits").test


@pytest.fixture(scope="module")
def trained(runs_root):
    return load_checkpoint(runs_root / "digits-vit")


def get(client, path, **params):
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_arrays_round_trip_as_float32():
    values = torch.randn(3, 4, 5)
    encoded = encode_array(values)
    assert encoded["shape"] == [3, 4, 5]
    assert np.array_equal(decode_array(encoded), values.numpy())
    assert decode_array(json.loads(json.dumps(encoded))).dtype == np.float32


def test_info_lists_samples_models_and_limits(client, runs_root):
    info = get(client, "/api/info")
    sources = {s["name"]: s for s in info["samples"]}
    assert sources["digits"]["available"] and sources["synthetic"]["available"]
    assert not sources["mnist"]["available"] and "--data-dir" in sources["mnist"]["reason"]
    (model,) = info["models"]
    assert model["model"] == "vit-digits" and model["dataset"] == "digits"
    assert model["grid"] == [4, 4] and model["heads"] == 4 and model["depth"] == 4 and model["attention"]
    assert model["params"] == sum(p.numel() for p in load_checkpoint(runs_root / "digits-vit").model.parameters())


def test_samples_are_the_test_split(client, digits_test):
    page = get(client, "/api/samples/digits", start=5, count=7)
    assert page["total"] == len(digits_test) and page["index"] == list(range(5, 12))
    assert np.array_equal(decode_array(page["images"]), digits_test.images[5:12].numpy())
    assert page["labels"] == [digits_test.classes[int(k)] for k in digits_test.labels[5:12]]


@pytest.mark.parametrize("patch", [1, 2, 3, 4, 8])
def test_tokens_equal_patchify_and_the_cost_model(client, digits_test, patch):
    answer = get(client, "/api/tokens", ref="digits:3", patch=patch)
    image = digits_test.images[3:4]
    expected = patchify(image, patch, pad=True)[0]
    n = num_tokens(8, 8, patch, pad=True)
    assert np.array_equal(decode_array(answer["matrix"]), expected.numpy())
    assert answer["tokens"] == n == expected.shape[0] and answer["token_width"] == patch * patch
    assert answer["grid"] == [math.ceil(8 / patch)] * 2 and answer["padded"] == [math.ceil(8 / patch) * patch] * 2
    assert answer["entries"] == n * n
    assert answer["reference"] == {"image": 28, "patch": 7, "tokens": 16, "entries": 256}
    assert answer["ratio"] == pytest.approx(n * n / 256)


def test_tokens_patch_out_of_range_names_the_range(client):
    response = client.get("/api/tokens", params={"ref": "digits:0", "patch": 9})
    assert response.status_code == 400 and "[1, 8]" in response.json()["error"]


def layer_logits(model, inputs):
    """Each attention layer's pre-softmax scores (B, H, N, N), recomputed from its input."""
    captured = []
    hooks = [
        m.register_forward_pre_hook(lambda mod, args: captured.append((mod, args[0])))
        for m in model.modules()
        if isinstance(m, MultiHeadSelfAttention)
    ]
    with torch.no_grad():
        model(inputs)
        for hook in hooks:
            hook.remove()
        out = []
        for module, x in captured:
            q, k, _ = module.qkv_heads(x)
            out.append(q @ k.transpose(-2, -1) / math.sqrt(module.head_dim))
    return out


@pytest.mark.parametrize("query", ["5", "mean"])
def test_attention_equals_recorded_weights(client, trained, digits_test, query):
    answer = get(client, "/api/attention", model=0, ref="digits:7", query=query)
    inputs = normalize(digits_test.images[7:8], trained.data.mean, trained.data.std)
    logits, weights = record_weights(trained.model, inputs)
    q = int(query) if query.isdigit() else query
    expected = query_attention(weights, q, 0, (4, 4))[0]  # (L, H, 4, 4)
    heat = decode_array(answer["heat"])
    assert heat.shape == (4, 4, 4, 4)
    np.testing.assert_allclose(heat, expected.numpy(), atol=1e-6)
    rows = torch.from_numpy(decode_array(answer["rows"]).copy())
    np.testing.assert_allclose(rows.sum(-1).numpy(), 1.0, atol=1e-5)
    for name, values in head_statistics(rows).items():
        np.testing.assert_allclose(decode_array(answer["stats"][name]), values.numpy(), atol=1e-6)
    assert answer["uniform"] == 1 / 16 and answer["keys"] == 16 and answer["prefix"] == 0
    probs = logits.softmax(-1)[0]
    assert answer["prediction"]["index"] == int(probs.argmax())
    assert answer["prediction"]["confidence"] == pytest.approx(float(probs.max()), abs=1e-6)
    assert np.array_equal(decode_array(answer["image"]), digits_test.images[7].numpy())


@pytest.mark.parametrize("temperature", [0.25, 3.0])
def test_temperature_divides_the_logits(client, trained, digits_test, temperature):
    answer = get(client, "/api/attention", model=0, ref="digits:7", query="2", temperature=temperature)
    inputs = normalize(digits_test.images[7:8], trained.data.mean, trained.data.std)
    expected = torch.stack([(s / temperature).softmax(-1)[0, :, 2] for s in layer_logits(trained.model, inputs)])
    np.testing.assert_allclose(decode_array(answer["rows"]), expected.numpy(), atol=1e-5)
    plain = get(client, "/api/attention", model=0, ref="digits:7", query="2")
    spread = decode_array(answer["stats"]["spread"]).mean(), decode_array(plain["stats"]["spread"]).mean()
    assert (spread[0] > spread[1]) == (temperature < 1)


def test_maps_equal_the_explain_functions(client, trained, digits_test):
    answer = get(client, "/api/maps", model=0, ref="digits:7", query="5")
    inputs = normalize(digits_test.images[7:8], trained.data.mean, trained.data.std)
    logits, weights = record_weights(trained.model, inputs)
    target = logits.argmax(-1)
    expected = {
        "rollout": rollout_map(weights, 5, 0, (4, 4)),
        "gradient": gradient_map(trained.model, inputs, target),
        "occlusion": occlusion_map(trained.model, inputs, target),
    }
    assert set(answer["maps"]) == set(expected)
    for method, values in expected.items():
        got = decode_array(answer["maps"][method]["values"])
        np.testing.assert_allclose(got, values[0].numpy(), atol=1e-5)
        assert answer["maps"][method]["range"] == pytest.approx([float(values.min()), float(values.max())], abs=1e-5)
    assert answer["target"] == trained.data.classes[int(target)]


def test_class_token_query_on_a_mean_pooled_model_is_refused(client):
    response = client.get("/api/attention", params={"model": 0, "ref": "digits:0", "query": "cls"})
    assert response.status_code == 400 and "class token" in response.json()["error"]


def test_softmax_mechanics(client):
    answer = get(client, "/api/mechanics/softmax", temperature=0.5)
    scores, weights = (torch.from_numpy(decode_array(answer[k]).copy()) for k in ("scores", "weights"))
    np.testing.assert_allclose(weights.numpy(), (scores / 0.5).softmax(-1).numpy(), atol=1e-6)
    assert answer["uniform"] == 1 / 16 and answer["stats"]["max"] == pytest.approx(float(weights.max()))
    sharp = get(client, "/api/mechanics/softmax", temperature=0.01)["stats"]["max"]
    flat = get(client, "/api/mechanics/softmax", temperature=100)["stats"]["max"]
    assert sharp > 0.99 and flat == pytest.approx(1 / 16, abs=2e-3)


def test_mixing_is_row_stochastic_from_local_to_global(client):
    answer = get(client, "/api/mechanics/mixing", bandwidth=1.5, tokens=20)
    mixing, values = decode_array(answer["matrix"]), decode_array(answer["values"])
    np.testing.assert_allclose(mixing.sum(1), 1.0, atol=1e-6)
    np.testing.assert_allclose(decode_array(answer["mixed"]), mixing @ values, atol=1e-5)
    i = np.arange(20)
    kernel = np.exp(-((i[:, None] - i[None]) ** 2) / (2 * 1.5**2))
    np.testing.assert_allclose(mixing, kernel / kernel.sum(1, keepdims=True), atol=1e-6)
    local = get(client, "/api/mechanics/mixing", bandwidth=0.1, tokens=20)
    wide = get(client, "/api/mechanics/mixing", bandwidth=500, tokens=20)
    assert local["mean_reach"] == pytest.approx(1.0, abs=1e-3) and wide["mean_reach"] == pytest.approx(20, abs=1e-2)


def cosine(table):
    unit = torch.nn.functional.normalize(table.double(), dim=-1)
    return (unit @ unit.T).numpy()


def test_positions_sincos_learned_and_random(client, trained):
    answer = get(client, "/api/mechanics/positions", kind="sincos", grid=6, dim=32, base=100, reference=7)
    expected = cosine(sincos_2d((6, 6), 32, temperature=100))
    np.testing.assert_allclose(decode_array(answer["similarity"]), expected, atol=1e-6)
    np.testing.assert_allclose(decode_array(answer["reference_map"]), expected[7].reshape(6, 6), atol=1e-6)
    learned = get(client, "/api/mechanics/positions", kind="learned", model=0, reference=3)
    table = trained.model.pos_embed.table((4, 4))[0].detach()
    np.testing.assert_allclose(decode_array(learned["similarity"]), cosine(table), atol=1e-6)
    assert learned["grid"] == [4, 4] and learned["dim"] == 64
    noise = get(client, "/api/mechanics/positions", kind="random", grid=8, dim=256)
    assert abs(noise["all_pairs"]) < 0.05 < answer["adjacent"]
    response = client.get("/api/mechanics/positions", params={"kind": "learned"})
    assert response.status_code == 400 and "checkpoint" in response.json()["error"]


def test_cost_equals_the_cost_model(client):
    answer = get(client, "/api/cost", patch=16, dim=192, heads=3, depth=12, max_image=1024)
    assert answer["kinds"] == list(ATTENTION_COSTS)
    assert answer["images"] == [16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]
    for kind in ATTENTION_COSTS:
        for i, side in enumerate(answer["images"]):
            work = Workload(image=side, patch=16, dim=192, heads=3, depth=12)
            assert answer["tokens"][i] == work.tokens
            assert answer["series"][kind]["entries"][i] == attention_cost(work, kind).entries
            assert answer["series"][kind]["memory"][i] == attention_cost(work, kind).memory
            assert answer["series"][kind]["flops"][i] == flops(work, kind)["total"]


def test_runs_overview_and_ranking(client, runs_root):
    answer = get(client, "/api/runs", sort="best_val_acc")
    kinds = {r["name"]: r["kind"] for r in answer["runs"]}
    assert kinds == {"digits-vit": "train", "prompt": "train", "study": "compare"}
    table = answer["table"]
    assert table["sort"] == {"by": "best_val_acc", "descending": True}
    values = [r["values"]["best_val_acc"] for r in table["rows"]]
    assert values[:2] == sorted(values[:2], reverse=True) and values[2] is None  # the promptable run has no accuracy
    assert [r["rank"] for r in table["rows"]] == [1, 2, 3]
    summary = json.loads((runs_root / "digits-vit" / "summary.json").read_text())
    train_row = next(r["values"] for r in table["rows"] if r["values"]["run"] == "digits-vit")
    assert train_row["best_val_acc"] == summary["best_val_acc"] and train_row["test_acc"] == summary["test"]["acc"]
    assert table["extremes"]["max"]["value"] == max(values[:2]) and table["rows"][0]["bar"] == 1.0
    ascending = get(client, "/api/runs", sort="best_val_acc", descending="false")["table"]
    ranked = [r["values"]["run"] for r in table["rows"]]
    assert [r["values"]["run"] for r in ascending["rows"]] == [*ranked[:2][::-1], "prompt"]  # missing values last


def test_train_run_detail(client, runs_root):
    answer = get(client, "/api/runs/digits-vit", sort="val_loss", descending="false")
    epochs = [json.loads(line) for line in (runs_root / "digits-vit" / "metrics.jsonl").read_text().splitlines()]
    rows = [r["values"] for r in answer["table"]["rows"]]
    assert sorted(rows, key=lambda r: r["epoch"]) == epochs
    assert [r["val_loss"] for r in rows] == sorted(e["val_loss"] for e in epochs)
    accuracy = answer["curves"][0]
    assert [s["y"] for s in accuracy["series"]] == [[e["train_acc"] for e in epochs], [e["val_acc"] for e in epochs]]
    assert (
        answer["facts"]["summary"]["best_val_acc"]
        == json.loads((runs_root / "digits-vit" / "summary.json").read_text())["best_val_acc"]
    )


def test_compare_study_detail_and_figures(client, runs_root):
    answer = get(client, "/api/runs/study", sort="params")
    results = json.loads((runs_root / "study" / "results.json").read_text())
    rows = {r["values"]["label"]: r["values"] for r in answer["table"]["rows"]}
    assert set(rows) == {r["label"] for r in results["runs"]}
    for record in results["runs"]:
        for key in ("params", "best_val_acc", "gap", "test_acc"):
            assert rows[record["label"]][key] == record[key]
    assert answer["facts"]["conclusions"] == results["conclusions"]
    assert set(answer["figures"]) == {p.name for p in (runs_root / "study").glob("*.png")} != set()
    assert answer["report"] == (runs_root / "study" / "report.md").read_text()
    figure = client.get(f"/api/runs/study/figures/{answer['figures'][0]}")
    assert figure.status_code == 200 and figure.content[:8] == b"\x89PNG\r\n\x1a\n"


def test_rank_table_puts_missing_values_last_and_ranks_text_alphabetically():
    table = Table(
        ["name", "score"],
        [
            {"name": "b", "score": 2.0},
            {"name": "a", "score": None},
            {"name": "c", "score": 5.0},
            {"name": "d", "score": 2.0},
        ],
        "name",
    )
    ranked = rank_table(table, "score")
    assert [r["values"]["name"] for r in ranked["rows"]] == ["c", "b", "d", "a"]
    assert [r["bar"] for r in ranked["rows"]] == [1.0, 0.4, 0.4, None]  # from zero: the lowest has its bar
    assert ranked["extremes"] == {"min": {"value": 2.0, "row": "b"}, "max": {"value": 5.0, "row": "c"}}
    assert [r["values"]["name"] for r in rank_table(table)["rows"]] == ["a", "b", "c", "d"]
    with pytest.raises(ValueError, match="score"):
        rank_table(table, "speed")
