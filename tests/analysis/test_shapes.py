"""Traced shapes against the formulas."""

import pytest

from vitlab.analysis.shapes import trace_shapes


@pytest.mark.parametrize(
    "image, patch, dim, heads, class_token, channels, depth",
    [
        (32, 8, 48, 3, False, 1, 1),
        (24, 4, 32, 4, True, 3, 2),
        (224, 16, 768, 12, True, 3, 1),
    ],
)
def test_traced_shapes_follow_the_formulas(image, patch, dim, heads, class_token, channels, depth):
    shapes = trace_shapes(
        image=image, patch=patch, dim=dim, heads=heads, class_token=class_token, channels=channels, depth=depth
    )
    n = (image // patch) ** 2
    t, d = n + int(class_token), dim // heads
    assert shapes == {
        "images": (1, channels, image, image),
        "X_patch": (1, n, patch * patch * channels),
        "patch tokens": (1, n, dim),
        "block input": (1, t, dim),
        "Q": (1, heads, t, d),
        "K": (1, heads, t, d),
        "V": (1, heads, t, d),
        "QK^T": (1, heads, t, t),
        "attention weights": (1, heads, t, t),
        "attention output": (1, t, dim),
        "block output": (1, t, dim),
    }


def test_trace_refuses_attention_too_large_to_hold():
    with pytest.raises(ValueError, match="vitlab cost"):
        trace_shapes(image=2048, patch=2, dim=32, heads=4)
