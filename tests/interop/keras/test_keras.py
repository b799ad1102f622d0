"""Keras ViTs -> vitlab: the textbook's model on images or on patch tokens, its TensorFlow listing's
custom patch layer, positions held every usual way; anything vitlab cannot place is refused by name."""

import numpy as np
import pytest
import torch

pytest.importorskip("keras")
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # keras internals
import keras  # noqa: E402
import keras_textbook as textbook  # noqa: E402

from vitlab import patchify  # noqa: E402
from vitlab.errors import CheckpointError  # noqa: E402
from vitlab.interop import from_keras  # noqa: E402
from vitlab.models import get_config  # noqa: E402


def perturbed(model: keras.Model) -> keras.Model:
    """Move every weight off its init (unit LayerNorm scales, zero biases) so no wrong mapping hides."""
    rng = np.random.default_rng(0)
    model.set_weights([w + 0.1 * rng.standard_normal(w.shape).astype(np.float32) for w in model.get_weights()])
    return model


@torch.no_grad()
def assert_same_outputs(source: keras.Model, model: torch.nn.Module, images: torch.Tensor, patch: int | None = None):
    """Keras on ``images`` (NHWC) or, given ``patch``, on their vitlab patch tokens; vitlab on the images."""
    inputs = patchify(images, patch) if patch else images.permute(0, 2, 3, 1)
    expected = np.asarray(source.predict(inputs.numpy(), verbose=0))
    probabilities = torch.softmax(model(images), dim=-1).numpy()
    assert expected.std() > 0.01  # outputs that depend on the input
    assert np.abs(probabilities - expected).max() <= 1e-5


def test_textbook_model_becomes_vit_seed():
    source = perturbed(textbook.textbook_vit())
    model = from_keras(source)
    assert model.config == get_config("vit-seed")
    assert_same_outputs(source, model, torch.randn(4, 1, 28, 28))


@pytest.mark.parametrize("positions", textbook.POSITIONS)
def test_token_input_model_takes_the_images_its_tokens_came_from(positions):
    source = perturbed(textbook.textbook_vit_tokens(positions))
    model = from_keras(source)
    assert model.config == get_config("vit-seed")  # 16 tokens of 49 values: 28x28x1 in 7x7 patches
    assert_same_outputs(source, model, torch.randn(4, 1, 28, 28), patch=7)


def test_constant_positions_are_the_pages_model():
    """Embedding(16, 64) on arange(16) is evaluated while the graph is built: the graph adds a constant
    (70,922 trainable parameters, the page's count), which vitlab keeps as its position table."""
    source = textbook.textbook_vit_tokens("constant")
    assert sum(int(np.prod(w.shape)) for w in source.trainable_weights) == 70_922
    model = from_keras(source)
    assert model.pos_embed.weight.abs().max() > 0.01
    assert_same_outputs(source, model, torch.randn(4, 1, 28, 28), patch=7)


def test_token_grid_that_is_not_square_needs_the_image_size():
    source = perturbed(textbook.textbook_vit_tokens("layer", tokens=8, depth=1))
    with pytest.raises(CheckpointError, match=r"8 tokens of 49 values.*pass img_size=\(H, W\)"):
        from_keras(source)
    model = from_keras(source, img_size=(14, 28))
    assert (model.config.img_size, model.config.patch_size, model.config.in_chans) == ((14, 28), 7, 1)
    assert_same_outputs(source, model, torch.randn(4, 1, 14, 28), patch=7)


def test_listing_patch_embedding_layer():
    source = perturbed(textbook.listing_vit())
    model = from_keras(source)
    cfg = model.config
    assert (cfg.img_size, cfg.patch_size, cfg.in_chans, cfg.mlp_ratio) == ((64, 64), 8, 3, 4.0)
    assert_same_outputs(source, model, torch.randn(2, 3, 64, 64))


def test_listing_transformer_block_layer_is_refused_by_name():
    with pytest.raises(CheckpointError, match=r"'listing_block' \(TransformerBlock\)"):
        from_keras(textbook.listing_vit(custom_block=True))


def test_conv1d_is_refused_by_name():
    mixer = keras.layers.Conv1D(64, 3, padding="same", name="token_mixer")
    with pytest.raises(CheckpointError, match=r"'token_mixer' \(Conv1D\)"):
        from_keras(textbook.textbook_vit_tokens(depth=1, mixer=mixer))


def test_custom_layer_that_computes_something_else_is_refused_by_name():
    source = perturbed(textbook.textbook_vit(depth=1, position_layer=textbook.ScaledPosition))
    with pytest.raises(CheckpointError, match=r"patch embedding .*'positions' \(ScaledPosition\).* differs"):
        from_keras(source)


def test_patches_cut_in_another_order_are_refused():
    source = textbook.textbook_vit(depth=1, order=(3, 1, 2, 4))  # patches column by column
    with pytest.raises(CheckpointError, match=r"patch projection's input .*'permute.*raster order"):
        from_keras(source)


def test_custom_block_inside_the_stream_is_refused_by_name():
    tokens = keras.Input((16, 49))
    x = keras.layers.Dense(64)(tokens)
    x = textbook.TransformerBlock(64, 4, name="opaque")(x)
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.LayerNormalization()(x))
    with pytest.raises(CheckpointError, match=r"'opaque' \(TransformerBlock\)"):
        from_keras(keras.Model(tokens, keras.layers.Dense(10)(x)))


def test_other_activation_is_refused():
    with pytest.raises(ValueError, match="activation 'relu'"):
        from_keras(textbook.textbook_vit(depth=1, activation="relu"))
