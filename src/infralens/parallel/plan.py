"""The parallelism planner: every TP x PP x DP x CP (x EP) layout of a model on a cluster, with its
memory per GPU, communication per step, bubble, estimated step time and MFU.

``python -m infralens.parallel.plan --model llama-3-70b --cluster cluster.yaml --seq 8192
--global-batch 512`` prints the best plans. The model is a shipped name, a Hugging Face
``config.json`` (``--hf-config``) or a GPT shape (``--gpt LAYERS,HIDDEN,HEADS``); the cluster a
YAML file (:mod:`infralens.parallel.cluster`). Bad input prints one line and exits 2.

The model of one training iteration (every term is per GPU; the assumptions are the fields of
:class:`Assumptions`, printed with every report):

* **Memory** (the heaviest pipeline stage, first or last): weights, gradients and optimizer
  states of the stage's share of the parameters, partitioned over DP by the ZeRO stage
  (:func:`infralens.memory.zero.zero_lines`); the activations of the micro-batches in flight
  (``p`` on the first stage under 1F1B, times ``1 + (p-1)/(pv)`` interleaved), each layer's
  from :mod:`infralens.memory.activations` at sequence ``s/cp`` and tensor-parallel size ``t``
  with sequence parallelism; on the last stage the fp32 logits the loss keeps. It must fit in
  ``memory_usable`` of the GPU's HBM.
* **Compute**: the stage's hardware FLOPs per micro-batch (recomputation included) at
  ``matmul`` x the dense BF16 peak.
* **Tensor parallelism**: per layer and micro-batch, two all-reduces of the layer's ``b·s·h``
  activations in the forward, two in the backward, two more when the forward is recomputed;
  on the critical path.
* **Pipeline**: the 1F1B step is ``(m + (p-1)/v)`` micro-batch slots of the slowest stage; each
  slot also sends ``2v`` activations of ``b·s·h/t`` to the neighbour stage (Megatron's
  scatter/gather: each TP rank sends its ``1/t`` share).
* **Data parallelism**: the gradients' reduction once per step (ZeRO-3: parameters gathered
  again for every micro-batch's forward and backward); ``dp_overlap`` of it hidden.
* **Context and expert parallelism**: ring attention's K/V exchange and the MoE all-to-alls,
  counted in full (not overlapped).

Ranks are laid out TP fastest, then CP, DP, PP (Megatron-LM's order), so a TP group spans ``t``
consecutive GPUs, a DP group ``t·cp·dp`` and a pipeline ``t·cp·dp·p``; a communicator that fits
in one node runs on NVLink, otherwise on the network (a pipeline with one boundary between nodes
waits for that boundary at every step).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from itertools import product

from infralens.memory.activations import activation_bytes_per_layer, llama_activation_bytes_per_layer
from infralens.memory.params import (
    attention_params_per_layer,
    embedding_params,
    final_norm_params,
    mlp_params_per_layer,
    norm_params_per_layer,
)
from infralens.memory.zero import STAGES, zero_lines
from infralens.models.config import ModelShape
from infralens.parallel.cluster import Cluster
from infralens.parallel.collectives import collective_bytes
from infralens.parallel.flops import RECOMPUTE
from infralens.tools.checks import require_positive

__all__ = ["Assumptions", "Estimate", "Job", "Layout", "Options", "Plan", "best_by_layout",
           "estimate", "gpt_shape", "plan"]


@dataclass(frozen=True)
class Assumptions:
    """The planner's efficiency assumptions, each a fraction in (0, 1]."""

    matmul: float  # achieved fraction of the dense BF16 peak for all the model's FLOPs
    nvlink: float  # achieved bus bandwidth over the NVLink bandwidth per GPU, each way
    network: float  # the same for the inter-node network
    memory_usable: float  # fraction of HBM the ledger may fill (CUDA context, NCCL, fragmentation)
    dp_overlap: float = 0.0  # fraction of the DP gradient reduction hidden behind the backward

    def replace(self, overrides: Mapping[str, float]) -> Assumptions:
        names = {f.name for f in fields(self)}
        for key, value in overrides.items():
            if key not in names:
                raise ValueError(f"unknown efficiency '{key}'; known: {', '.join(sorted(names))}")
            if not (0 <= value <= 1) or (key != "dp_overlap" and value == 0):
                raise ValueError(f"efficiency '{key}' must be a fraction in (0, 1], got {value!r}")
        return replace(self, **dict(overrides))


