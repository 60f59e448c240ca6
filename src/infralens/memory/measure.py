"""Measure the memory of one training step, phase by phase.

One AdamW step on random tokens, with a reading after each phase:

``model``      parameters on the device                     (4 bytes x params, fp32)
``forward``    + tensors autograd saved for backward (activations), after forward + loss
``backward``   activations freed, ``.grad`` present          (+4 bytes x params)
``step``       AdamW ``exp_avg`` and ``exp_avg_sq`` created  (+8 bytes x params)
``zero_grad``  ``.grad`` released (``set_to_none=True``)     (-4 bytes x params)

Two probes read the phases, sharing one training loop (:func:`_one_step`):

* :class:`AllocatorProbe` (CUDA): ``torch.cuda.memory_allocated()`` after the phase and
  ``torch.cuda.max_memory_allocated()`` within it (peak stats are reset before each phase).
  This sees everything: activations, autocast's bf16 weight copies, transient temporaries.
* :class:`TensorBytesProbe` (CPU or any device): adds up the bytes of the tensors we know
  exist (unique storages of params, ``.grad``, optimizer state, and the tensors autograd saved
  for backward, seen through ``torch.autograd.graph.saved_tensors_hooks``). No peak: ``None``.

Both also report that per-category ``breakdown`` so the allocator's number can be explained.

What the forward reading holds under ``"amp"`` besides the blocks' activations (all of it
is saved for backward, so all of it is in the ``breakdown``'s ``activations`` too):

* autocast's bf16 copies of every Linear weight (the tied ``(V, C)`` embedding included),
  2 bytes x those weights; the bf16 bias copies are cached only until autocast exits;
* ``F.cross_entropy`` on bf16 logits: ``log_softmax`` runs in bf16 and saves its (B*T, V)
  result (2 bytes each), then ``nll_loss`` (an fp32 op under autocast) saves an fp32 copy
  (4 bytes each): 6 bytes x B x T x V where fp32 saves 4.

Three more probes read single mechanisms on the CPU: :func:`saved_tensors_by_module` (what each
module of any model saves for backward; :func:`hf_llama_saved` runs it on a small Hugging Face
Llama), :func:`cross_entropy_saved` (what the loss saves, with CPU autocast or the ops CUDA
autocast runs) and :func:`ddp_gradient_bytes` (whether ``.grad`` lives in DDP's buckets).

Optimizer choices (documented because they move the numbers):

* ``fused=False``, ``capturable=False``: each parameter's ``state["step"]`` is then a 0-dim
  float32 tensor kept **on the CPU** (PyTorch's "special device hosting for step"), so it
  never shows up in ``torch.cuda.memory_allocated``. The tensor-bytes probe on a CPU run does
  count it: 4 bytes per parameter tensor, on top of the 8 bytes per parameter of the moments.
* ``foreach=False`` by default: the per-parameter loop's largest temporary is about two
  parameter-sized tensors (``exp_avg_sq.sqrt() / bias_correction2_sqrt``) for the biggest
  parameter (the tied embedding). ``foreach=True`` (PyTorch's default on CUDA) batches the
  whole parameter group, so ``torch._foreach_sqrt`` materializes one ``exp_avg_sq``-sized
  temporary for *every* parameter at once: the step's peak grows by about 4 bytes x params.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from contextlib import nullcontext

import torch
import torch.nn.functional as F

from infralens.memory.activations import activation_bytes_per_layer
from infralens.memory.ledger import training_ledger
from infralens.models.gpt import GPT, GPTConfig
from infralens.tools.checks import require_positive

PHASES = ("model", "forward", "backward", "step", "zero_grad")
PRECISIONS = ("fp32", "amp")


def _storage_key(t: torch.Tensor) -> tuple[str, int]:
    s = t.untyped_storage()
    return (str(t.device), s.data_ptr())


class _SavedTensorTracker:
    """Records (without keeping alive) the storages autograd saves for backward."""

    def __init__(self) -> None:
        self.storages: dict[tuple[str, int], int] = {}

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        self.storages[_storage_key(t)] = t.untyped_storage().nbytes()
        return t  # autograd keeps its reference as usual

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


def saved_bytes(fn: Callable[..., object], *args, **kwargs) -> int:
    """Bytes of the distinct storages autograd saves for backward while ``fn(*args)`` runs."""
    tracker = _SavedTensorTracker()
    with tracker.hooks():
        fn(*args, **kwargs)
    return sum(tracker.storages.values())


def tensor_breakdown(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    saved: dict[tuple[str, int], int] | None = None,
    device: torch.device | None = None,
    local: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> dict[str, int]:
    """Bytes of unique storages per category: params, grads, optimizer state, saved activations.

    Only tensors on ``device`` count, when given (AdamW's CPU ``step`` scalars are not on a GPU).
    ``local`` maps each tensor to the storage this process holds (FSDP's DTensors: ``to_local``).

    A storage is counted once, in the first category that holds it (params first), so the
    tied embedding counts once and saved tensors that *are* parameters are not activations.
    """
    seen: set[tuple[str, int]] = set()
    out = {"params": 0, "grads": 0, "optimizer_state": 0, "activations": 0}

    def add(cat: str, t: torch.Tensor | None) -> None:
        if t is not None and local is not None:
            t = local(t)
        if t is None or (device is not None and t.device != device):
            return
        key = _storage_key(t)
        if key not in seen:
            seen.add(key)
            out[cat] += t.untyped_storage().nbytes()

    params = list(model.parameters())
    for p in params:
        add("params", p)
    for p in params:
        add("grads", p.grad)
    if optimizer is not None:
        for st in optimizer.state.values():
            for v in st.values():
                if isinstance(v, torch.Tensor):
                    add("optimizer_state", v)
    for key, nbytes in (saved or {}).items():
        if key not in seen and (device is None or key[0] == str(device)):
            seen.add(key)
            out["activations"] += nbytes
    return out


class AllocatorProbe:
    """Reads the CUDA caching allocator: bytes allocated now and the peak since ``start``."""

    name = "cuda_allocator"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._warm_up_cublas()
        torch.cuda.synchronize(device)
        self.baseline = torch.cuda.memory_allocated(device)  # tensors from before this call

    def _warm_up_cublas(self) -> None:
        # The first matmul on a thread allocates a cuBLAS workspace (~32 MiB on Hopper) that
        # stays allocated; the backward runs on autograd's own thread, which gets its own.
        # Allocate both before the baseline so a result does not depend on call order.
        w = torch.randn(64, 64, device=self.device, requires_grad=True)
        for dtype in (torch.float32, torch.bfloat16):
            y = w.to(dtype) @ w.to(dtype)  # (64, 64)
            y.float().sum().backward()

    def start(self) -> None:
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)

    def read(self, breakdown: dict[str, int]) -> dict:
        torch.cuda.synchronize(self.device)
        return {
            "allocated": torch.cuda.memory_allocated(self.device) - self.baseline,
            "peak": torch.cuda.max_memory_allocated(self.device) - self.baseline,
            "breakdown": breakdown,
        }


class TensorBytesProbe:
    """Adds up the bytes of tensors known to exist; has no notion of transient peaks."""

    name = "tensor_bytes"
    baseline = 0

    def start(self) -> None:
        pass

    def read(self, breakdown: dict[str, int]) -> dict:
        return {"allocated": sum(breakdown.values()), "peak": None, "breakdown": breakdown}


# [memory:one-step]
def _one_step(cfg, batch, seq_len, *, precision, checkpoint, device, seed, foreach, probe):
    torch.manual_seed(seed)
    tracker = _SavedTensorTracker()
    phases: dict[str, dict] = {}
    autocast = (
        torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        if precision == "amp"
        else nullcontext()
    )

    probe.start()  # 1. parameters (fp32) on the device
    with device:  # build (and initialize) directly on the device
        model = GPT(cfg, checkpoint=checkpoint)
    model.train()
    phases["model"] = probe.read(tensor_breakdown(model, device=device))

    probe.start()  # 2. forward + loss: autograd keeps activations for backward
    idx = torch.randint(0, cfg.vocab_size, (batch, seq_len), device=device)  # (B, T)
    targets = torch.randint(0, cfg.vocab_size, (batch, seq_len), device=device)  # (B, T)
    with tracker.hooks(), autocast:
        loss = model(idx, targets)[1]  # (B, T, V) logits not kept; loss: ()
    phases["forward"] = probe.read(tensor_breakdown(model, None, tracker.storages, device))

    probe.start()  # 3. backward: activations freed, .grad allocated
    loss.backward()
    tracker.storages.clear()  # the graph (and everything it saved) is gone
    phases["backward"] = probe.read(tensor_breakdown(model, device=device))

    probe.start()  # 4. optimizer step: AdamW creates exp_avg and exp_avg_sq
    opt = torch.optim.AdamW(
        model.parameters(), lr=1e-4, weight_decay=0.1, foreach=foreach, fused=False
    )
    opt.step()
    phases["step"] = probe.read(tensor_breakdown(model, opt, device=device))

    probe.start()  # 5. zero_grad(set_to_none=True) releases the gradients
    opt.zero_grad(set_to_none=True)
    phases["zero_grad"] = probe.read(tensor_breakdown(model, opt, device=device))

    n_tensors = len(list(model.parameters()))
    return phases, model.num_params(), n_tensors, float(loss.detach())
# [/memory:one-step]


def measure_training_step(
    cfg: GPTConfig,
    batch: int,
    seq_len: int,
    *,
    precision: str = "amp",
    checkpoint: bool = False,
    device: str = "cuda",
    seed: int = 0,
    foreach: bool = False,
) -> dict:
    """Train one AdamW step of :class:`~infralens.models.gpt.GPT` and read memory per phase.

    ``device="cuda"`` reads the CUDA allocator (:class:`AllocatorProbe`); any other device
    uses :class:`TensorBytesProbe` (see :func:`measure_cpu_step`). ``precision`` is ``"fp32"``
    (no autocast) or ``"amp"`` (bf16 autocast around forward + loss; params, grads and optimizer
    state stay fp32). Allocated/peak values are relative to what was allocated before the call.
    Returns a plain JSON-able dict.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    dev = torch.device(device)
    gc.collect()  # free what earlier runs left behind before reading the baseline
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        probe = AllocatorProbe(dev)
        device_name = torch.cuda.get_device_name(dev)
    else:
        probe = TensorBytesProbe()
        device_name = dev.type

    phases, num_params, n_tensors, loss = _one_step(
        cfg, batch, seq_len, precision=precision, checkpoint=checkpoint, device=dev,
        seed=seed, foreach=foreach, probe=probe,
    )
    return {
        "config": cfg.to_dict(),
        "num_params": num_params,
        "num_param_tensors": n_tensors,
        "batch": batch,
        "seq_len": seq_len,
        "precision": precision,
        "checkpoint": checkpoint,
        "foreach": foreach,
        "device": device_name,
        "torch_version": torch.__version__,
        "measured_by": probe.name,
        "baseline_bytes": probe.baseline,
        "loss": loss,
        "phases": phases,
        "activation_bytes_measured": phases["forward"]["allocated"] - phases["model"]["allocated"],
    }


def measure_cpu_step(cfg: GPTConfig, batch: int, seq_len: int, *, precision: str = "fp32",
                     **options) -> dict:
    """The same step on the CPU, measured by adding up tensor bytes (tiny configs only).

    ``precision`` defaults to ``"fp32"``; ``options`` are the other keywords of
    :func:`measure_training_step` (``checkpoint``, ``seed``, ``foreach``).
    ``phases[p]["peak"]`` is ``None``; ``phases[p]["breakdown"]`` has params, grads,
    optimizer_state (including 4 bytes per parameter tensor for AdamW's CPU ``step``
    scalars) and activations (storages autograd saved, parameters excluded).
    """
    return measure_training_step(cfg, batch, seq_len, precision=precision, device="cpu", **options)


def ledger_prediction(
    num_params: int, cfg: GPTConfig, batch: int, seq_len: int, *, precision: str, checkpoint: bool
) -> dict[str, int]:
    """What the ledger says is allocated after each phase of :func:`measure_training_step`.

    AdamW with no master copy (``precision`` ``"amp"`` or ``"fp32"``): weights after ``model``;
    weights plus ``n_layers`` layers of Korthikanti activations after ``forward`` (selective
    recomputation, since SDPA's fused kernels store no scores, or full recomputation when every
    block is checkpointed; doubled for fp32, as the formula counts 2-byte activations); weights
    and gradients after ``backward``; plus the moments after ``step``; weights and moments
    after ``zero_grad``.
    """
    if precision not in PRECISIONS:  # the ledger also knows "mixed", which these probes do not run
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    led = training_ledger(num_params, "adamw", precision)
    mode = "full" if checkpoint else "selective"
    per_layer = activation_bytes_per_layer(s=seq_len, b=batch, h=cfg.d_model, a=cfg.n_heads,
                                           recompute=mode)
    scale = 2 if precision == "fp32" else 1  # the formula counts 2-byte activations
    return {
        "model": led.weights,
        "forward": led.weights + cfg.n_layers * per_layer * scale,
        "backward": led.weights + led.gradients,
        "step": led.weights + led.gradients + led.optimizer_states,
        "zero_grad": led.weights + led.optimizer_states,
    }


# [memory:block-account]
def layer_saved_bytes(m: GPTConfig, batch: int, seq_len: int, amp: bool) -> dict[str, int]:
    """What one block of this GPT saves for backward, by kind, in bytes.

    Activations in units of sbh (s x b x h) for an element size e (2 under autocast, 4 in fp32):
    attention 5e (QKV input, Q, K, V, SDPA output), MLP (1 + 2F/h)e (fc input, GELU input and
    output, F = d_ff), two LayerNorm inputs at 4 each (the residual stream stays fp32).
    Per-row statistics: each LayerNorm's mean and 1/std, SDPA's log-sum-exp, fp32.
    Under autocast, the bf16 copy of every matmul weight as well (biases are not saved).
    """
    b, s, h, F, H = batch, seq_len, m.d_model, m.ff_dim, m.n_heads
    e = 2 if amp else 4
    attention = e * 5 * s * b * h  # QKV input; Q, K, V; SDPA output (the projection's input)
    mlp = e * (s * b * h + 2 * s * b * F)  # fc input; GELU input and output
    layernorm = 2 * 4 * s * b * h  # two LayerNorm inputs: the fp32 residual stream
    statistics = 2 * 2 * b * s * 4 + b * H * s * 4  # (mean, rstd) x 2 LayerNorms; logsumexp
    weight_copies = 2 * (3 * h * h + h * h + 2 * h * F) if amp else 0  # qkv, proj, fc, proj
    activations = attention + mlp + layernorm
    return {"attention": attention, "mlp": mlp, "layernorm": layernorm, "activations": activations,
            "statistics": statistics, "weight_copies": weight_copies,
            "total": activations + statistics + weight_copies}
# [/memory:block-account]


def forward_account(run: dict) -> list[tuple[str, int]]:
    """What the forward reading of one :func:`measure_training_step` result holds, term by term.

    ``run`` is that function's result (its ``config``, ``batch``, ``seq_len``, ``precision`` and
    ``checkpoint`` are read). Bytes, from this GPT's config and precision alone, with e the bytes
    of a block activation (2 under autocast, 4 in fp32) and sbh = seq_len x batch x d_model:

    * per block, the activations of :func:`layer_saved_bytes`: attention 5e sbh (QKV input; Q,
      K, V; SDPA output = the output projection's input), MLP (1 + 2 d_ff / d_model)e sbh (first
      linear input, GELU input, second linear input: 9e with d_ff = 4 d_model), the two LayerNorm
      inputs 8 sbh (the residual stream stays fp32 under autocast);
    * with checkpointing, only each block's fp32 input, 4 sbh, and of autocast's weight copies
      only the LM head's;
    * outside the blocks: the final norm's and the LM head's inputs, (4 + e) sbh, the saved
      cross-entropy tensors (6 bytes per logit under autocast, 4 in fp32), and under autocast
      the bf16 copy of every matmul weight (2 bytes each: the blocks' and the LM head's).

    Per-row statistics (LayerNorm mean and rstd, SDPA's log-sum-exp) and the token ids are left
    out. Returns ``(label, bytes)`` pairs in that order.
    """
    c = run["config"]
    model = GPTConfig(d_model=c["d_model"], n_heads=c["n_heads"], d_ff=c["d_ff"],
                      n_layers=c["n_layers"], vocab_size=c["vocab_size"])
    b, s, h, n_layers, vocab = run["batch"], run["seq_len"], model.d_model, model.n_layers, model.vocab_size
    sbh = s * b * h
    amp = run["precision"] == "amp"
    e = 2 if amp else 4
    block = layer_saved_bytes(model, b, s, amp)
    logits = (6 if amp else 4) * b * s * vocab
    lm_head_copy = 2 * vocab * h if amp else 0  # the bf16 copy of the LM head's weight
    if run["checkpoint"]:
        terms = [("block inputs, fp32 (4 sbh per layer)", 4 * sbh * n_layers)]
        if amp:
            terms.append(("LM head: bf16 copy of its weight", lm_head_copy))
    else:
        terms = [(f"attention ({block['attention'] / sbh:g} sbh per layer)", block["attention"] * n_layers),
                 (f"MLP ({block['mlp'] / sbh:g} sbh per layer)", block["mlp"] * n_layers),
                 ("LayerNorm inputs, fp32 (8 sbh per layer)", block["layernorm"] * n_layers)]
        if amp:
            terms.append(("bf16 copies of the matmul weights",
                          n_layers * block["weight_copies"] + lm_head_copy))
    terms += [("final norm and LM-head inputs", (4 + e) * sbh),
              (f"cross-entropy ({6 if amp else 4} bytes per logit)", logits)]
    return terms


def forward_left_out(run: dict) -> dict[str, int]:
    """Per-row bytes of an unchecked run's forward reading that :func:`forward_account` omits.

    ``logsumexp_per_layer``: SDPA's log-sum-exp, one fp32 per head and token, in each layer;
    ``layernorm_stats``: every LayerNorm's mean and reciprocal standard deviation, two fp32 per
    token, for the two norms of each block and the final one; ``token_ids``: the int64 inputs and
    targets. ``run`` is a :func:`measure_training_step` result.
    """
    c, b, s = run["config"], run["batch"], run["seq_len"]
    return {
        "logsumexp_per_layer": b * c["n_heads"] * s * 4,
        "layernorm_stats": (2 * c["n_layers"] + 1) * b * s * 2 * 4,
        "token_ids": 2 * b * s * 8,
    }


# --- what a forward pass saves, tensor by tensor -----------------------------------------------------

def saved_tensors_by_module(model: torch.nn.Module, *args, **kwargs) -> list[dict]:
    """Run ``model(*args, **kwargs)`` once and list every storage autograd saves for backward.

    Forward pre- and post-hooks keep a stack of the modules being run; a ``saved_tensors_hooks``
    pack hook charges each *new* storage to the innermost module (``"(outside)"`` when no
    submodule runs, e.g. the loss of a Hugging Face model). Parameters, and storages already
    charged, are skipped, so every byte appears once. The output is dropped, which frees the
    graph. Rows: module, dtype, shape and bytes of the whole storage.
    """
    stack: list[str] = ["(outside)"]
    params = {_storage_key(p) for p in model.parameters()}
    seen: set[tuple[str, int]] = set()
    rows: list[dict] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in seen and key not in params:
            seen.add(key)
            rows.append({"module": stack[-1], "dtype": str(t.dtype).removeprefix("torch."),
                         "shape": list(t.shape), "bytes": t.untyped_storage().nbytes()})
        return t

    def enter(name: str) -> Callable:
        def hook(module, args) -> None:
            stack.append(name)
        return hook

    def leave(module, args, output) -> None:  # returns None: the output is left alone
        stack.pop()

    handles = []
    for name, module in model.named_modules():
        if name:
            handles.append(module.register_forward_pre_hook(enter(name)))
            handles.append(module.register_forward_hook(leave))
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return rows


# [memory:loss-saved]
def cross_entropy_saved(rows: int, vocab: int, *, dtype: torch.dtype = torch.bfloat16,
                        autocast: bool = True, as_decomposed: bool = False,
                        seed: int = 0) -> list[dict]:
    """What the loss saves for backward, on the CPU: ``F.cross_entropy`` of (rows, vocab) logits.

    ``dtype`` is the logits' dtype; ``autocast`` runs the loss under CPU bf16 autocast.
    ``as_decomposed`` runs the two ops ``cross_entropy_loss`` is made of in PyTorch
    (``aten/src/ATen/native/LossNLL.cpp``) instead of the op itself:
    ``nll_loss(log_softmax(x, 1, dtype=x.dtype), y)``. Under CUDA autocast, which does not list
    ``cross_entropy_loss``, that is what runs: ``log_softmax`` gets an explicit dtype, which
    autocast's ``fp32_set_opt_dtype`` policy leaves alone, and ``nll_loss`` is on the fp32 list,
    so autocast hands it an fp32 copy. CPU autocast lists ``cross_entropy_loss`` itself as an
    fp32 op, so without ``as_decomposed`` the CPU casts the logits to fp32 first.
    Rows: dtype, shape and bytes of every storage saved (each once), the targets included.
    """
    require_positive(rows=rows, vocab=vocab)
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=gen).to(dtype).requires_grad_()
    targets = torch.randint(0, vocab, (rows,), generator=gen)
    seen: set[tuple[str, int]] = set()
    saved: list[dict] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in seen:
            seen.add(key)
            saved.append({"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                          "bytes": t.untyped_storage().nbytes()})
        return t

    with (torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
          torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast)):
        if as_decomposed:  # cross_entropy_loss without label smoothing or soft targets
            loss = F.nll_loss(torch.log_softmax(logits, 1, dtype=logits.dtype), targets)
        else:
            loss = F.cross_entropy(logits, targets)
    loss.backward()  # the saved tensors are usable: the graph is complete
    return saved
# [/memory:loss-saved]


# --- where DDP's gradients live ------------------------------------------------------------------

# [memory:ddp-grad-bytes]
def ddp_gradient_bytes(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, *,
                       set_to_none: bool = True) -> list[dict]:
    """Where ``.grad`` lives under DDP with ``gradient_as_bucket_view=True``, step by step.

    Wraps ``model`` (called as ``model(x, y)[1]`` for the loss, like this book's GPT) in DDP
    on a one-process gloo group (created here unless one exists; one rank is enough, since
    what is measured is the Reducer's bookkeeping, not the communication) and runs: a
    synchronized step that lets DDP rebuild its buckets, a synchronized backward (the
    gradients are now views of the buckets, whose storages are recorded), the optimizer step
    and ``zero_grad(set_to_none=set_to_none)``, a backward under ``no_sync()``, and a
    synchronized backward. After each, a reading: bytes of ``.grad`` storages that are bucket
    storages, bytes of those that are not, and the bytes of all buckets, which the Reducer
    keeps for the life of the DDP object whatever ``.grad`` points to.
    """
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    own_group = not dist.is_initialized()
    if own_group:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ddp = DDP(model, gradient_as_bucket_view=True)
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        ddp(x, y)[1].backward()  # iteration 0: DDP rebuilds its buckets in gradient order
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)
        readings, buckets = [], {}

        def read(phase: str) -> None:
            grads = {_storage_key(p.grad): p.grad.untyped_storage().nbytes()
                     for p in model.parameters() if p.grad is not None}
            readings.append({"phase": phase, "bucket_bytes": sum(buckets.values()),
                             "grad_in_buckets": sum(n for k, n in grads.items() if k in buckets),
                             "grad_outside": sum(n for k, n in grads.items() if k not in buckets)})

        ddp(x, y)[1].backward()  # synchronized: every .grad is now a view of its bucket
        buckets = {_storage_key(p.grad): p.grad.untyped_storage().nbytes() for p in model.parameters()}
        read("synchronized backward")
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)
        read(f"step, zero_grad(set_to_none={set_to_none})")
        with ddp.no_sync():  # accumulate locally: the Reducer's hooks do nothing
            ddp(x, y)[1].backward()
        read("backward under no_sync")
        ddp(x, y)[1].backward()  # synchronized: each .grad is copied into its bucket view
        read("synchronized backward")
        return readings
    finally:
        if own_group:
            dist.destroy_process_group()
# [/memory:ddp-grad-bytes]


def hf_llama_saved(config: dict, batch: int, seq_len: int, *, seed: int = 0) -> list[dict]:
    """What a small Hugging Face ``LlamaForCausalLM`` saves for backward, by module.

    ``config`` is a Llama ``config.json`` as a dict (``model_type`` may be present). The model is
    built on the CPU in bf16 with SDPA attention, in training mode, and one forward pass with the
    loss runs through :func:`saved_tensors_by_module`. Its RMSNorm and SwiGLU are Transformers'
    eager modules, the ``norm="eager", swiglu="eager"`` case of
    :func:`~infralens.memory.activations.llama_activation_bytes_per_layer`. Needs
    ``transformers``; keep the shape tiny.
    """
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tqdm's notebook-widget warning when transformers loads
        import transformers

    require_positive(batch=batch, seq_len=seq_len)
    transformers.logging.set_verbosity_error()
    hf_config = transformers.LlamaConfig(**{k: v for k, v in config.items() if k != "model_type"},
                                         attn_implementation="sdpa")
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(hf_config).to(torch.bfloat16).train()
    ids = torch.randint(0, config["vocab_size"], (batch, seq_len))
    return saved_tensors_by_module(model, input_ids=ids, labels=ids)
