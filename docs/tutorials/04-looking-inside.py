# %% [markdown]
# # 4. Looking inside, honestly
#
# Attention weights are tempting to read as an explanation: "the model looked here". They are not one by
# themselves. A weight says how much one token's value was mixed into another's at one layer; the residual
# stream, the MLPs, the other heads and the later layers all decide what that mixture is worth. This
# tutorial draws the usual maps for a small ViT trained on the digits, then asks what they are worth —
# with vitlab's **audit** (do the maps pick the pixels that matter? do they change when the model's
# weights are randomised?) and its **probes** (measurements of the model itself, not of a picture).

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
run = work / "digits"
vitlab(f"train --model vit-digits --set patch_size=4 --set warmup_epochs=1 --epochs 6 --threads 1 --out {run} --quiet")

# %% [markdown]
# ## The maps
#
# `vitlab explain RUN` draws, for one validation image: the last layer's **attention** from the class token,
# **rollout** (attention multiplied through the layers, with the residual as (A + I)/2), the **gradient**
# of the predicted class with respect to the pixels, gradient × input, and **occlusion** (how much the
# predicted probability drops when a patch is greyed out). Each map is drawn on its own stated scale.

# %%
vitlab(f"explain {run} --index 3 --out {work / 'maps'}")
for figure in sorted((work / "maps").glob("*.png")):
    display(Image(filename=str(figure)))

# %% [markdown]
# ## What are the maps worth? The audit
#
# `--audit` measures each map on many images:
#
# - **deletion**: remove patches in the map's order, most important first, and watch the prediction fall —
#   a map that knows what matters makes it fall faster than a random order does;
# - **sanity checks** (Adebayo et al. 2018): recompute the map after randomising the model's weights, and
#   after training a copy on *permuted labels*; a map that barely changes (high rank correlation) is
#   describing the image, not the model.

# %%
vitlab(f"explain {run} --audit --samples 8 --steps 4 --sanity-epochs 1 --out {work / 'audit'}")
display(Markdown((work / "audit" / "audit.md").read_text()))

# %% [markdown]
# ## Measuring the model instead: probes
#
# Probes ask the model questions whose answers are numbers. `permute` shuffles the patches and counts how
# often the prediction survives (with the positions, and with the positions shuffled along — a ViT without
# position information cannot tell the two apart); `attention` gives, per layer and head, the **mean
# attention distance** in pixels, the entropy of the weights and how far they are from uniform.

# %%
vitlab(f"explain {run} --probe permute,attention --samples 64 --out {work / 'probes'}")
display(Markdown((work / "probes" / "probes.md").read_text()))
display(Image(filename=str(work / "probes" / "attention_depth.png")))

# %% [markdown]
# ## What maps cannot say
#
# - A map is **one image, one class, one layer's mixing**: it says nothing of how the model behaves on
#   other inputs; the probes and the audit average over many.
# - Attention is **not importance**: a head can put weight on a token whose value carries nothing; the
#   deletion curve, not the picture, says whether the highlighted pixels matter.
# - A confident **mistake** usually has maps that look just as "reasonable" as a correct answer's — compare
#   them before reading a story into either (the explorer's *Limits* page puts them side by side).
# - A near-uniform map (every weight ≈ 1/N) drawn on its own range looks structured: read the colour bar.
#
# In the explorer (`vitlab explore`, [how-to](../how-to/explorer.md)), the *Attention*, *Forward pass* and
# *Limits* pages show the same quantities interactively on your own runs.
#
# **Next:** [5. Your own photos](05-your-photos.md).
