"""Transformer math, executed: shapes, a decoder block, RoPE and FLOPs per token.

Small modules, one idea each, on top of the model shapes of :mod:`infralens.models` and the
parameter counts of :mod:`infralens.memory`:

* :mod:`~infralens.transformer.shapes`: every tensor of a forward pass, by shape; MHA, MQA, GQA.
* :mod:`~infralens.transformer.block`: one Llama-style pre-norm decoder block in PyTorch.
* :mod:`~infralens.transformer.rope`: RoPE and context extension (PI, NTK-aware, YaRN).
* :mod:`~infralens.transformer.flops`: FLOPs per token and per decoding step, from a config.

``flops`` and ``shapes`` are pure Python; the others import torch. Importing this package
imports neither, so ``from infralens.transformer import flops`` stays cheap. Attention itself
(masks, GQA, the KV cache, FlashAttention) is :mod:`infralens.attention`.
"""
