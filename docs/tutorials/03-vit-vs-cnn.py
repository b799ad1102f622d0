# %% [markdown]
# # 3. A tiny ViT against a CNN of the same size
#
# The textbooks' central claim about Vision Transformers is a claim about **data**: a ViT has weaker
# built-in assumptions about images than a CNN (no locality, no translation equivariance — it must
# *learn* that nearby pixels matter), so on small data a CNN of the same size wins, and the ViT catches up
# as data grows. `vitlab compare` measures that claim: it trains a ViT and a CNN whose parameter counts
# match (within 15 %) on the same rows, seed, recipe and epochs, over a grid of training-set sizes and
# patch sizes, repeats every cell over seeds, and says for each cell whether the lead is larger than the
# seed-to-seed spread.
#
# This page runs a small study (2 training-set sizes × 2 seeds × 2 models, 5 epochs: about a minute on two
# cores). The full default study is plain `vitlab compare`.

# %%
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from IPython.display import Image, Markdown, display


def vitlab(command: str) -> None:
    """Run a vitlab command as you would type it in a terminal, and show what it prints."""
    print("$ vitlab", command)
    done = subprocess.run([sys.executable, "-m", "vitlab", *shlex.split(command)], capture_output=True, text=True)
    print(done.stdout.strip()[-2500:])
    if done.returncode:
        raise RuntimeError(done.stderr)


work = Path(tempfile.mkdtemp())
vitlab(
    f"compare --rows 200,full --patches 4 --augment none --epochs 5 --seeds 2 --jobs 2 --threads 1 "
    f"--out {work / 'study'} --quiet"
)

# %% [markdown]
# `--seeds 2` trains every cell twice (seeds 0 and 1; a seed fixes the split and the batch order for both
# models). The table prints mean ± standard deviation. Timing columns (Seconds, Images/s) depend on the
# machine and its load; every accuracy is the same on every build.
#
# ## Who leads, and the verdict
#
# The report (`report.md` in the run folder) derives its sentences from the numbers:

# %%
report = (work / "study" / "report.md").read_text()


def section(title: str) -> str:
    return report.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


display(Markdown(section("Who leads")))
display(Markdown(section("Conclusions")))

# %% [markdown]
# How to read a verdict:
#
# - **Lead** is the ViT's validation accuracy minus the CNN's, averaged over seeds, each seed's two models
#   paired (same split, same batches).
# - **Spread** is the standard deviation of those per-seed differences: how much the lead moves when only
#   the seed changes.
# - **larger than the spread**: the lead exceeds that seed-to-seed noise, so the order of the two models is
#   a property of the cell, not of one lucky seed. **within the spread**: this study cannot tell them apart —
#   which is a finding too, not a failure. With one seed the spread is unknown and no verdict is given.
#
# Two seeds make a rough spread; the textbook study uses five (`--seeds 5`), and the report of
# `--preset textbook` sets the texts' published numbers beside vitlab's mean ± std, with a verdict per claim.
#
# ## The figures

# %%
display(Image(filename=str(work / "study" / "accuracy_vs_rows.png")))
display(Image(filename=str(work / "study" / "gap.png")))

# %% [markdown]
# On 8 × 8 digits the small-data claim shows clearly: at 200 rows the CNN leads by a wide margin, and with
# the full pool the ViT closes much of the gap (the conclusions above give the numbers). The train −
# validation gap is the other half of the textbook's story — a weaker prior should memorise more — but five
# epochs are too few for either model to memorise much, so read its sentence above for this run and the
# default study (40 epochs, `vitlab compare`) for the claim.
#
# ## From here
#
# - The same study in Python: `vitlab.experiments.run_compare(CompareConfig(rows=[200, None], patches=[4],
#   augment=["none"], epochs=5, seeds=2, out_dir="runs/small"))` ([API](../reference/api/experiments.md)).
# - More axes: `--patches 2,4` (token count), `--augment none,recipe`, the ViT variants `--attention`,
#   `--position`, `--pool`, `--pretrain mae,dino`, `--distill cnn`, and the texts' pitfalls with
#   `--preset pitfalls` ([command reference](../reference/cli.md#vitlab-compare)).
# - **The textbook's study** on the textbook's data: `vitlab compare --preset textbook` (Fashion-MNIST:
#   `apt-get install dataset-fashion-mnist` or `vitlab data download fashion-mnist`); its measured verdicts are
#   in [the benchmark results](../reference/results.md), and every claim is mapped in
#   [Concepts](../concepts/index.md).
# - A study over many machines: [6. Past one machine](06-past-one-machine.md).
#
# **Next:** [4. Looking inside, honestly](04-looking-inside.md).
