# %% [markdown]
# # 1. An image becomes tokens
#
# A Vision Transformer never sees an image. It sees a **sequence of tokens**, one per patch: the image is
# cut into P × P squares, each square is flattened into a row of P²C numbers, and one linear map turns
# each row into a D-wide token. This tutorial does that by hand on a real handwritten digit, checks it
# against vitlab, shows that the "linear map on flattened patches" and the "stride-P convolution" that
# every ViT implementation uses are the *same function*, and counts what the sequence costs.
#
# Everything runs on the embedded digits data (scikit-learn's 8 × 8 scans; no download), on the CPU.

# %%
import matplotlib.pyplot as plt
import torch

import vitlab
from vitlab.analysis.cost import Workload, attention_cost, cost_table
from vitlab.data import load_dataset
from vitlab.layers import PatchEmbedding, conv_weight_to_linear

torch.manual_seed(0)
digits = load_dataset("digits", seed=0)
image = digits.train.images[:1]  # (1, C, H, W): one digit
print("image", tuple(image.shape), "label", int(digits.train.labels[0]))

# %% [markdown]
# ## Cutting into patches
#
# With P = 2 an 8 × 8 image is a 4 × 4 grid of patches: **N = (H / P)(W / P) = 16 tokens**, each of
# **P²C = 4 numbers**. `vitlab.patchify` flattens every patch row by row (then column, then channel) and
# lists the patches in raster order; `vitlab.unpatchify` puts them back, losslessly.

# %%
P = 2
tokens = vitlab.patchify(image, P)
print("tokens", tuple(tokens.shape), "= (batch, N, P*P*C)")
print("N =", vitlab.num_tokens(8, 8, P), "tokens")
assert torch.equal(vitlab.unpatchify(tokens, P, (4, 4)), image)

# the same by hand: a reshape and a transpose
C, H, W = image.shape[1:]
by_hand = image.reshape(1, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1).reshape(1, -1, P * P * C)
print("patchify equals the hand-made reshape:", torch.equal(by_hand, tokens))

# %%
fig, axes = plt.subplots(1, 2, figsize=(7, 3.2), layout="constrained")
shown = axes[0].imshow(image[0, 0], cmap="gray")
for edge in range(0, 9, P):
    axes[0].axhline(edge - 0.5, color="tab:red", lw=1)
    axes[0].axvline(edge - 0.5, color="tab:red", lw=1)
axes[0].set_title(f"the digit, cut into {P}x{P} patches")
fig.colorbar(shown, ax=axes[0], label="pixel value")
matrix = axes[1].imshow(tokens[0], cmap="gray", aspect="auto")
axes[1].set_xlabel("P*P*C values of a patch")
axes[1].set_ylabel("token (patch in raster order)")
axes[1].set_title("the token matrix N x P*P*C")
fig.colorbar(matrix, ax=axes[1], label="pixel value")
plt.show()

# %% [markdown]
# ## The patch embedding: linear on patches ≡ a stride-P convolution
#
# The embedding is `tokens @ W.T + b` with `W` of shape (D, P²C). Implementations compute it as a
# `Conv2d(C, D, kernel_size=P, stride=P)`, whose kernel (D, C, P, P) is the same numbers in another order.
# `vitlab.layers.PatchEmbedding` keeps the convolution's parameters and can run either way; here both paths
# are held to each other numerically.

# %%
D = 8
embed = PatchEmbedding(patch_size=P, in_chans=C, embed_dim=D, pad=False)
with torch.no_grad():
    by_conv = embed(image)  # the convolution
    weight = conv_weight_to_linear(embed.proj.weight)  # (D, P*P*C)
    by_linear = tokens @ weight.T + embed.proj.bias
print("conv path", tuple(by_conv.shape), "linear path", tuple(by_linear.shape))
print(f"largest difference: {(by_conv - by_linear).abs().max().item():.2e}")
assert torch.allclose(by_conv, by_linear, atol=1e-6)

# %% [markdown]
# The difference is float rounding (around 1e-7): one function, two ways to compute it.
#
# ## What a sequence costs: N and N²
#
# Self-attention compares every token with every token: **N² scores per head per layer**. Halving the patch
# side quadruples N and multiplies the attention entries by 16. `vitlab.analysis.cost` prices a forward pass
# without building a model (`vitlab cost` prints the same table on the command line).

# %%
for image_side, patch in [(8, 4), (8, 2), (8, 1), (28, 7), (224, 16), (224, 8)]:
    work = Workload(image=image_side, patch=patch, dim=64, depth=4, heads=4)
    cost = attention_cost(work)
    print(f"image {image_side:>3} patch {patch:>2}: N = {work.tokens:>4} tokens, {cost.entries:>9,} attention entries")

# %%
rows = cost_table(((28, 7), (28, 4), (64, 8), (224, 16), (224, 8)), dim=64, depth=4, heads=4)
fig, ax = plt.subplots(figsize=(6, 3.4), layout="constrained")
ax.loglog([r.tokens for r in rows], [r.entries for r in rows], "o-", label="full attention: N^2 per head")
ax.loglog([r.tokens for r in rows], [r.tokens for r in rows], "s--", label="a token-wise layer: N")
for r in rows:
    ax.annotate(f"{r.image}/{r.patch}", (r.tokens, r.entries), textcoords="offset points", xytext=(4, -10))
ax.set_xlabel("tokens N (log scale)")
ax.set_ylabel("entries per layer and head (log scale)")
ax.set_title("attention grows with N squared")
ax.legend()
plt.show()

# %% [markdown]
# On the command line the same table is `vitlab cost` (the texts' pairs) or, for your own sizes,
# `vitlab cost --pairs 224/16,224/8` — see the [command reference](../reference/cli.md#vitlab-cost).
#
# **Next:** [2. Attention by hand](02-attention.md) — what happens to these tokens.
