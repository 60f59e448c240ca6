"""Published training configurations the planner is checked against, with their sources.

* :data:`MEGATRON_TABLE1`: the weak-scaling runs of Narayanan et al. (2021), Table 1: GPT models
  of 1.7B to 1T parameters on DGX A100 80GB nodes, sequence 2048, vocabulary 51,200, activation
  recomputation, mixed precision. Micro-batch sizes and interleaving are not in the paper; they
  come from NVIDIA's reproduction script for it
  (``examples/academic_paper_scripts/sc21/run_table_1.sh``), where the interleaving is given as
  layers per virtual stage.
* :data:`LLAMA3_405B_SHAPE`: the model (Grattafiori et al. 2024, Table 3: 126 layers, width
  16,384, FFN 53,248, 128 heads, 8 key/value heads), with the released tokenizer's vocabulary of
  128,256 (the paper rounds it to 128K).
* :data:`LLAMA3_405B`: the 3D/4D layouts of Llama 3 405B's pre-training (Grattafiori et al.
  2024, Table 4) on H100 80GB. The third row's DP prints as 4 in the paper; 16,384 GPUs /
  (8 x 16 x 16) = 8, and 8 is what gives its 16M tokens per batch, so 8 is stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from infralens.models.config import ModelShape


@dataclass(frozen=True)
class MegatronRun:
    """One row of Narayanan et al. (2021), Table 1, and the script's settings for it."""

    params_billion: float
    heads: int
    hidden: int
    layers: int
    tp: int
    pp: int
    gpus: int
    batch: int
    tflops_per_gpu: float  # achieved teraFLOP/s per GPU, Eq. (3) FLOPs
    percent_of_peak: int
    micro_batch: int  # from run_table_1.sh
    layers_per_virtual_stage: int | None  # from run_table_1.sh; None: not interleaved

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    @property
    def chunks(self) -> int:
        """v: model chunks per pipeline stage."""
        if self.layers_per_virtual_stage is None:
            return 1
        return self.layers // self.pp // self.layers_per_virtual_stage


MEGATRON_SEQ = 2048
MEGATRON_VOCAB = 51200

# [parallel:megatron-table1]
MEGATRON_TABLE1: tuple[MegatronRun, ...] = (
    MegatronRun(1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44, 16, None),
    MegatronRun(3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 44, 16, None),
    MegatronRun(7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 46, 16, None),
    MegatronRun(18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43, 8, None),
    MegatronRun(39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 44, 4, None),
    MegatronRun(76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 45, 2, 5),
    MegatronRun(145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 47, 2, 5),
    MegatronRun(310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 50, 1, 3),
    MegatronRun(529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 52, 1, 1),
    MegatronRun(1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52, 1, None),
)
# [/parallel:megatron-table1]


@dataclass(frozen=True)
class Llama3Layout:
    """One row of Grattafiori et al. (2024), Table 4."""

    gpus: int
    tp: int
    cp: int
    pp: int
    dp: int
    seq: int
    batch_per_dp: int
    tflops_per_gpu: int
    bf16_mfu_percent: int

    @property
    def global_batch(self) -> int:
        return self.batch_per_dp * self.dp


LLAMA3_405B_SHAPE = ModelShape(family="llama", vocab_size=128256, d_model=16384, n_layers=126,
                               n_heads=128, n_kv_heads=8, head_dim=128, d_ff=53248)

LLAMA3_405B: tuple[Llama3Layout, ...] = (
    Llama3Layout(8192, 8, 1, 16, 64, 8192, 32, 430, 43),
    Llama3Layout(16384, 8, 1, 16, 128, 8192, 16, 400, 41),
    Llama3Layout(16384, 8, 16, 16, 8, 131072, 16, 380, 38),
)
