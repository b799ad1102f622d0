"""Pure state-dict maps between timm, Hugging Face and vitlab names, and config inference.

Every map takes and returns ``dict[str, Tensor]`` and builds no module. A key a map does not
know passes through unchanged, so :func:`vitlab.interop.load_state_dict` names it afterwards.

vitlab's names are timm's except for the tokens and positions (``R`` prefix tokens: class
token, then registers). A learned position of a prefix token is a constant added to that
token, so vitlab folds it in and keeps positions for patch tokens only:

=========================  ======================================  =============================
vitlab                     timm ``VisionTransformer``              Hugging Face ``ViT*``
=========================  ======================================  =============================
``class_token (1,1,D)``    ``cls_token + pos_embed[:, :1]``         ``embeddings.cls_token +
                                                                    position_embeddings[:, :1]``
``reg_token (1,R-1,D)``    ``reg_token + pos_embed[:, 1:R]``        --
``pos_embed.weight``       ``pos_embed[:, R:]`` (all rows when      ``position_embeddings[:, 1:]``
``(1,N,D)``                ``no_embed_class``)
``blocks.i.attn.qkv``      same                                     ``q_proj, k_proj, v_proj``
                                                                    stacked on the output axis
``blocks.i.norm1/norm2``   same                                     ``layernorm_before/after``
``norm``, ``head``         same                                     ``layernorm``, ``classifier``
=========================  ======================================  =============================
"""

from __future__ import annotations

import math
import re
from dataclasses import fields
from typing import Any

import torch

from ..checks import reject_unknown
from ..errors import CheckpointError, ConfigError
from ..models.vit_config import ViTConfig

StateDict = dict[str, torch.Tensor]

PREFIX_KEYS = ("class_token", "reg_token")

# Published Hugging Face checkpoints -> the in-memory names of newer transformers releases
# (transformers' own ViTModel conversion rules, in this order).
HF_ON_DISK_TO_IN_MEMORY = (
    (r"(^|\.)encoder\.layer\.(\d+)\.", r"\1layers.\2."),
    (r"\.attention\.attention\.query\.", ".attention.q_proj."),
    (r"\.attention\.attention\.key\.", ".attention.k_proj."),
    (r"\.attention\.attention\.value\.", ".attention.v_proj."),
    (r"\.attention\.output\.dense\.", ".attention.o_proj."),
    (r"\.intermediate\.dense\.", ".mlp.fc1."),
    (r"\.output\.dense\.", ".mlp.fc2."),
)
# In-memory Hugging Face names (without the ``vit.`` prefix) -> vitlab.
_HF_TO_VITLAB = (
    (r"^embeddings\.patch_embeddings\.projection\.", "patch_embed.proj."),
    (r"^layers\.(\d+)\.attention\.o_proj\.", r"blocks.\1.attn.proj."),
    (r"^layers\.(\d+)\.layernorm_before\.", r"blocks.\1.norm1."),
    (r"^layers\.(\d+)\.layernorm_after\.", r"blocks.\1.norm2."),
    (r"^layers\.(\d+)\.mlp\.", r"blocks.\1.mlp."),
    (r"^layernorm\.", "norm."),
    (r"^classifier\.", "head."),
)


def _rename(key: str, rules: tuple[tuple[str, str], ...]) -> str:
    for pattern, repl in rules:
        key = re.sub(pattern, repl, key)
    return key


def _num_prefix(state: StateDict) -> int:
    return sum(state[k].shape[1] for k in PREFIX_KEYS if k in state)


def _fold_prefix_positions(state: StateDict, pos: torch.Tensor) -> torch.Tensor:
    """Add the first rows of ``pos (1, R + N, D)`` to the prefix tokens; return the patch rows."""
    start = 0
    for key in PREFIX_KEYS:
        if key in state:
            n = state[key].shape[1]
            state[key] = state[key] + pos[:, start : start + n]
            start += n
    return pos[:, start:]


def _is_square(n: int) -> bool:
    return n >= 0 and math.isqrt(n) ** 2 == n


