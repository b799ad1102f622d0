"""vitlab: Vision Transformers you can understand, train, compare, explain and scale."""
from .layers import MultiHeadSelfAttention, PatchEmbedding
from .models import ViTConfig, VisionTransformer, create_model, list_models
from .ops.patches import num_tokens, patchify, unpatchify

__version__ = "0.1.0"

__all__ = ["patchify", "unpatchify", "num_tokens", "PatchEmbedding", "MultiHeadSelfAttention",
           "ViTConfig", "VisionTransformer", "create_model", "list_models", "__version__"]
