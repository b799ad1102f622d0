"""The textbook's Keras ViTs, built as their listings show (test oracles; need KERAS_BACKEND=torch).

- :func:`textbook_vit_tokens`: the Keras page's model. Its input is the patch-token matrix
  ``keras.Input((16, 49))`` (patchify runs in NumPy before the model), then Dense 64, positions,
  2 pre-norm blocks of 4 heads, LayerNorm, mean over tokens, Dense 10 softmax. With
  ``positions="constant"`` the positions are ``Embedding(16, 64)`` applied to ``arange(16)``:
  Keras computes that while the graph is built, so the graph adds a constant and the model has
  the page's 70,922 trainable parameters.
- :func:`textbook_vit`: the same model on 28x28x1 images, patchify as Reshape/Permute/Reshape.
- :func:`listing_vit`: the TensorFlow listing's ``PatchEmbedding`` (and ``TransformerBlock``) as
  Keras 3 custom layers, on 64x64x3 images cut into 8x8 patches.
"""

import keras

POSITIONS = ("layer", "constant", "variable", "encoder")


class PositionEmbedding(keras.layers.Layer):
    """Adds a learned ``(tokens, width)`` table: the listing's 1,024 parameters of "where"."""

    def build(self, input_shape):
        self.table = self.add_weight(shape=tuple(input_shape[1:]), initializer="random_normal", name="table")

    def call(self, x):
        return x + self.table


class ScaledPosition(PositionEmbedding):
    """Holds a position table like :class:`PositionEmbedding` but multiplies by it (vitlab cannot place it)."""

    def call(self, x):
        return x * self.table


class PatchEncoder(keras.layers.Layer):
    """Projection and positions in one layer: ``Dense(width)(tokens) + Embedding(N, width)(arange(N))``."""

    def __init__(self, num_patches, width, **kwargs):
        super().__init__(**kwargs)
        self.num_patches = num_patches
        self.projection = keras.layers.Dense(width)
        self.position_embedding = keras.layers.Embedding(num_patches, width)

    def call(self, tokens):
        return self.projection(tokens) + self.position_embedding(keras.ops.arange(self.num_patches))


class PatchEmbedding(keras.layers.Layer):
    """The TensorFlow listing's layer: ``Conv2D(D, P, strides=P)`` then reshape to ``(B, N, D)``;
    with ``num_patches`` it also adds learned positions (an ``Embedding`` of the token index)."""

    def __init__(self, patch_size, embed_dim, num_patches=None, **kwargs):
        super().__init__(**kwargs)
        self.num_patches = num_patches
        self.proj = keras.layers.Conv2D(filters=embed_dim, kernel_size=patch_size, strides=patch_size, padding="valid")
        self.position = keras.layers.Embedding(num_patches, embed_dim) if num_patches else None

    def call(self, x):
        z = self.proj(x)  # (B, H/P, W/P, D)
        z = keras.ops.reshape(z, (keras.ops.shape(z)[0], -1, keras.ops.shape(z)[-1]))
        return z if self.position is None else z + self.position(keras.ops.arange(self.num_patches))


class TransformerBlock(keras.layers.Layer):
    """The TensorFlow listing's block as one custom layer (its call is code vitlab cannot read)."""

    def __init__(self, embed_dim, num_heads, mlp_ratio=4, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.attn = keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=embed_dim // num_heads, dropout=dropout
        )
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.mlp = keras.Sequential(
            [
                keras.layers.Dense(mlp_ratio * embed_dim, activation="gelu"),
                keras.layers.Dropout(dropout),
                keras.layers.Dense(embed_dim),
                keras.layers.Dropout(dropout),
            ]
        )

    def call(self, z, training=False):
        y = self.norm1(z)
        z = z + self.attn(y, y, training=training)
        return z + self.mlp(self.norm2(z), training=training)


