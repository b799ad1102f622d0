"""The whole ViT forward pass in NumPy, from a dictionary of arrays.

    images (B, H, W, C) -> patchify -> linear embedding -> + positions -> [class token, registers]
      -> depth x pre-norm block -> norm -> pool (class token | mean | max) -> fc_norm -> head

``params`` holds (weights act on the right, ``x @ w``)::

    patch_kernel (P, P, C, D), patch_b (D,)       the stride-P convolution's kernel = the linear map
    pos_embed    "learned" | "sincos1d" | "sincos2d" | "rowcol" | "none"
    pos_table (N, D) for learned; row_pos (gh, D), col_pos (gw, D) for rowcol
    prefix       (R, D): class token first, then registers ((0, D) when there are none)
    pool         "token" | "mean" | "max"; num_heads; eps (layer-norm epsilon)
    blocks       list of dicts: norm1, norm2 = (gamma, beta); wq, wk, wv, wo (D, D);
                 bq, bk, bv, bo (D,) or 0.0; mlp_w1 (D, F), mlp_b1 (F,), mlp_w2 (F, D), mlp_b2 (D,)
    norm, fc_norm  (gamma, beta) or None;  head  (w (D, K), b (K,)) or None

:func:`params_from_state_dict` builds it from a vitlab ``VisionTransformer`` state dict whose
tensors were turned into NumPy arrays by the caller (this package never imports torch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .attention import multihead_self_attention
from .patches import linear_patch_embedding, patchify
from .positions import add_2d_position, prepend_tokens, sincos_1d, sincos_2d

Params = dict[str, Any]
_SUPPORTED = {
    "pos_embed": ("learned", "sincos1d", "sincos2d", "rowcol", "none"),
    "block": ("prenorm",),
    "attention": ("full",),
    "patch_embed": ("conv", "linear"),
}
_erf = np.vectorize(math.erf, otypes=[float])


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Normalise the last axis to mean 0, variance 1 (biased), then scale and shift: shape unchanged."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU, ``x * Phi(x) = x/2 * (1 + erf(x / sqrt 2))``, elementwise."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def transformer_block(x: np.ndarray, block: Params, num_heads: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Pre-norm block: tokens ``(B, N, D)`` -> ``(tokens (B, N, D), attention weights (B, H, N, N))``."""
    (gamma1, beta1), (gamma2, beta2) = block["norm1"], block["norm2"]
    attn, weights = multihead_self_attention(
        layer_norm(x, gamma1, beta1, eps),
        block["wq"],
        block["wk"],
        block["wv"],
        block["wo"],
        num_heads,
        block["bq"],
        block["bk"],
        block["bv"],
        block["bo"],
    )
    x = x + attn
    hidden = gelu(layer_norm(x, gamma2, beta2, eps) @ block["mlp_w1"] + block["mlp_b1"])
    return x + hidden @ block["mlp_w2"] + block["mlp_b2"], weights


def add_positions(tokens: np.ndarray, grid_hw: tuple[int, int], params: Params) -> np.ndarray:
    """Patch tokens ``(B, gh*gw, D)`` plus the position table that ``params["pos_embed"]`` names."""
    kind = params["pos_embed"]
    if kind == "none":
        return tokens
    if kind == "rowcol":
        return add_2d_position(tokens, grid_hw, params["row_pos"], params["col_pos"])
    if kind == "learned":
        table = params["pos_table"]
    elif kind == "sincos1d":
        table = sincos_1d(grid_hw[0] * grid_hw[1], tokens.shape[-1])
    elif kind == "sincos2d":
        table = sincos_2d(grid_hw, tokens.shape[-1])
    else:
        raise ValueError(f"unknown pos_embed {kind!r}; the reference has learned, sincos1d, sincos2d, rowcol, none")
    if table.shape[0] != tokens.shape[1]:
        raise ValueError(
            f"position table has {table.shape[0]} rows for {tokens.shape[1]} patches: "
            f"feed images of the size the parameters were trained at"
        )
    return tokens + table[None]