@dataclass(frozen=True)
class Job:
    """What is trained: the model, the sequence length and the global batch in sequences."""

    model: ModelShape
    seq: int
    global_batch: int

    def __post_init__(self) -> None:
        require_positive(seq=self.seq, global_batch=self.global_batch)


@dataclass(frozen=True)
class Options:
    """The choices the planner may make besides the layout."""

    micro_batches: tuple[int, ...] = (1, 2, 4, 8)
    chunks: tuple[int, ...] = (1,)  # v: interleaved pipeline chunks per stage
    recompute: tuple[str, ...] = RECOMPUTE
    zero: tuple[str | int, ...] = STAGES
    cp: tuple[int, ...] = (1,)
    ep: tuple[int, ...] = (1,)
    max_tp: int | None = None  # default: GPUs per node

    def __post_init__(self) -> None:
        for name in ("micro_batches", "chunks", "cp", "ep"):
            values = getattr(self, name)
            if not values:
                raise ValueError(f"{name} must not be empty")
            require_positive(**{f"{name} entry": v for v in values})
        for r in self.recompute:
            if r not in RECOMPUTE:
                raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}; got {r!r}")
        for z in self.zero:
            if isinstance(z, bool) or z not in STAGES:
                raise ValueError(f"zero must be one of 'ddp', 1, 2, 3; got {z!r}")


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    cp: int = 1
    ep: int = 1

    def __str__(self) -> str:
        extra = (f" CP{self.cp}" if self.cp > 1 else "") + (f" EP{self.ep}" if self.ep > 1 else "")
        return f"TP{self.tp} PP{self.pp} DP{self.dp}{extra}"


@dataclass(frozen=True)
class Plan:
    layout: Layout
    micro_batch: int
    chunks: int
    recompute: str
    zero: str | int


@dataclass(frozen=True)
class Estimate:
    """One plan's ledger and time; bytes are per GPU, seconds per iteration."""

    plan: Plan
    memory: Mapping[str, int]  # weights, gradients, optimizer states, activations, logits
    capacity: int  # the bytes the ledger may fill
    comm_bytes: Mapping[str, float]  # per GPU per iteration, by axis
    seconds: Mapping[str, float]  # compute, bubble, tp, pp, dp, cp, ep (exposed)
    micro_batches: int  # m
    bubble: float  # (p-1)/(v m)
    model_flops: int  # per iteration, whole job (no recomputation)
    hardware_flops: int  # per iteration, whole job (with recomputation)
    tokens: int  # per iteration
    n_gpus: int
    peak_flops: float

    @property
    def memory_total(self) -> int:
        return sum(self.memory.values())

    @property
    def feasible(self) -> bool:
        return self.memory_total <= self.capacity

    @property
    def step_time(self) -> float:
        return sum(self.seconds.values())

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.step_time

    @property
    def mfu(self) -> float:
        return self.model_flops / (self.step_time * self.n_gpus * self.peak_flops)

    @property
    def hardware_flops_per_gpu(self) -> float:
        """Achieved FLOP/s per GPU counting recomputation: the figure Megatron-LM reports."""
        return self.hardware_flops / (self.step_time * self.n_gpus)


def gpt_shape(layers: int, hidden: int, heads: int, vocab: int = 51200, seq: int = 2048) -> ModelShape:
    """The GPT model of Narayanan et al. (2021): learned positions, LayerNorm, a 4h GELU MLP,
    biases everywhere, the output layer tied to the word embeddings."""
    require_positive(layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq=seq)
    if hidden % heads:
        raise ValueError(f"heads ({heads}) must divide hidden ({hidden})")
    return ModelShape(family="gpt2", vocab_size=vocab, d_model=hidden, n_layers=layers,
                      n_heads=heads, n_kv_heads=heads, head_dim=hidden // heads, d_ff=4 * hidden,
                      max_positions=seq, tie_embeddings=True, qkv_bias=True, o_bias=True,
                      mlp_bias=True, norm="layernorm", mlp="gelu")


# --- the per-plan model ------------------------------------------------------------------------

