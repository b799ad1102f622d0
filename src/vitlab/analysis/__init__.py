"""What a model costs and is made of, read without training it.

- ``cost``: the token-count cost model (FLOPs and attention memory per kind of attention, the pairs a
  convolution mixes); ``cost_report``: the report ``vitlab cost`` prints.
- ``params``: parameters by component; the report ``vitlab params`` prints.
- ``shapes``: tensor shapes through a real forward pass; the report ``vitlab shapes`` prints.
- ``qk``: why attention divides its scores by ``sqrt(d_k)``, measured; ``vitlab shapes --qk-variance``.
- ``table``: the right-aligned text table the reports share.

Every report is a function that returns its text; printing it is the command's business.
"""
