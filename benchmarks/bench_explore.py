"""`vitlab explore` latency: every interaction's request, the page's own drawing, and the first page load.

    python benchmarks/bench_explore.py                       # trains the digits model first (~20 s)
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
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import torch

from vitlab import __version__
from vitlab.engine import TrainConfig
from vitlab.experiments import CompareConfig, run_compare
from vitlab.explore import ExploreConfig, create_app, serve_in_background
from vitlab.tasks import train

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


def make_runs(root: Path) -> Path:
    """Train the digits model (vit-digits, 10 epochs) and a small compare study under ``root``."""
    train(TrainConfig(model="vit-digits", epochs=10, device="cpu", out_dir=str(root / "digits")))
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


def interactions(runs: list[str]) -> dict[str, tuple[str, callable]]:
    """name -> (path, i -> params of the i-th request)."""
    sort_keys = ["best_val_acc", "test_acc", "params", "seconds", "run"]
    return {
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


def page_interactions(base: str, chromium: str, repeats: int) -> dict[str, list[float]]:
    """Milliseconds the page takes per interaction, in Chromium: name -> times."""
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
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="bench-explore-") as tmp:
        checkpoint = Path(args.checkpoint) if args.checkpoint else make_runs(Path(tmp))
        runs = Path(args.runs) if args.runs else Path(tmp)
        app = create_app(ExploreConfig(checkpoints=[checkpoint], runs=[runs]))
        with serve_in_background(app) as base:
            names = [r["name"] for r in json.loads(urllib.request.urlopen(base + "/api/runs").read())["runs"]]
            machine = {
                "machine": platform.processor() or platform.machine(),
                "python": platform.python_version(),
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
                "vitlab": __version__,
            }
            results = {}
            for name, (path, params) in interactions(names).items():
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
            for name, times in page_interactions(base, args.chromium, args.repeats).items():
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
    print(
        json.dumps(
            {
                "bench": "explore",
                "summary": True,
                "slowest_interaction": slowest[0],
                "slowest_median_ms": slowest[1]["median_ms"],
                "all_interactions_under_100ms": all(r["median_ms"] < INTERACTION_MS for r in results.values()),
                "first_load_median_ms": loads["median_ms"],
                "first_load_under_1s": loads["median_ms"] < FIRST_LOAD_MS,
            }
        )
    )


if __name__ == "__main__":
    main()