def _layer_params(shape: ModelShape, tp: int, ep: int) -> float:
    """One layer's parameters on one GPU: attention and dense MLP split by TP, experts by TP x EP."""
    mlp = mlp_params_per_layer(shape)
    if shape.is_moe:
        router = shape.d_model * shape.n_experts
        mlp = (mlp - router) / ep + router
    return (attention_params_per_layer(shape) + mlp) / tp + norm_params_per_layer(shape)


def _layer_activations(shape: ModelShape, s: int, b: int, tp: int, recompute: str) -> float:
    """Bytes one layer keeps for backward for one micro-batch of ``b`` sequences of ``s`` tokens,
    per GPU of a TP group with sequence parallelism."""
    h = shape.d_model
    if recompute == "full":
        return 2 * s * b * h / tp  # the layer's input, split along the sequence
    if shape.norm == "layernorm" and shape.mlp == "gelu" and not shape.is_moe:
        return activation_bytes_per_layer(s, b, h, shape.n_heads, tp, sequence_parallel=tp > 1,
                                          recompute=recompute)
    # Llama-style layers: a fused attention kernel stores no scores, so selective = none.
    return llama_activation_bytes_per_layer(shape, s, b).total / tp


def _forward_flops(shape: ModelShape, seq: int) -> tuple[int, int, int]:
    """Forward FLOPs per token: (per-layer matmuls, per-layer attention core, LM head), counting the
    full s x s score matrix as Megatron-LM and PaLM do."""
    matmul = 2 * (attention_params_per_layer(shape) + _active_mlp(shape))
    attention = 4 * shape.n_heads * shape.head_dim * seq
    return matmul, attention, 2 * shape.d_model * shape.vocab_size


def _active_mlp(shape: ModelShape) -> int:
    if not shape.is_moe:
        return mlp_params_per_layer(shape)
    router = shape.d_model * shape.n_experts
    return (mlp_params_per_layer(shape) - router) // shape.n_experts * shape.experts_per_token + router


def _link(cluster: Cluster, span: int, assume: Assumptions) -> float:
    """Achieved per-GPU bandwidth of a communicator spanning ``span`` consecutive ranks: NVLink
    (times ``nvlink``) inside one node, the network (times ``network``) across nodes."""
    if span <= cluster.gpus_per_node:
        return cluster.intra_node_bandwidth * assume.nvlink
    return cluster.inter_node_bandwidth * assume.network


