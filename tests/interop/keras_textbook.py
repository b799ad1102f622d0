"""The textbook's Keras ViT, built as its listing shows (a test oracle; needs KERAS_BACKEND=torch)."""
import keras


class PositionEmbedding(keras.layers.Layer):
    """Adds a learned ``(tokens, width)`` table: the listing's 1,024 parameters of "where"."""

    def build(self, input_shape):
        self.table = self.add_weight(shape=tuple(input_shape[1:]), initializer="random_normal", name="table")

    def call(self, x):
        return x + self.table


def block(x, width=64, heads=4, activation="gelu"):
    normed = keras.layers.LayerNormalization(epsilon=1e-6)(x)
    attention = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=width // heads)(normed, normed)
    x = keras.layers.Add()([x, attention])              # residual
    normed = keras.layers.LayerNormalization(epsilon=1e-6)(x)
    hidden = keras.layers.Dense(width * 2, activation=activation)(normed)
    hidden = keras.layers.Dense(width)(hidden)
    return keras.layers.Add()([x, hidden])              # residual


def textbook_vit(side=28, patch=7, width=64, heads=4, depth=2, classes=10, activation="gelu") -> keras.Model:
    """Input 28x28x1 -> 16 tokens of 49 -> Dense(64) -> + positions -> 2 blocks -> LN -> mean -> softmax."""
    grid = side // patch
    images = keras.Input((side, side, 1))
    x = keras.layers.Reshape((grid, patch, grid, patch))(images)
    x = keras.layers.Permute((1, 3, 2, 4))(x)
    x = keras.layers.Reshape((grid * grid, patch * patch))(x)   # patchify: (16, 49)
    x = keras.layers.Dense(width)(x)
    x = PositionEmbedding()(x)
    for _ in range(depth):
        x = block(x, width, heads, activation)
    x = keras.layers.LayerNormalization(epsilon=1e-6)(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(images, keras.layers.Dense(classes, activation="softmax")(x))
