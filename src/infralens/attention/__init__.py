"""Attention: the reference, masks, grouped-query attention and its KV cache, online softmax,
FlashAttention's tiled algorithm and its Triton kernel, and the one FLOP count.

* :mod:`~infralens.attention.reference`: naive attention, the S x S scores materialized.
* :mod:`~infralens.attention.masks`: which keys a query sees (causal, sliding window), ALiBi.
* :mod:`~infralens.attention.gqa`: grouped-query attention, a KV cache, split-KV decoding.
* :mod:`~infralens.attention.online_softmax`: one-pass softmax and the merge rule.
* :mod:`~infralens.attention.flash_reference`: FlashAttention's forward and backward passes in
  plain PyTorch.
* :mod:`~infralens.attention.io_model`: the HBM traffic of both, as closed forms.
* :mod:`~infralens.attention.triton_flash`: the same forward pass as a Triton kernel.
* :mod:`~infralens.attention.flops`: the FLOPs of one attention call.
* :mod:`~infralens.attention.mla`: multi-head latent attention, its cache and weight absorption.
* :mod:`~infralens.attention.bench`: SDPA prefill and decode sweeps on a GPU.
* :mod:`~infralens.attention.dram`: what attention kernels move to and from DRAM, by Nsight Compute.

Import the submodules; the package re-exports nothing, so importing it imports neither torch
nor triton.
"""