def estimate(job: Job, cluster: Cluster, plan: Plan, assume: Assumptions) -> Estimate:
    """The ledger and time of one plan (see the module docstring for the model)."""
    shape, lay = job.model, plan.layout
    t, p, d, c, e, v, b = lay.tp, lay.pp, lay.dp, lay.cp, lay.ep, plan.chunks, plan.micro_batch
    L, h, s = shape.n_layers, shape.d_model, job.seq
    m = job.global_batch // (d * b)
    s_local = s // c
    layers = math.ceil(L / p)  # the fullest stage

    # [parallel:memory]
    # memory: the first stage (embedding) and the last (LM head, logits); keep the heavier
    per_layer = _layer_params(shape, t, e)
    embed = embedding_params(shape) / t
    head = shape.d_model * shape.vocab_size / t  # the LM head's share (a tied copy on the last stage)
    act_layer = _layer_activations(shape, s_local, b, t, plan.recompute)
    in_flight = min(p, m) * (1 + (p - 1) / (p * v)) if v > 1 else min(p, m)
    working = (_layer_activations(shape, s_local, b, t, "none") if plan.recompute == "full" else 0)
    logits = 4 * b * s_local * shape.vocab_size / t  # fp32 logits kept by the loss
    stages = []
    for first, last in {(True, p == 1), (p == 1, True)}:
        params = layers * per_layer + (embed if first else 0)
        if last:  # a tied head is the embedding itself unless it sits on another stage
            params += final_norm_params(shape) + (head if p > 1 or not shape.tie_embeddings else 0)
        states = zero_lines(max(1, math.ceil(params)), d, plan.zero)
        held = (in_flight if first else 1) * layers * act_layer + working
        stages.append({"weights": states.weights, "gradients": states.gradients,
                       "optimizer states": states.optimizer_states,
                       "activations": int(held), "logits": int(logits) if last else 0})
    memory = max(stages, key=lambda x: sum(x.values()))
    capacity = int(cluster.gpu.hbm_capacity_bytes.value * assume.memory_usable)
    # [/parallel:memory]

    # [parallel:time]
    # compute of one micro-batch on the slowest stage
    peak = cluster.gpu.dense_bf16_flops.value
    mm, attn, head_f = _forward_flops(shape, s)
    tokens_mb = b * s_local
    layer_fwd = (mm + attn) * tokens_mb
    stage_fwd = layers * layer_fwd / t
    extra = {"none": 0, "selective": layers * attn * tokens_mb / t, "full": stage_fwd}[plan.recompute]
    last_head = head_f * tokens_mb / t
    slot_compute = (3 * stage_fwd + extra + 3 * last_head) / (assume.matmul * peak)

    # tensor parallelism: all-reduces of b·s·h (16-bit) per layer on the critical path
    bw_tp = _link(cluster, t, assume)
    ar_size = 2 * tokens_mb * h
    n_ar = 4 + (2 if plan.recompute == "full" else 0)
    tp_bytes_mb = layers * n_ar * collective_bytes("all_reduce", t, ar_size)
    slot_tp = tp_bytes_mb / bw_tp if t > 1 else 0.0

    # pipeline point-to-point: 2v activations of b·s·h/t per micro-batch per stage
    bw_pp = _link(cluster, t * c * d * p, assume)  # the pipeline's span: one crossing sets the pace
    pp_bytes_mb = (2 * v * ar_size / t) if p > 1 else 0.0
    slot_pp = pp_bytes_mb / bw_pp

    # context parallelism: ring attention passes K and V (fwd), and K, V and their grads (bwd)
    kv = 2 * shape.n_kv_heads * shape.head_dim * 2 * b * s_local  # K and V of the local chunk
    cp_bytes_mb = layers * 3 * (c - 1) * kv / t if c > 1 else 0.0
    bw_cp = _link(cluster, t * c, assume)
    slot_cp = cp_bytes_mb / bw_cp

    # expert parallelism: dispatch and combine all-to-alls, forward and backward
    ep_bytes_mb = 0.0
    if shape.is_moe and e > 1:
        ep_bytes_mb = layers * 4 * (e - 1) / e * ar_size * shape.experts_per_token / t
    bw_ep = _link(cluster, t * c * e, assume)
    slot_ep = ep_bytes_mb / bw_ep

    slots = m + (p - 1) / v
    compute = m * slot_compute
    bubble_time = (p - 1) / v * (slot_compute + slot_tp + slot_pp + slot_cp + slot_ep)

    # data parallelism: gradients (16-bit) once per step; ZeRO-3 re-gathers weights per micro-batch
    grad_bytes = 2 * (layers * per_layer + max(embed, head))
    bw_dp = _link(cluster, t * c * d, assume)
    dp_bytes = collective_bytes("all_reduce", d, int(grad_bytes)) if d > 1 else 0.0
    if plan.zero == 3 and d > 1:
        dp_bytes = m * 3 * collective_bytes("all_gather", d, int(grad_bytes))
    dp_time = dp_bytes / bw_dp * (1 - assume.dp_overlap)
    # [/parallel:time]

    seconds = {"compute": compute, "bubble": bubble_time, "tensor parallel": m * slot_tp,
               "pipeline p2p": m * slot_pp, "data parallel": dp_time,
               "context parallel": m * slot_cp, "expert parallel": m * slot_ep}
    comm = {"tensor parallel": slots * tp_bytes_mb, "pipeline p2p": slots * pp_bytes_mb,
            "data parallel": dp_bytes, "context parallel": m * cp_bytes_mb,
            "expert parallel": m * ep_bytes_mb}
    tokens = job.global_batch * s
    model_flops = 3 * tokens * (L * (mm + attn) + head_f)
    recompute_flops = {"none": 0, "selective": L * attn, "full": L * (mm + attn)}[plan.recompute]
    hardware_flops = model_flops + tokens * recompute_flops
    return Estimate(plan=plan, memory=memory, capacity=capacity, comm_bytes=comm, seconds=seconds,
                    micro_batches=m, bubble=(p - 1) / (v * m), model_flops=int(model_flops),
                    hardware_flops=int(hardware_flops), tokens=tokens, n_gpus=t * p * d * c,
                    peak_flops=peak)


# --- enumeration --------------------------------------------------------------------------------

