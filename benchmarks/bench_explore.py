"""`vitlab explore` latency: every interaction's request, the page's own drawing, and the first page load.

The Forward page (one query's forward pass, knock-outs) has its own targets: each of its requests answered
in at most 50 ms, each of its interactions drawn in at most 100 ms (90th percentiles, vit-digits).

    python benchmarks/bench_explore.py                       # trains the digits and promptable models first (~30 s)
    python benchmarks/bench_explore.py --checkpoint runs/digits --runs runs

The app is served by uvicorn on 127.0.0.1 in this process and requested over HTTP (stdlib urllib),
as the browser does. Each interaction is repeated ``--repeats`` times with its parameter varied the
way a user varies it (the next patch size, the next query patch, the next image...), and the median
and 90th percentile are printed. In headless Chromium, the page's side is timed too: from a slider's
input to its figures drawn (request, decoding, canvases, colour bars, overlays), and from hovering a
patch to every linked view lit (no request). The first page load opens a fresh page (cold cache) on
the explorer and waits until the Tokens page has drawn its first answer. Targets: under 100 ms per
interaction, under 1 s for the first load.

There is no peer to compare against in the same process: no other ViT library ships an explorer.
Prints one JSON line per measurement, then a summary line.

``--photo224`` times a real-size photo model instead: a randomly initialised ViT of vit_tiny's shape
(vit-tiny-patch16-224: 196 patches, 12 blocks of 3 heads) read as a timm model is (bicubic, centre crop 0.875),
on a generated folder of 6 classes of 200-400 px photos. A query click (the Attention page's request with the image
analysed once) must answer in at most 1 s. The Limits page's panels of maps and curves, and the Attention page's
maps, are asked for in pieces (one map, or one deletion curve, a request) and filled in as they arrive: each piece,
requested as the page requests it on an image not seen before, must answer in at most 15 s. In Chromium, the time
from opening each page to its first map (or curve) drawn and to every panel filled is printed too. Run it with
``--threads 2``; the load average is printed with the figures (the machine may be shared)::

    python benchmarks/bench_explore.py --photo224 --threads 2 --repeats 3
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import shutil
import statistics
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from vitlab import __version__
from vitlab.experiments import CompareConfig, run_compare
from vitlab.explore import ExploreConfig, create_app, serve_in_background
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig
from vitlab.tasks.promptable import PromptableTrainConfig

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INTERACTION_MS, FIRST_LOAD_MS = 100.0, 1000.0
FORWARD_SERVER_MS = 50.0  # each request of the Forward page, answered (the page's own target: 100 ms to pixels)


def make_runs(root: Path) -> Path:
    """Train the digits model (vit-digits, 10 epochs), a promptable model of the default size (one epoch
    on 200 shapes: its latency does not depend on how well it learned) and a small compare study under
    ``root``."""
    run("classify", TrainConfig(model="vit-digits", epochs=10, device="cpu", out_dir=str(root / "digits")))
    run("promptable", PromptableTrainConfig(count=200, epochs=1, device="cpu", out_dir=str(root / "prompt")))
    run_compare(
        CompareConfig(
            name="study",
            rows=[300],
            patches=[2, 4],
            augment=["none"],
            epochs=3,
            device="cpu",
            out_dir=str(root / "study"),
        )
    )
    return root / "digits"


def request_ms(base: str, path: str, params: dict) -> float:
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    start = time.perf_counter()
    with urllib.request.urlopen(url) as response:
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{url} answered {response.status}")
    return (time.perf_counter() - start) * 1000


def upload(base: str, side: int = 224) -> str:
    """Upload a random ``side x side`` RGB PNG as the page does (multipart, same origin); its image reference."""
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)).save(buffer, "PNG")
    boundary = "vitlab-bench"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.png"\r\n'
        f"Content-Type: image/png\r\n\r\n"
    )
    body = head.encode() + buffer.getvalue() + f"\r\n--{boundary}--\r\n".encode()
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}", "Origin": base}
    with urllib.request.urlopen(urllib.request.Request(base + "/api/uploads", data=body, headers=headers)) as response:
        return json.loads(response.read())["ref"]


def interactions(runs: list[str], prompt: str | None, uploaded: str) -> dict[str, tuple[str, callable]]:
    """name -> (path, i -> params of the i-th request); the Segment page's with promptable run ``prompt``
    (when there is one) on its held-out images and on the ``uploaded`` image."""
    sort_keys = ["best_val_acc", "test_acc", "params", "seconds", "run"]
    segment = f"/api/prompt/runs/{prompt}/segment"
    prompts = {
        "segment: click a point on a held-out shape": (
            segment,
            lambda i: {"ref": f"held-out:{i % 24}", "points": f"{8 + 3 * (i % 16)},{30 + i % 20}"},
        ),
        "segment: drag a box": (
            segment,
            lambda i: {"ref": "held-out:3", "box": f"{i % 20},{5 + i % 9},50,{40 + i % 20}"},
        ),
        "segment: a point on an upload-sized image (224 px)": (
            segment,
            lambda i: {"ref": uploaded, "points": f"{10 + 7 * (i % 30)},{100 + i % 50}"},
        ),
    }
    forward = {
        "forward: click a patch": (
            "/api/forward",
            lambda i: {"model": 0, "ref": "digits:0", "query": i % 16, "image": "false"},
        ),
        "forward: choose a block and head": (
            "/api/forward",
            lambda i: {
                "model": 0,
                "ref": "digits:0",
                "query": 5,
                "layer": i % 4,
                "head": (i // 4) % 4,
                "image": "false",
            },
        ),
        "forward: move the temperature": (
            "/api/forward",
            lambda i: {
                "model": 0,
                "ref": "digits:0",
                "query": 5,
                "temperature": round(0.1 + 0.1 * i, 2),
                "image": "false",
            },
        ),
        "forward: knock out a head": (
            "/api/forward",
            lambda i: {"model": 0, "ref": "digits:0", "query": 5, "head": i % 4, "knockout": "head", "image": "false"},
        ),
        "forward: knock out a block's attention": (
            "/api/forward",
            lambda i: {
                "model": 0,
                "ref": "digits:0",
                "query": 5,
                "layer": i % 4,
                "knockout": "layer",
                "image": "false",
            },
        ),
        "forward: another image": (
            "/api/forward",
            lambda i: {"model": 0, "ref": f"digits:{(120 + 3 * i) % 260}", "query": 5},
        ),
    }
    limits = {
        "attention: layer by layer, new image": (
            "/api/layers",
            lambda i: {"model": 0, "ref": f"digits:{(130 + 3 * i) % 260}"},
        ),
        "limits: maps of a new image": (
            "/api/limits/maps",
            lambda i: {"model": 0, "ref": f"digits:{(140 + 3 * i) % 260}"},
        ),
        "limits: random weights' maps, new image": (
            "/api/limits/randomised",
            lambda i: {"model": 0, "ref": f"digits:{100 + i}"},
        ),
        "limits: deletion curves, new image": (
            "/api/limits/deletion",
            lambda i: {"model": 0, "ref": f"digits:{50 + i}"},
        ),
    }
    return {
        **forward,
        **limits,
        "tokens: move the patch slider": ("/api/tokens", lambda i: {"ref": "digits:0", "patch": 1 + i % 8}),
        "tokens: pick another sample": ("/api/tokens", lambda i: {"ref": f"digits:{i}", "patch": 2}),
        "attention: click a patch": ("/api/attention", lambda i: {"model": 0, "ref": "digits:0", "query": i % 16}),
        "attention: move the temperature": (
            "/api/attention",
            lambda i: {"model": 0, "ref": "digits:0", "query": 5, "temperature": round(0.1 + 0.1 * i, 2)},
        ),
        "attention: pick another image": ("/api/attention", lambda i: {"model": 0, "ref": f"digits:{100 + i}"}),
        "attention: invert the image": (
            "/api/attention",
            lambda i: {"model": 0, "ref": f"digits:{50 + i}", "invert": "true"},
        ),
        "maps: rollout, gradient, occlusion of a new image": (
            "/api/maps",
            lambda i: {"model": 0, "ref": f"digits:{200 + i}"},
        ),
        "mechanics: softmax temperature": (
            "/api/mechanics/softmax",
            lambda i: {"temperature": round(0.1 + 0.1 * i, 2)},
        ),
        "mechanics: mixing bandwidth": ("/api/mechanics/mixing", lambda i: {"bandwidth": round(0.2 + 0.3 * i, 2)}),
        "mechanics: sinusoidal positions": (
            "/api/mechanics/positions",
            lambda i: {"kind": "sincos", "grid": 8, "base": 10 + 100 * i},
        ),
        "mechanics: learned positions": (
            "/api/mechanics/positions",
            lambda i: {"kind": "learned", "model": 0, "reference": i % 16},
        ),
        "mechanics: 1-D position dot products": (
            "/api/mechanics/position-dots",
            lambda i: {"scale": round(0.1 * 1.2**i, 3), "positions": 32 + 8 * (i % 4)},
        ),
        "mechanics: synthetic local attention": (
            "/api/mechanics/local",
            lambda i: {"grid": 14, "sigma": round(0.5 + 0.2 * i, 2), "query": i % 196},
        ),
        **(prompts if prompt else {}),
        "cost: change the patch": ("/api/cost", lambda i: {"patch": (4, 8, 14, 16, 32)[i % 5]}),
        "runs: rank the overview": ("/api/runs", lambda i: {"sort": sort_keys[i % 5]}),
        "runs: open a run and rank it": (f"/api/runs/{runs[0]}", lambda i: {"sort": "val_acc" if i % 2 else "epoch"}),
    }


# In the page: set a slider, then wait until its unit has drawn the answer and a frame has been painted.
SLIDER_TO_DRAWN = """async ([unit, slider, value]) => {
    const box = document.getElementById(unit), input = document.getElementById(slider);
    const frame = () => new Promise((done) => requestAnimationFrame(done));
    const start = performance.now();
    input.value = value;
    input.dispatchEvent(new Event("input"));
    while (box.dataset.state !== "ready") await frame();
    await frame();
    return performance.now() - start;
}"""
# In the page: hover patch i of the 4x4 query image, until every linked view is lit and a frame painted.
HOVER_TO_LIT = """async (i) => {
    const canvas = document.getElementById("attn-image"), rect = canvas.getBoundingClientRect();
    const cell = rect.width / 4;
    const start = performance.now();
    canvas.dispatchEvent(new PointerEvent("pointermove", { bubbles: true,
        clientX: rect.left + ((i % 4) + 0.5) * cell, clientY: rect.top + (Math.floor(i / 4) + 0.5) * cell }));
    if (document.getElementById("attn-bars").dataset.highlight === "") throw new Error("nothing lit");
    await new Promise((done) => requestAnimationFrame(done));
    return performance.now() - start;
}"""


# In the page: act on the Forward page (`action` run in the page), until its unit has drawn the answer (every
# stage's strips, K and V, the bars, the prediction) and a frame has been painted.
ACT_TO_DRAWN = """async ([action, i]) => {
    const box = document.getElementById("page-forward");
    const frame = () => new Promise((done) => requestAnimationFrame(done));
    const start = performance.now();
    if (action === "patch") {
        const canvas = document.getElementById("fwd-image"), rect = canvas.getBoundingClientRect();
        const cell = rect.width / 4;
        canvas.dispatchEvent(new MouseEvent("click", { bubbles: true,
            clientX: rect.left + ((i % 4) + 0.5) * cell, clientY: rect.top + (Math.floor(i / 4) % 4 + 0.5) * cell }));
    } else if (action === "head") {
        const select = document.getElementById("fwd-head");
        select.value = String(i % 4);
        select.dispatchEvent(new Event("change"));
    } else {
        const buttons = document.querySelectorAll("#fwd-knockout button");
        buttons[i % 3].click();
    }
    while (box.dataset.state !== "ready") await frame();
    await frame();
    return performance.now() - start;
}"""


# In the page: click the Segment page's image (points accumulate, the oldest dropped past 8), until the
# masks are drawn (main image, K candidates, facts) and a frame painted.
CLICK_TO_MASKS = """async (i) => {
    const canvas = document.getElementById("seg-image"), rect = canvas.getBoundingClientRect();
    const box = document.getElementById("seg-answer");
    const frame = () => new Promise((done) => requestAnimationFrame(done));
    const start = performance.now();
    canvas.dispatchEvent(new MouseEvent("click", { bubbles: true,
        clientX: rect.left + rect.width * (0.2 + 0.03 * (i % 20)), clientY: rect.top + rect.height * 0.5 }));
    while (box.dataset.state !== "ready") await frame();
    await frame();
    return performance.now() - start;
}"""


def page_interactions(base: str, chromium: str, repeats: int, prompt: str | None) -> dict[str, list[float]]:
    """Milliseconds the page takes per interaction, in Chromium: name -> times (the Segment page's with
    promptable run ``prompt``, when there is one)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(base + "/#tokens")
        page.wait_for_selector("#page-tokens.active[data-state=ready]", timeout=30_000)
        times = {
            "page: patch slider to figures drawn": [
                page.evaluate(SLIDER_TO_DRAWN, ["page-tokens", "patch-slider", str(1 + i % 4)]) for i in range(repeats)
            ]
        }
        page.evaluate("location.hash = '#attention'")
        page.wait_for_selector("#attn-maps[data-state=ready]", timeout=30_000)
        times["page: temperature slider to 16 heads drawn"] = [
            page.evaluate(SLIDER_TO_DRAWN, ["page-attention", "attn-temperature", str(round(-1 + 0.07 * i, 2))])
            for i in range(repeats)
        ]
        times["page: hover a patch to every linked view lit"] = [
            page.evaluate(HOVER_TO_LIT, i % 16) for i in range(repeats)
        ]
        page.evaluate("location.hash = '#forward'")
        page.wait_for_selector("#page-forward.active[data-state=ready]", timeout=30_000)
        for name, action in (("click a patch", "patch"), ("choose a head", "head"), ("knock out a head", "knockout")):
            # each action changes what is shown (the next patch, head or knock-out), so each redraws
            times[f"page: forward pass, {name} to every stage drawn"] = [
                page.evaluate(ACT_TO_DRAWN, [action, i + 1]) for i in range(repeats)
            ]
        times["page: forward pass, temperature slider to every stage drawn"] = [
            page.evaluate(SLIDER_TO_DRAWN, ["page-forward", "fwd-temperature", str(round(-1 + 0.07 * i, 2))])
            for i in range(repeats)
        ]
        page.evaluate("location.hash = '#mechanics'")
        page.wait_for_selector("#local-panel[data-state=ready]", timeout=30_000)
        times["page: sigma slider to synthetic attention drawn"] = [
            page.evaluate(SLIDER_TO_DRAWN, ["local-panel", "local-sigma", str(round(-0.6 + 0.05 * i, 2))])
            for i in range(repeats)
        ]
        times["page: frequency scale to both 1-D heatmaps and the chart drawn"] = [
            page.evaluate(SLIDER_TO_DRAWN, ["dots-panel", "dots-scale", str(round(-1 + 0.06 * i, 2))])
            for i in range(repeats)
        ]
        if prompt:
            page.evaluate(f"location.hash = '#segment?prun={prompt}'")
            page.wait_for_selector("#page-segment[data-state=ready]", timeout=30_000)
            times["page: click a held-out shape to its masks drawn"] = [
                page.evaluate(CLICK_TO_MASKS, i) for i in range(repeats)
            ]
        browser.close()
    return times


