"""Look inside a model, then test what the picture is worth.

Looking:

- ``record``: :func:`record_attention` captures every layer's weights ``(B, H, N, N)`` with the fast
  attention path left on.
- ``maps``: maps over the patch grid ``(B, gh, gw)``: query attention per head and layer, rollout,
  gradient, gradient x input, occlusion (:func:`compute_maps`); per-head statistics.
- ``figures``: the maps over the image, per-head attention, curves (PNG, headless).
- ``textbook``: position similarity, attention on random / local / repeated tokens, temperature.

Testing:

- ``faithfulness``: deletion / insertion curves, rank correlation, cascading weight randomisation.
- ``audit``: deletion / insertion areas against a random and the occlusion order, cascading weight
  randomisation and permuted-label sanity checks, a verdict per method (:func:`audit`).
- ``input_probes``: what the model does when its input moves (patches shuffled, with and without its
  positions; shifted; occluded; at other sides), run with the others by :func:`run_probes`, as Markdown;
  ``attention_depth``, what its attention does by depth (mean attention distance, entropy, weight on the
  class token, rollout distance; a CNN's receptive field), with its tables.
- ``synthetic``: a task whose label is decided by one known patch.
- ``report``: an example explained to files, per-head attention examples, checkpoint entry points.
- ``request``: one ``vitlab explain`` request (an example, the audit or the probes) run from a checkpoint.
"""

from .attention_depth import attention_diagnostics, receptive_fields
from .audit import AuditOptions, AuditResult, MethodAudit, audit, write_audit
from .faithfulness import deletion_insertion
from .input_probes import PROBES, permutation_probe, run_probes
from .maps import (
    METHODS,
    compute_maps,
    gradient_map,
    head_attention,
    head_statistics,
    occlusion_map,
    position_similarity,
    query_attention,
    rollout_map,
    rollout_matrix,
)
from .record import AttentionRecorder, attention_weights, record_attention
from .report import attention_examples, audit_checkpoint, explain_checkpoint, explain_example, probe_checkpoint
from .synthetic import key_patch_splits
from .textbook import textbook_figures

__all__ = [
    "AttentionRecorder",
    "AuditOptions",
    "AuditResult",
    "METHODS",
    "MethodAudit",
    "PROBES",
    "attention_diagnostics",
    "attention_examples",
    "attention_weights",
    "audit",
    "audit_checkpoint",
    "compute_maps",
    "deletion_insertion",
    "explain_checkpoint",
    "explain_example",
    "gradient_map",
    "head_attention",
    "head_statistics",
    "key_patch_splits",
    "occlusion_map",
    "permutation_probe",
    "position_similarity",
    "probe_checkpoint",
    "query_attention",
    "receptive_fields",
    "record_attention",
    "rollout_map",
    "rollout_matrix",
    "run_probes",
    "textbook_figures",
    "write_audit",
]