def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def layouts(job: Job, cluster: Cluster, options: Options) -> Iterable[Layout]:
    """Every layout of the cluster's GPUs the model's shape allows."""
    shape, n = job.model, cluster.n_gpus
    max_tp = options.max_tp or cluster.gpus_per_node
    for t in _divisors(n):
        if t > max_tp or shape.n_heads % t or (shape.n_kv_heads % t and t % shape.n_kv_heads):
            continue
        for c in options.cp:
            if (n // t) % c or job.seq % (c * t if t > 1 else c):
                continue
            for p in _divisors(n // (t * c)):
                if p > shape.n_layers:
                    continue
                d = n // (t * c * p)
                for e in options.ep:
                    if e > 1 and (not shape.is_moe or d % e or shape.n_experts % e):
                        continue
                    yield Layout(t, p, d, c, e)


def plans(job: Job, cluster: Cluster, options: Options) -> Iterable[Plan]:
    for lay in layouts(job, cluster, options):
        for b, v, r, z in product(options.micro_batches, options.chunks, options.recompute, options.zero):
            if job.global_batch % (lay.dp * b):
                continue
            m = job.global_batch // (lay.dp * b)
            if v > 1 and (lay.pp == 1 or m % lay.pp or job.model.n_layers % (lay.pp * v)):
                continue
            if z != "ddp" and lay.dp == 1:
                continue
            yield Plan(lay, b, v, r, z)


def plan(job: Job, cluster: Cluster, assume: Assumptions, options: Options | None = None,
         feasible_only: bool = True) -> list[Estimate]:
    """Every plan's estimate, fastest first (feasible ones only, unless told otherwise)."""
    options = options or Options()
    out = [estimate(job, cluster, p, assume) for p in plans(job, cluster, options)]
    if feasible_only:
        out = [x for x in out if x.feasible]
    return sorted(out, key=lambda x: (x.step_time, x.memory_total))


def best_by_layout(estimates: Sequence[Estimate]) -> list[Estimate]:
    """The fastest plan of each layout, fastest first: the ranking of layouts."""
    best: dict[Layout, Estimate] = {}
    for x in estimates:
        if x.plan.layout not in best or x.step_time < best[x.plan.layout].step_time:
            best[x.plan.layout] = x
    return sorted(best.values(), key=lambda x: x.step_time)



# --- the command line ---------------------------------------------------------------------------

PROG = "infralens.parallel.plan"


def build_parser():
    from infralens.memory.cli import shipped_config_names
    from infralens.tools.cli import OneLineParser, positive_int

    parser = OneLineParser(
        prog=f"python -m {PROG}",
        description="Enumerate TP x PP x DP x CP (x EP) plans of a model on a cluster and rank them "
                    "by estimated step time.",
        epilog=f"Bad input prints one line, '{PROG}: error: <reason>', and exits 2.")
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", metavar="NAME", choices=shipped_config_names(),
                       help=f"a shipped config: {', '.join(shipped_config_names())}")
    model.add_argument("--hf-config", metavar="PATH", help="a Hugging Face config.json")
    model.add_argument("--gpt", metavar="L,H,A", help="a Megatron GPT shape: layers,hidden,heads "
                       "(vocabulary 51200)")
    parser.add_argument("--cluster", metavar="YAML", required=True, help="the cluster description")
    parser.add_argument("--seq", metavar="S", type=positive_int, required=True, help="sequence length")
    parser.add_argument("--global-batch", metavar="B", type=positive_int, required=True,
                        help="sequences per iteration")
    parser.add_argument("--micro-batches", metavar="B,...", default="1,2,4,8",
                        help="micro-batch sizes to try (default 1,2,4,8)")
    parser.add_argument("--chunks", metavar="V,...", default="1",
                        help="interleaved chunks per stage to try (default 1)")
    parser.add_argument("--cp", metavar="C,...", default="1", help="context-parallel sizes (default 1)")
    parser.add_argument("--ep", metavar="E,...", default="1", help="expert-parallel sizes (default 1)")
    parser.add_argument("--recompute", metavar="R,...", default="none,selective,full",
                        help="recompute modes to try (default all)")
    parser.add_argument("--zero", metavar="Z,...", default="ddp,1,2,3",
                        help="ZeRO stages to try: ddp,1,2,3 (default all)")
    parser.add_argument("--top", metavar="N", type=positive_int, default=5,
                        help="layouts to show (default 5)")
    return parser


def _ints(text: str, flag: str) -> tuple[int, ...]:
    from infralens.tools.cli import UsageError, positive_int

    try:
        return tuple(positive_int(x) for x in text.split(","))
    except Exception as err:  # argparse.ArgumentTypeError
        raise UsageError(f"{flag}: {err}") from None


def _prepare(argv):
    from infralens.models.config import load_config
    from infralens.models.shipped import shipped_config
    from infralens.parallel.calibration import calibrated_assumptions
    from infralens.parallel.cluster import load_cluster
    from infralens.tools.cli import UsageError

    args = build_parser().parse_args(argv)
    if args.model:
        shape, name = load_config(shipped_config(args.model)), args.model
    elif args.hf_config:
        shape, name = load_config(args.hf_config), args.hf_config
    else:
        dims = _ints(args.gpt, "--gpt")
        if len(dims) != 3:
            raise UsageError(f"--gpt takes layers,hidden,heads; got {args.gpt!r}")
        shape, name = gpt_shape(*dims, seq=args.seq), f"GPT {args.gpt}"
    zero = []
    for z in args.zero.split(","):
        if z not in ("ddp", "1", "2", "3"):
            raise UsageError(f"--zero: expected ddp, 1, 2 or 3; got {z!r}")
        zero.append(z if z == "ddp" else int(z))
    options = Options(micro_batches=_ints(args.micro_batches, "--micro-batches"),
                      chunks=_ints(args.chunks, "--chunks"), recompute=tuple(args.recompute.split(",")),
                      zero=tuple(zero), cp=_ints(args.cp, "--cp"), ep=_ints(args.ep, "--ep"))
    cluster = load_cluster(args.cluster)
    assume, sources = calibrated_assumptions()
    assume = assume.replace(cluster.efficiency)
    sources.update({k: "the cluster file" for k in cluster.efficiency})
    job = Job(shape, args.seq, args.global_batch)
    ranked = best_by_layout(plan(job, cluster, assume, options))
    if not ranked:
        raise ValueError(f"no plan of {name} fits {cluster.n_gpus} x {cluster.gpu.name} "
                         f"with these options")
    return report(name, job, cluster, assume, sources, ranked[:args.top])


def report(name: str, job: Job, cluster: Cluster, assume: Assumptions,
           sources: Mapping[str, str], ranked: Sequence[Estimate]) -> str:
    """The printed plan table, the best plan's ledger, and the assumptions with their sources."""
    gib = 2**30
    lines = [f"{name} on {cluster.n_gpus} x {cluster.gpu.name} ({cluster.nodes} nodes of "
             f"{cluster.gpus_per_node}); sequence {job.seq:,}, global batch {job.global_batch:,}",
             "",
             f"{'#':>2}  {'layout':<22}{'b':>3}{'v':>3}  {'recompute':<10}{'ZeRO':<5}"
             f"{'mem GiB':>9}{'bubble':>8}{'step s':>9}{'tokens/s':>11}{'MFU':>6}"]
    for i, x in enumerate(ranked, 1):
        p = x.plan
        lines.append(f"{i:>2}  {str(p.layout):<22}{p.micro_batch:>3}{p.chunks:>3}  {p.recompute:<10}"
                     f"{str(p.zero):<5}{x.memory_total / gib:>9.1f}{x.bubble:>8.3f}{x.step_time:>9.3f}"
                     f"{x.tokens_per_s:>11,.0f}{x.mfu:>6.1%}")
    best = ranked[0]
    lines += ["", f"Best plan, per GPU: memory (of {best.capacity / gib:.1f} GiB usable)"]
    lines += [f"  {k:<18}{v / gib:>9.2f} GiB" for k, v in best.memory.items() if v]
    lines += ["  time per iteration"]
    lines += [f"  {k:<18}{v:>9.3f} s" for k, v in best.seconds.items() if v]
    lines += ["  communication per iteration"]
    lines += [f"  {k:<18}{v / gib:>9.2f} GiB" for k, v in best.comm_bytes.items() if v]
    lines += ["", "Assumptions:"]
    lines += [f"  {f.name:<14}{getattr(assume, f.name):.3f}  ({sources.get(f.name, '')})"
              for f in fields(assume)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from infralens.tools.cli import UsageError, run_main

    return run_main(PROG, argv, _prepare, print, errors=(UsageError, ValueError, LookupError))


if __name__ == "__main__":
    raise SystemExit(main())
