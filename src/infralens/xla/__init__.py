"""JAX and XLA: what a traced function becomes, and how XLA splits it across devices.

* :mod:`~infralens.xla.devices`: simulated CPU devices for sharding without a cluster.
* :mod:`~infralens.xla.hlo`: the stages of one function (jaxpr, StableHLO, HLO, optimized HLO) and
  a reader for HLO text: instructions, fusions, collectives.
* :mod:`~infralens.xla.tracing`: what tracing, lowering and compiling cost, and when ``jit`` retraces.
* :mod:`~infralens.xla.mlp`: a GPT MLP in JAX with the same weights as the PyTorch one, and the
  three-way timing (JAX ``jit``, PyTorch eager, ``torch.compile``) of a GPU cell.
* :mod:`~infralens.xla.spmd`: the Megatron layout of that MLP on a device mesh, by sharding
  annotations and by ``shard_map`` with an explicit collective.
"""