def timm_to_vitlab(state: StateDict, num_patches: int | None = None) -> StateDict:
    """A timm ``VisionTransformer`` state dict in vitlab's names.

    Args:
        state: timm names (``cls_token``, ``pos_embed``, ``blocks.0.attn.qkv.weight``, ...).
        num_patches: patch tokens ``N``; tells whether ``pos_embed`` (``(1, N, D)`` with timm's
            ``no_embed_class=True``, else ``(1, R + N, D)``) has rows for the prefix tokens.
            ``None`` decides by which of the two is a square grid.
    """
    out = dict(state)
    if "cls_token" in out:
        out["class_token"] = out.pop("cls_token")
    if "pos_embed" in out:
        pos = out.pop("pos_embed")
        rows, prefix = pos.shape[1], _num_prefix(out)
        if num_patches is not None:
            embeds_prefix = rows == num_patches + prefix and prefix > 0
        elif prefix and _is_square(rows) != _is_square(rows - prefix):
            embeds_prefix = _is_square(rows - prefix)
        elif prefix:
            raise ConfigError(
                f"cannot tell whether timm's pos_embed of {rows} rows includes rows for the {prefix} "
                f"prefix tokens: pass num_patches (the patch grid's size)"
            )
        else:
            embeds_prefix = False
        out["pos_embed.weight"] = _fold_prefix_positions(out, pos) if embeds_prefix else pos
    if "norm_pre.weight" in out and "patch_embed.proj.bias" not in out:
        weight = out["patch_embed.proj.weight"]  # timm's pre-norm ViT (CLIP) has no patch bias
        out["patch_embed.proj.bias"] = weight.new_zeros(weight.shape[0])
    return out


def vitlab_to_timm(state: StateDict, no_embed_class: bool = False) -> StateDict:
    """The inverse of :func:`timm_to_vitlab` for a vitlab state dict with learned (or no) positions.

    With ``no_embed_class=False`` (timm's default) ``pos_embed`` gets zero rows for the prefix
    tokens, which keep their folded values: the timm model computes the same function.
    """
    out = dict(state)
    if "pos_embed.weight" in out:
        pos = out.pop("pos_embed.weight")
        prefix = _num_prefix(out)
        if prefix and not no_embed_class:
            pos = torch.cat([pos.new_zeros(1, prefix, pos.shape[-1]), pos], dim=1)
        out["pos_embed"] = pos
    if "class_token" in out:
        out["cls_token"] = out.pop("class_token")
    return out


def hf_key_scheme(state: StateDict) -> str:
    """``"on-disk"`` for the names of published checkpoints, else ``"in-memory"``."""
    on_disk = any(".attention.attention." in k or k.startswith(("encoder.layer.", "vit.encoder.layer.")) for k in state)
    return "on-disk" if on_disk else "in-memory"


def hf_to_vitlab(state: StateDict) -> StateDict:
    """A Hugging Face ``ViTForImageClassification`` / ``ViTModel`` state dict in vitlab's names.

    Accepts both key schemes: the names of published checkpoints
    (``vit.encoder.layer.{i}.attention.attention.query.weight``, ``...intermediate.dense``) and
    the in-memory names of newer transformers releases (``vit.layers.{i}.attention.q_proj.weight``,
    ``...mlp.fc1``). ``ViTModel``'s pooler (``pooler.dense``, unused for classification) is dropped.
    """
    renamed = {_rename(re.sub(r"^vit\.", "", k), HF_ON_DISK_TO_IN_MEMORY): v for k, v in state.items()}
    out: StateDict = {}
    qkv: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in renamed.items():
        if key.startswith("pooler."):
            continue
        match = re.match(r"^layers\.(\d+)\.attention\.([qkv])_proj\.(weight|bias)$", key)
        if match:
            qkv.setdefault(f"blocks.{match[1]}.attn.qkv.{match[3]}", {})[match[2]] = value
        elif key == "embeddings.cls_token":
            out["class_token"] = value
        elif key == "embeddings.position_embeddings":
            out["pos_embed.weight"] = value
        else:
            out[_rename(key, _HF_TO_VITLAB)] = value
    for key, parts in qkv.items():
        if set(parts) == {"q", "k", "v"}:
            out[key] = torch.cat([parts["q"], parts["k"], parts["v"]], dim=0)
        else:  # an incomplete triple stays visible to the key check
            layer, kind = key.split(".")[1], key.rsplit(".", 1)[1]
            out.update({f"layers.{layer}.attention.{p}_proj.{kind}": v for p, v in parts.items()})
    if "pos_embed.weight" in out and "class_token" in out:
        out["pos_embed.weight"] = _fold_prefix_positions(out, out["pos_embed.weight"])
    return out


def detect_format(state: StateDict) -> str | None:
    """Which names ``state`` uses: ``"hf"``, ``"timm"``, ``"vitlab"``, or ``None`` for none of them.

    Without tokens or learned positions timm's and vitlab's names coincide; that reads as ``"timm"``.
    """
    keys = set(state)
    if any("embeddings.patch_embeddings." in k for k in keys):
        return "hf"
    if keys & {"cls_token", "pos_embed"}:
        return "timm"
    if "class_token" in keys or any(k.startswith("pos_embed.") for k in keys):
        return "vitlab"
    if "patch_embed.proj.weight" in keys:
        return "timm"
    return None