def embed(images: np.ndarray, params: Params) -> np.ndarray:
    """Images ``(B, H, W, C)`` -> tokens with positions and prefix tokens ``(B, R + N, D)``."""
    kernel = params["patch_kernel"]
    patch = kernel.shape[0]
    tokens = linear_patch_embedding(patchify(images, patch), kernel.reshape(-1, kernel.shape[-1]), params["patch_b"])
    tokens = add_positions(tokens, (images.shape[1] // patch, images.shape[2] // patch), params)
    return prepend_tokens(tokens, params["prefix"])


def pool_sequence(sequence: np.ndarray, pool: str, num_prefix: int) -> np.ndarray:
    """``(B, R + N, D) -> (B, D)``: the class token (position 0), or the mean / max over patch tokens."""
    if pool == "token":
        return sequence[:, 0]
    patches = sequence[:, num_prefix:]
    return patches.mean(axis=1) if pool == "mean" else patches.max(axis=1)


def encode(images: np.ndarray, params: Params) -> tuple[np.ndarray, list[np.ndarray]]:
    """Images ``(B, H, W, C)`` -> ``(tokens after the final norm (B, R + N, D), [weights (B, H, N, N)] per block)``."""
    x, attentions = embed(images, params), []
    for block in params["blocks"]:
        x, weights = transformer_block(x, block, params["num_heads"], params["eps"])
        attentions.append(weights)
    if params["norm"] is not None:
        gamma, beta = params["norm"]
        x = layer_norm(x, gamma, beta, params["eps"])
    return x, attentions


def vit_forward(images: np.ndarray, params: Params) -> tuple[np.ndarray, list[np.ndarray]]:
    """Images ``(B, H, W, C)`` -> ``(logits (B, K), [attention weights (B, H, N, N)] per block)``.

    Without a head the pooled (and fc-normalised) features ``(B, D)`` come back instead of logits.
    """
    tokens, attentions = encode(images, params)
    x = pool_sequence(tokens, params["pool"], params["prefix"].shape[0])
    if params["fc_norm"] is not None:
        gamma, beta = params["fc_norm"]
        x = layer_norm(x, gamma, beta, params["eps"])
    if params["head"] is not None:
        x = x @ params["head"][0] + params["head"][1]
    return x, attentions


def _check_supported(config: Mapping[str, Any]) -> None:
    """Refuse a config option the reference does not implement (``ValueError`` naming it)."""
    for option, values in _SUPPORTED.items():
        if config.get(option, values[0]) not in values:
            raise ValueError(
                f"the NumPy reference has no {option}={config[option]!r}: compare a model with "
                f"{option} in {', '.join(values)}"
            )
    if config["pool"] == "token" and not config["class_token"]:
        raise ValueError("pool='token' reads the class token, but class_token=False: use pool='mean'")


def _block_params(take: Callable[[str], np.ndarray], p: str, qkv_bias: bool) -> dict[str, Any]:
    """One pre-norm block's arrays, taken by name from under the prefix ``p``: projections ``(D_in, D_out)``."""
    wq, wk, wv = np.split(take(p + "attn.qkv.weight"), 3)
    bq, bk, bv = np.split(take(p + "attn.qkv.bias"), 3) if qkv_bias else (0.0, 0.0, 0.0)
    return {
        "norm1": (take(p + "norm1.weight"), take(p + "norm1.bias")),
        "wq": wq.T,
        "wk": wk.T,
        "wv": wv.T,
        "bq": bq,
        "bk": bk,
        "bv": bv,
        "wo": take(p + "attn.proj.weight").T,
        "bo": take(p + "attn.proj.bias"),
        "norm2": (take(p + "norm2.weight"), take(p + "norm2.bias")),
        "mlp_w1": take(p + "mlp.fc1.weight").T,
        "mlp_b1": take(p + "mlp.fc1.bias"),
        "mlp_w2": take(p + "mlp.fc2.weight").T,
        "mlp_b2": take(p + "mlp.fc2.bias"),
    }


def params_from_state_dict(state_dict: Mapping[str, np.ndarray], config: Mapping[str, Any]) -> Params:
    """The ``params`` of :func:`vit_forward` from a vitlab ``VisionTransformer`` state dict.

    Args:
        state_dict: parameter name -> NumPy array (e.g. ``{k: v.double().numpy() for k, v in
            model.state_dict().items()}``).
        config: the model's ``ViTConfig.to_dict()``.

    Raises:
        ValueError: for an option the reference does not implement (rotary positions, post-norm
            blocks, other attention or patch tokenisers) or a state-dict entry it would ignore
            (layer scale, qk-norm, pre-norm, ...).
    """
    _check_supported(config)
    unused = dict(state_dict)

    def take(name: str) -> np.ndarray:
        if name not in unused:
            raise ValueError(f"the state dict has no {name!r}: pass the state dict of the model that config describes")
        return unused.pop(name)

    dim = config["embed_dim"]

    params: Params = {
        "pos_embed": config["pos_embed"],
        "pool": config["pool"],
        "num_heads": config["num_heads"],
        "eps": config["norm_eps"],
        "patch_kernel": take("patch_embed.proj.weight").transpose(2, 3, 1, 0),
        "patch_b": take("patch_embed.proj.bias"),
    }
    if config["pos_embed"] == "learned":
        params["pos_table"] = take("pos_embed.weight")[0]
    if config["pos_embed"] == "rowcol":
        params["row_pos"], params["col_pos"] = take("pos_embed.row"), take("pos_embed.col")
    prefix = [
        take(name).reshape(-1, dim)
        for name, on in (("class_token", config["class_token"]), ("reg_token", config["reg_tokens"]))
        if on
    ]
    params["prefix"] = np.concatenate(prefix) if prefix else np.zeros((0, dim))

    params["blocks"] = [_block_params(take, f"blocks.{i}.", config["qkv_bias"]) for i in range(config["depth"])]

    use_fc_norm = config["pool"] in ("mean", "max") if config["fc_norm"] is None else config["fc_norm"]
    final = config["final_norm"]
    params["norm"] = (take("norm.weight"), take("norm.bias")) if final and not use_fc_norm else None
    params["fc_norm"] = (take("fc_norm.weight"), take("fc_norm.bias")) if final and use_fc_norm else None
    params["head"] = (take("head.weight").T, take("head.bias")) if config["num_classes"] > 0 else None
    if unused:
        raise ValueError(
            f"the NumPy reference does not implement the parts holding {', '.join(sorted(unused))}: "
            f"compare a model without them (no layer scale, qk-norm or pre-norm)"
        )
    return params