def first_loads(base: str, chromium: str, repeats: int) -> list[float]:
    """Milliseconds from navigation to the Tokens page's first drawn answer, each in a fresh context."""
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        for _ in range(repeats):
            context = browser.new_context()
            page = context.new_page()
            start = time.perf_counter()
            page.goto(base + "/")
            page.wait_for_selector("#page-tokens[data-state=ready]", timeout=30_000)
            times.append((time.perf_counter() - start) * 1000)
            context.close()
        browser.close()
    return times


QUERY_CLICK_MS, PIECE_MS = 1000.0, 15000.0  # a 224-px model on a CPU: a query click; a piece of a panel
MAPS = ("attention", "rollout", "gradient", "occlusion")
# In the page: whether the units `ids` have drawn a piece of their latest run (any of them), or every piece (all).
PIECES_DRAWN = """([ids, every]) => {
    const drawn = ids.map((id) => document.getElementById(id)).map((unit) => {
        const ready = unit.dataset.state === "ready";
        const [done, total] = (unit.dataset.progress || (ready ? "1/1" : "0/1")).split("/").map(Number);
        return every ? ready && done === total : done > 0;
    });
    return every ? drawn.every(Boolean) : drawn.some(Boolean);
}"""


def make_photo_model(root: Path) -> Path:
    """A random vit_tiny-shaped classifier read as timm reads it, trained on ``root/photos`` (as recorded), and that
    folder of 6 classes x 8 generated 200-400 px photos; the checkpoint's path."""
    from vitlab import create_model
    from vitlab.runs import DataConfig, save_checkpoint

    rng = np.random.default_rng(0)
    classes = [f"class{c}" for c in range(6)]
    for name in classes:
        (root / "photos" / name).mkdir(parents=True)
        for i in range(8):
            h, w = (int(v) for v in rng.integers(200, 400, size=2))
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(root / "photos" / name / f"{i}.jpg")
    torch.manual_seed(0)
    model = create_model("vit-tiny-patch16-224", num_classes=len(classes))
    data = DataConfig(
        (224, 224), 3, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), classes, dataset="folder", data_dir="photos"
    )
    data.crop_pct, data.crop_mode, data.interpolation = 0.875, "center", "bicubic"
    return save_checkpoint(model, root / "runs" / "photos" / "best" / "model.safetensors", "classifier", data)