def block(x, width=64, heads=4, activation="gelu", mlp_ratio=2, dropout=0.0):
    normed = keras.layers.LayerNormalization(epsilon=1e-6)(x)
    attention = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=width // heads, dropout=dropout)(
        normed, normed
    )
    x = keras.layers.Add()([x, attention])  # residual
    normed = keras.layers.LayerNormalization(epsilon=1e-6)(x)
    hidden = keras.layers.Dense(width * mlp_ratio, activation=activation)(normed)
    hidden = keras.layers.Dropout(dropout)(hidden)
    hidden = keras.layers.Dense(width)(hidden)
    hidden = keras.layers.Dropout(dropout)(hidden)
    return keras.layers.Add()([x, hidden])  # residual


def head(x, classes=10):
    """LayerNorm -> mean over tokens -> Dense softmax."""
    x = keras.layers.LayerNormalization(epsilon=1e-6)(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.layers.Dense(classes, activation="softmax")(x)


def add_positions(x, positions, tokens, width):
    """``x`` (projected tokens) plus a learned table held as ``positions`` says."""
    if positions == "layer":
        return PositionEmbedding()(x)
    if positions == "constant":  # evaluated now: the graph adds a constant tensor
        return x + keras.layers.Embedding(tokens, width)(keras.ops.arange(tokens))
    if positions == "variable":
        return x + keras.Variable(keras.random.normal((1, tokens, width), stddev=0.02, seed=1))
    raise ValueError(f"positions must be one of {POSITIONS}, got {positions!r}")


def textbook_vit_tokens(
    positions="layer", tokens=16, values=49, width=64, heads=4, depth=2, classes=10, mixer=None
) -> keras.Model:
    """Input 16 tokens of 49 -> Dense(64) -> + positions -> 2 blocks -> LN -> mean -> softmax.
    ``positions="encoder"`` projects and adds positions in one :class:`PatchEncoder`; ``mixer``
    is a layer applied to the tokens before the first block."""
    patches = keras.Input((tokens, values))
    if positions == "encoder":
        x = PatchEncoder(tokens, width)(patches)
    else:
        x = add_positions(keras.layers.Dense(width)(patches), positions, tokens, width)
    if mixer is not None:
        x = mixer(x)
    for _ in range(depth):
        x = block(x, width, heads)
    return keras.Model(patches, head(x, classes))


def textbook_vit(
    side=28,
    patch=7,
    width=64,
    heads=4,
    depth=2,
    classes=10,
    activation="gelu",
    order=(1, 3, 2, 4),
    position_layer=PositionEmbedding,
) -> keras.Model:
    """Input 28x28x1 -> 16 tokens of 49 -> Dense(64) -> + positions -> 2 blocks -> LN -> mean -> softmax.
    ``order`` is the Permute of the patchify reshape ``(grid, patch, grid, patch)``."""
    grid = side // patch
    images = keras.Input((side, side, 1))
    x = keras.layers.Reshape((grid, patch, grid, patch))(images)
    x = keras.layers.Permute(order)(x)
    x = keras.layers.Reshape((grid * grid, patch * patch))(x)  # patchify: (16, 49)
    x = keras.layers.Dense(width)(x)
    x = position_layer(name="positions")(x)
    for _ in range(depth):
        x = block(x, width, heads, activation)
    return keras.Model(images, head(x, classes))


def listing_vit(
    side=64, channels=3, patch=8, width=64, heads=4, depth=1, classes=10, custom_block=False
) -> keras.Model:
    """Images 64x64x3 -> PatchEmbedding(8, 64) with positions -> blocks (mlp_ratio 4, dropout) -> LN -> mean
    -> softmax; ``custom_block`` uses the listing's :class:`TransformerBlock` layer."""
    images = keras.Input((side, side, channels))
    x = PatchEmbedding(patch, width, num_patches=(side // patch) ** 2)(images)
    for _ in range(depth):
        x = (
            TransformerBlock(width, heads, dropout=0.1, name="listing_block")(x)
            if custom_block
            else block(x, width, heads, mlp_ratio=4, dropout=0.1)
        )
    return keras.Model(images, head(x, classes))