def infer_config(state: StateDict, **known: Any) -> tuple[ViTConfig, dict[str, str]]:
    """The :class:`ViTConfig` a vitlab-named ``state`` fits, and the fields it had to guess.

    Shapes and key names give the widths, depth, tokens, norms, head and positions; ``known``
    fields (from a module or a config file) take precedence. ``num_heads`` must be known: no tensor
    records it and every divisor of the width fits the weights equally, so a missing one is a
    :class:`~vitlab.errors.ConfigError` naming the readings. Other fields no tensor records are
    guessed and reported as ``{field: why}``: ``img_size`` without a position table (224), ``pool``
    when a class token and a post-pool norm both exist (mean).
    """
    reject_unknown(known, (f.name for f in fields(ViTConfig)), "ViTConfig")
    if "patch_embed.proj.weight" not in state:
        raise CheckpointError(
            f"no patch embedding ('patch_embed.proj.weight') among the keys "
            f"{', '.join(sorted(state)[:5])}, ...: this is not a ViT state dict vitlab can read"
        )
    dim, in_chans, ph, pw = state["patch_embed.proj.weight"].shape
    if ph != pw:
        raise CheckpointError(f"patches of {ph}x{pw}: vitlab's ViT uses square patches")
    depth = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    hidden = state["blocks.0.mlp.fc1.weight"].shape[0] if "blocks.0.mlp.fc1.weight" in state else 4 * dim
    class_token, fc_norm = "class_token" in state, "fc_norm.weight" in state
    inferred: dict[str, Any] = dict(
        patch_size=ph,
        in_chans=in_chans,
        embed_dim=dim,
        depth=depth,
        mlp_ratio=hidden / dim,
        qkv_bias="blocks.0.attn.qkv.bias" in state,
        qk_norm="blocks.0.attn.q_norm.weight" in state,
        layer_scale=1e-5 if "blocks.0.ls1.gamma" in state else None,
        class_token=class_token,
        reg_tokens=state["reg_token"].shape[1] if "reg_token" in state else 0,
        pre_norm="norm_pre.weight" in state,
        final_norm=fc_norm or "norm.weight" in state,
        fc_norm=fc_norm,
        pool="mean" if fc_norm or not class_token else "token",
        num_classes=state["head.weight"].shape[0] if "head.weight" in state else 0,
    )
    guessed: dict[str, str] = {}
    if "pos_embed.weight" in state:
        inferred["pos_embed"] = "learned"
        rows = state["pos_embed.weight"].shape[1]
        if _is_square(rows):
            inferred["img_size"] = math.isqrt(rows) * ph
        elif "img_size" not in known:
            raise ConfigError(f"the position table has {rows} rows, not a square grid: pass img_size")
    elif "pos_embed.row" in state:
        inferred["pos_embed"] = "rowcol"
        inferred["img_size"] = (state["pos_embed.row"].shape[0] * ph, state["pos_embed.col"].shape[0] * ph)
    elif "pos_embed" not in known:
        raise ConfigError(
            "the state dict has no position parameters and no config says which fixed kind the model "
            "used: pass pos_embed ('sincos2d', 'sincos1d', 'rope' or 'none')"
        )
    else:
        inferred["img_size"] = 224
        guessed["img_size"] = "224 (no position table to read it from)"
    if "num_heads" not in known:
        *fits, last = (str(n) for n in range(1, dim + 1) if dim % n == 0)
        readings = f"{', '.join(fits)} or {last}" if fits else last
        raise ConfigError(
            f"the weights do not record the number of attention heads and width {dim} splits evenly "
            f"into {readings} heads: pass num_heads (--set num_heads=N) or the architecture (--model NAME)"
        )
    if class_token and fc_norm:
        guessed["pool"] = "'mean' (a norm after pooling; pass pool='token' if the class token was pooled)"
    config = ViTConfig(**{**inferred, **known})
    if int(config.embed_dim * config.mlp_ratio) != hidden:
        raise CheckpointError(
            f"MLP width {hidden} is not int(embed_dim * mlp_ratio) for "
            f"embed_dim={config.embed_dim}, mlp_ratio={config.mlp_ratio}"
        )
    return config, {k: v for k, v in guessed.items() if k not in known}
