"""``vitlab compare`` on all cores against one run at a time: wall time and identical numbers.

    python benchmarks/bench_compare_jobs.py                      # the digits default grid, --jobs 1 then 2
    python benchmarks/bench_compare_jobs.py --rounds 2           # 1, 2, 1, 2
    python benchmarks/bench_compare_jobs.py --ray -- --epochs 5  # also through a local Ray; a shorter grid

Each round runs the command a user types, ``vitlab compare --jobs J --threads 1`` (plus anything
after ``--``), in a fresh process for J = 1 and J = 2 alternately, so a change of machine load hits
both alike. With ``--ray`` the same grid also runs once as Ray tasks on a local Ray started for it
(``--executor ray --jobs 2``). Prints one JSON line per command (wall seconds, the study's own
seconds and runs) and a summary: the best wall time per setting, the ratio jobs 2 / jobs 1 (< 1:
parallel is faster), Ray's overhead per run against the local jobs 2, and whether every
``results.json`` holds the same numbers (:func:`vitlab.experiments.report.results_numbers`: all
but the timings).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vitlab.experiments import usable_cores
from vitlab.experiments.report import results_numbers


def run_study(label: str, flags: list[str], extra: list[str], out: Path) -> dict:
    """One ``vitlab compare`` in a fresh process; its wall time and its results.json."""
    command = [
        sys.executable,
        "-m",
        "vitlab",
        "compare",
        "--threads",
        "1",
        "--quiet",
        "--out",
        str(out / label),
        *flags,
        *extra,
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    results = json.loads((out / label / "results.json").read_text())
    return {
        "label": label,
        "flags": flags,
        "wall_s": round(wall, 2),
        "study_s": round(results["seconds"], 2),
        "runs": len(results["runs"]),
        "results": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="rounds of (jobs 1, jobs 2); default 1")
    parser.add_argument("--ray", action="store_true", help="also run the grid once on a local Ray (needs ray)")
    parser.add_argument("extra", nargs="*", help="after --: more `vitlab compare` options for every command")
    args = parser.parse_args()
    settings = [(f"jobs{jobs}", ["--jobs", str(jobs)]) for jobs in (1, 2)]
    done: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        for round_ in range(args.rounds):
            for name, flags in settings:
                done.append(run_study(f"{name}-{round_}", flags, args.extra, Path(tmp)))
                print(json.dumps({k: v for k, v in done[-1].items() if k != "results"}), flush=True)
        if args.ray:
            done.append(run_study("ray", ["--executor", "ray", "--jobs", "2"], args.extra, Path(tmp)))
            print(json.dumps({k: v for k, v in done[-1].items() if k != "results"}), flush=True)
    best = {
        name: min(d["wall_s"] for d in done if d["label"].startswith(name))
        for name in ("jobs1", "jobs2", "ray")
        if any(d["label"].startswith(name) for d in done)
    }
    runs = done[0]["runs"]
    summary = {
        "summary": "vitlab compare --jobs 2 vs --jobs 1",
        "extra": args.extra,
        "rounds": args.rounds,
        "runs": runs,
        "best_wall_s": best,
        "ratio_jobs2_over_jobs1": round(best["jobs2"] / best["jobs1"], 3),
        "identical_numbers": all(results_numbers(d["results"]) == results_numbers(done[0]["results"]) for d in done),
        "usable_cores": usable_cores(),
        "load_avg_1min": os.getloadavg()[0],
        "python": platform.python_version(),
    }
    if "ray" in best:
        summary["ray_overhead_s_per_run"] = round((best["ray"] - best["jobs2"]) / runs, 3)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
