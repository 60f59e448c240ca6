"""A GPU training loop, measured and then distributed: the loop, DDP, ZeRO and FSDP.

Each module is small, named for what it does, and runnable with ``python -m``:

* ``train_single_gpu`` (Lab 02): the complete loop (data, forward, loss, backward, optimizer
  step, ``zero_grad``) with bf16 autocast and activation checkpointing as switches;
  ``MemoryWatch`` reads memory after every phase with Lab 01's probes and ``ledger_by_phase``
  predicts each reading from Lab 01's ledger.
* ``train_ddp`` (Lab 03): the same loop under ``DistributedDataParallel``, launched by torchrun;
  ``ddp_check`` proves its gradients equal one process's; ``ddp_overlap`` measures step time,
  all-reduce time and overlap on GPUs.
* ``zero_memory_accounting`` (Lab 08): per-GPU model state and per-step communication under
  DDP, ZeRO-1/2/3 and FSDP, on top of :func:`infralens.memory.zero_model_state_bytes`;
  ``fsdp_shards`` measures each rank's share under DDP and FSDP2.
* ``launch``: run a module under torchrun as a subprocess (the book's cells and the tests).

Nothing is imported here: ``python -m`` runs these modules as scripts, and a package that imported
them first would make ``runpy`` warn; it also keeps the torch-free calculator fast to start.
"""