def page_pieces(base: str, pieces: list[tuple[str, dict]]) -> dict[str, float]:
    """Milliseconds each piece request takes, requested one after another as a page requests them (``(path, params)``,
    named by path and method)."""
    return {f"{path}?method={params['method']}": request_ms(base, path, params) for path, params in pieces}


def filled_in(base: str, chromium: str, opened: list[tuple[str, list[str], str]]) -> dict[str, float]:
    """Milliseconds from opening each page (a fresh one, ``(hash, unit ids, name)``) in Chromium to the first piece of
    its units drawn, and to every unit filled; the Limits page's verdicts too."""
    from playwright.sync_api import sync_playwright

    times = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        for where, units, name in opened:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            start = time.perf_counter()
            page.goto(f"{base}/{where}")
            if where.startswith("#limits"):
                page.wait_for_selector("#verdicts-panel[data-state=ready]", timeout=600_000)
                times["limits page: verdicts drawn"] = (time.perf_counter() - start) * 1000
            for every, when in ((False, "first map or curve drawn"), (True, "every panel filled")):
                page.wait_for_function(PIECES_DRAWN, arg=[units, every], timeout=600_000, polling=50)
                times[f"{name}: {when}"] = (time.perf_counter() - start) * 1000
            page.close()
        browser.close()
    return times


