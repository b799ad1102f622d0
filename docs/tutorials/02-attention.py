# %% [markdown]
# # 2. Attention by hand
#
# Self-attention is four lines of linear algebra. For tokens X (N × D) and one head of width d:
#
# - queries, keys and values: **Q = X W_Q, K = X W_K, V = X W_V**;
# - scores: **S = Q Kᵀ / √d** (every token against every token: N × N);
# - weights: **A = softmax(S)** row by row (each row sums to 1);
# - output: **A V**, a weighted average of the values for every token.
#
# Multi-head attention runs H such heads side by side on D / H wide slices and mixes their outputs with
# one more matrix W_O. This tutorial writes it in NumPy on a digit's tokens, and holds it to three
# implementations: vitlab's NumPy reference (`vitlab.reference`, the first oracle of the tests), vitlab's
# explicit PyTorch path (which returns the weights) and its fused path (PyTorch's
# `scaled_dot_product_attention` kernel, which never forms A).

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

from vitlab import reference
from vitlab.data import load_dataset
from vitlab.layers import MultiHeadSelfAttention, PatchEmbedding

torch.manual_seed(0)
digits = load_dataset("digits", seed=0)
image = digits.train.images[:1]
D, H = 16, 4  # token width and heads: 4 heads of d = 4
embed = PatchEmbedding(patch_size=2, in_chans=1, embed_dim=D, pad=False)
with torch.no_grad():
    x = embed(image)  # (1, N=16, D=16): the digit's tokens
attention = MultiHeadSelfAttention(D, num_heads=H).eval()
print("tokens", tuple(x.shape))

# %% [markdown]
# ## By hand, in NumPy
#
# The layer's `qkv` projection holds W_Q, W_K and W_V stacked (a PyTorch `Linear` stores its weight
# transposed, so `X @ W.T`).

# %%
X = x.numpy()[0].astype(np.float64)  # (N, D)
Wqkv = attention.qkv.weight.detach().numpy().astype(np.float64)  # (3D, D)
bqkv = attention.qkv.bias.detach().numpy().astype(np.float64)
Wq, Wk, Wv = (Wqkv[i * D : (i + 1) * D].T for i in range(3))
bq, bk, bv = (bqkv[i * D : (i + 1) * D] for i in range(3))
Wo = attention.proj.weight.detach().numpy().astype(np.float64).T
bo = attention.proj.bias.detach().numpy().astype(np.float64)

d = D // H
heads_out, heads_weights = [], []
for h in range(H):
    cols = slice(h * d, (h + 1) * d)
    Q, K, V = (X @ Wq + bq)[:, cols], (X @ Wk + bk)[:, cols], (X @ Wv + bv)[:, cols]
    S = Q @ K.T / np.sqrt(d)  # (N, N) scores
    A = np.exp(S - S.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)  # softmax over the keys
    heads_weights.append(A)
    heads_out.append(A @ V)
by_hand = np.concatenate(heads_out, axis=1) @ Wo + bo  # (N, D)
weights_by_hand = np.stack(heads_weights)  # (H, N, N)
print("output", by_hand.shape, "weights", weights_by_hand.shape)
print("every row of A sums to 1:", np.allclose(weights_by_hand.sum(-1), 1))

# %% [markdown]
# ## Against the NumPy reference, the explicit path and the fused path

# %%
ref_out, ref_weights = reference.multihead_self_attention(X[None], Wq, Wk, Wv, Wo, H, bq, bk, bv, bo)
with torch.no_grad():
    explicit_out, explicit_weights = attention.forward_with_weights(x)
    fused_out = attention(x)  # PyTorch's fused kernel: no weights are formed


def gap(a, b):
    return float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).max())


print(
    f"by hand vs vitlab.reference          : {gap(by_hand, ref_out[0]):.1e} (output), {gap(weights_by_hand, ref_weights[0]):.1e} (weights)"
)
print(
    f"by hand vs vitlab's explicit path     : {gap(by_hand, explicit_out[0]):.1e} (output), {gap(weights_by_hand, explicit_weights[0]):.1e} (weights)"
)
print(f"explicit path vs fused path:      {gap(explicit_out, fused_out):.1e} output")

# %% [markdown]
# The NumPy reference agrees to float64 rounding; the PyTorch paths run in float32, so they agree to about
# 1e-7. The fused path never forms the N × N matrix A — which is why it is fast, and why vitlab's
# explanation tools (`vitlab.explain.attention_weights`) switch to the explicit path when they need the
# weights.
#
# ## What the weights look like

# %%
fig, axes = plt.subplots(1, H, figsize=(11, 3), layout="constrained")
for h, ax in enumerate(axes):
    shown = ax.imshow(weights_by_hand[h], cmap="viridis", vmin=0, vmax=weights_by_hand.max())
    ax.set_title(f"head {h}")
    ax.set_xlabel("key token")
    if h == 0:
        ax.set_ylabel("query token")
fig.colorbar(shown, ax=axes, label="attention weight (one scale)")
plt.show()
print(f"uniform attention would be 1/N = {1 / X.shape[0]:.4f}; the largest weight here is {weights_by_hand.max():.4f}")

# %% [markdown]
# An untrained layer's weights sit near uniform (1/N): structure appears only with training. Note the colour
# bar — every map on this site states its scale, because a near-uniform map drawn on its own range looks
# just as "structured" as a sharp one.
#
# ## Why divide by √d?
#
# For random q and k with unit-variance entries, q·k has variance d: without the division the scores grow
# with the head width and the softmax saturates. vitlab measures it (`vitlab shapes --qk-variance`):

# %%
from vitlab.analysis.qk import qk_variance, softmax_peak  # noqa: E402

print("  d_k   var(q.k) unscaled   var(q.k / sqrt(d_k))   largest of 64 softmax weights (unscaled / scaled)")
for d_k in (4, 16, 64, 256):
    raw, scaled = qk_variance(d_k, samples=2000, seed=0)
    peak_raw, peak_scaled = softmax_peak(d_k, samples=200, seed=0)
    print(f"{d_k:>5} {raw:>19.2f} {scaled:>22.2f} {peak_raw:>15.3f} / {peak_scaled:.3f}")

# %% [markdown]
# Unscaled, the variance grows like d_k and the softmax puts almost all its weight on one key; scaled, the
# variance stays near 1 at every width. **Next:** [3. A tiny ViT against a CNN](03-vit-vs-cnn.md).
