"""The textbook's Keras ViT -> vitlab's vit-seed: same softmax outputs."""
import numpy as np
import pytest
import torch

pytest.importorskip("keras")
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")   # keras internals
from keras_textbook import textbook_vit  # noqa: E402

from vitlab.interop import from_keras  # noqa: E402
from vitlab.models import get_config  # noqa: E402


@torch.no_grad()
def test_textbook_model_becomes_vit_seed():
    source = textbook_vit()
    rng = np.random.default_rng(0)      # move every weight off its init (unit LayerNorm scales, zero biases)
    source.set_weights([w + 0.1 * rng.standard_normal(w.shape).astype(np.float32) for w in source.get_weights()])
    model = from_keras(source)
    assert model.config == get_config("vit-seed")
    images = rng.standard_normal((4, 28, 28, 1)).astype(np.float32)
    expected = np.asarray(source.predict(images, verbose=0))
    probabilities = torch.softmax(model(torch.from_numpy(images).permute(0, 3, 1, 2)), dim=-1).numpy()
    assert expected.std() > 0.01                         # outputs that depend on the input
    assert np.abs(probabilities - expected).max() <= 1e-5


def test_other_activation_is_refused():
    with pytest.raises(ValueError, match="activation 'relu'"):
        from_keras(textbook_vit(depth=1, activation="relu"))