def photo224(args: argparse.Namespace) -> None:
    """The ``--photo224`` figures (see the module docstring)."""
    import os

    with tempfile.TemporaryDirectory(prefix="bench-explore-224-") as tmp:
        checkpoint = make_photo_model(Path(tmp))
        began = time.perf_counter()
        app = create_app(ExploreConfig(checkpoints=[checkpoint]))
        start_s = time.perf_counter() - began
        with serve_in_background(app) as base:
            info = json.loads(urllib.request.urlopen(base + "/api/info").read())
            source = info["models"][0]["samples"]
            machine = {"threads": torch.get_num_threads(), "vitlab": __version__, "load_average": os.getloadavg()}
            print(json.dumps({"bench": "explore-224", "interaction": "start (load, warm up)", "ms": start_s * 1000}))
            request_ms(base, "/api/attention", {"model": 0, "ref": f"{source}:0"})  # the image analysed once
            clicks = [
                request_ms(base, "/api/attention", {"model": 0, "ref": f"{source}:0", "query": 1 + 13 * i % 196})
                for i in range(args.repeats)
            ]
            results = {"attention: click a query patch": summary(clicks)}
            # The pages as a user opens them (nothing computed yet); the Attention page on an image Limits did not show.
            limits = ["pair-panel", "random-panel", "deletion-panel"]
            pages = filled_in(base, args.chromium, [("#limits", limits, "limits page")])
            query = urllib.parse.urlencode({"model": 0, "source": source})
            verdicts = json.loads(urllib.request.urlopen(f"{base}/api/limits/verdicts?{query}").read())
            shown = {f"{source}:0", *(v[0]["ref"] for v in (verdicts["mistakes"], verdicts["right"]) if v)}
            other = next(f"{source}:{i}" for i in range(verdicts["images"]) if f"{source}:{i}" not in shown)
            pages |= filled_in(base, args.chromium, [(f"#attention?ref={other}", ["attn-maps"], "attention page")])
            # Each piece as its page asks for it, on uploaded photos (each new: nothing computed for it yet).
            pieces: dict[str, list[float]] = {}
            for _ in range(args.repeats):
                at = {"model": 0, "ref": upload(base, 300)}  # the Limits page's maps of both models, a map at a time
                asked = [(p, {**at, "method": m}) for m in MAPS for p in ("/api/limits/maps", "/api/limits/randomised")]
                at = {"model": 0, "ref": upload(base, 300)}  # its deletion curves, on an image whose maps are not made
                asked += [("/api/limits/deletion", {**at, "method": m}) for m in (*MAPS, "random")]
                at = {"model": 0, "ref": upload(base, 300)}  # the Attention page's maps
                asked += [("/api/maps", {**at, "method": m}) for m in MAPS[1:]]
                for name, ms in page_pieces(base, asked).items():
                    pieces.setdefault(name, []).append(ms)
            results |= {f"piece: {name}": summary(times) for name, times in pieces.items()}
            results |= {name: summary([ms]) for name, ms in pages.items()}
            machine["load_average_end"] = os.getloadavg()
            for name, figures in results.items():
                print(json.dumps({"bench": "explore-224", "interaction": name, **figures, **machine}))
    slowest = max((k for k in results if k.startswith("piece: ")), key=lambda k: results[k]["max_ms"])
    print(
        json.dumps(
            {
                "bench": "explore-224",
                "summary": True,
                "query_click_median_ms": results["attention: click a query patch"]["median_ms"],
                "query_click_under_1s": results["attention: click a query patch"]["median_ms"] <= QUERY_CLICK_MS,
                "slowest_piece": slowest,
                "slowest_piece_ms": results[slowest]["max_ms"],
                "every_piece_under_15s": results[slowest]["max_ms"] <= PIECE_MS,
                "pages_ms": {name: round(ms) for name, ms in pages.items()},
                **machine,
            }
        )
    )


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_ms": round(statistics.median(ordered), 2),
        "p90_ms": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 2),
        "max_ms": round(ordered[-1], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="the digits model (default: train one into a temporary folder)")
    parser.add_argument("--runs", help="run folders to serve (default: the temporary folder)")
    parser.add_argument("--repeats", type=int, default=30, help="requests per interaction (default 30)")
    parser.add_argument("--loads", type=int, default=5, help="first page loads to time (default 5)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--photo224", action="store_true", help="a 224-px vit_tiny-shaped photo model's figures")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.photo224:
        photo224(args)
        return
    with tempfile.TemporaryDirectory(prefix="bench-explore-") as tmp:
        checkpoint = Path(args.checkpoint) if args.checkpoint else make_runs(Path(tmp))
        runs = Path(args.runs) if args.runs else Path(tmp)
        app = create_app(ExploreConfig(checkpoints=[checkpoint], runs=[runs]))
        with serve_in_background(app) as base:
            names = [r["name"] for r in json.loads(urllib.request.urlopen(base + "/api/runs").read())["runs"]]
            prompts = json.loads(urllib.request.urlopen(base + "/api/prompt/runs").read())["runs"]
            prompt = next((r["name"] for r in prompts if not r["broken"]), None)
            machine = {
                "machine": platform.processor() or platform.machine(),
                "python": platform.python_version(),
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
                "vitlab": __version__,
            }
            results = {}
            for name, (path, params) in interactions(names, prompt, upload(base)).items():
                request_ms(base, path, params(0))  # the sample split loads once
                times = [request_ms(base, path, params(i + 1)) for i in range(args.repeats)]
                results[name] = summary(times)
                print(
                    json.dumps(
                        {
                            "bench": "explore",
                            "interaction": name,
                            "path": path,
                            "n": args.repeats,
                            **results[name],
                            **machine,
                        }
                    )
                )
            for name, times in page_interactions(base, args.chromium, args.repeats, prompt).items():
                results[name] = summary(times)
                print(
                    json.dumps({"bench": "explore", "interaction": name, "n": args.repeats, **results[name], **machine})
                )
            loads = summary(first_loads(base, args.chromium, args.loads))
            print(
                json.dumps(
                    {
                        "bench": "explore",
                        "interaction": "first page load (Chromium, cold cache)",
                        "n": args.loads,
                        **loads,
                        **machine,
                    }
                )
            )
    slowest = max(results.items(), key=lambda kv: kv[1]["median_ms"])
    forward_server = {k: v for k, v in results.items() if k.startswith("forward: ")}
    forward_page = {k: v for k, v in results.items() if k.startswith("page: forward pass")}
    print(
        json.dumps(
            {
                "bench": "explore",
                "summary": True,
                "slowest_interaction": slowest[0],
                "slowest_median_ms": slowest[1]["median_ms"],
                "all_interactions_under_100ms": all(r["median_ms"] < INTERACTION_MS for r in results.values()),
                "forward_server_p90_max_ms": max(r["p90_ms"] for r in forward_server.values()),
                "forward_server_under_50ms_p90": all(r["p90_ms"] <= FORWARD_SERVER_MS for r in forward_server.values()),
                "forward_to_pixels_p90_max_ms": max(r["p90_ms"] for r in forward_page.values()),
                "forward_to_pixels_under_100ms_p90": all(r["p90_ms"] <= INTERACTION_MS for r in forward_page.values()),
                "first_load_median_ms": loads["median_ms"],
                "first_load_under_1s": loads["median_ms"] < FIRST_LOAD_MS,
            }
        )
    )


if __name__ == "__main__":
    main()
