"""Lab 08's accounting of DDP, ZeRO-1/2/3 and FSDP: model state per GPU, communication, FSDP shards.

Section 7 of the ZeRO paper (Rajbhandari et al., SC20): 2Ψ of communication for DDP, P_os and
P_os+g; 3Ψ (1.5x) with P_p. FSDP's shards follow ``torch.chunk``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from infralens.memory import zero_model_state_bytes
from infralens.training import zero_memory_accounting as zma


def test_schemes_map_onto_stages():
    psi, nd = 7_500_000_000, 64
    for scheme, stage in (("ddp", "ddp"), ("zero1", 1), ("zero2", 2), ("zero3", 3), ("fsdp-full", 3),
                          ("fsdp-grad-op", 2)):
        assert zma.model_state_per_gpu(psi, nd, scheme).total == zero_model_state_bytes(psi, nd, stage)
    hybrid = zma.model_state_per_gpu(psi, nd, "fsdp-hybrid", shard_group=8)
    assert hybrid.total == zero_model_state_bytes(psi, 8, 3)  # ZeRO-3 over the 8 of a group
    fp32 = zma.model_state_per_gpu(psi, 2, "fsdp-full", precision="fp32")
    assert fp32.total == 16 * psi // 2 and fp32.weights == 4 * psi // 2


def test_communication_volume():
    psi, nd = 7_500_000_000, 64
    ring = (nd - 1) / nd
    vol = {s: zma.comm_volume(psi, nd, s) for s in ("ddp", "zero1", "zero2", "zero3", "fsdp-full")}
    assert [vol[s].paper_elements / psi for s in vol] == [2, 2, 2, 3, 3]  # Section 7
    assert vol["zero3"].bytes_sent / vol["ddp"].bytes_sent == pytest.approx(1.5)
    assert vol["ddp"].bytes_sent == pytest.approx(2 * ring * psi * 2)  # 2-byte gradients
    # Hybrid degenerates correctly: one group of N_d is FSDP full; groups of 1 are DDP.
    full = zma.comm_volume(psi, nd, "fsdp-hybrid", shard_group=nd).bytes_sent
    assert full == pytest.approx(vol["fsdp-full"].bytes_sent)
    ones = zma.comm_volume(psi, nd, "fsdp-hybrid", shard_group=1).bytes_sent
    assert ones == pytest.approx(vol["ddp"].bytes_sent)


@pytest.mark.parametrize("dim0", [0, 1, 2, 3, 7, 8, 9, 50257, 50304])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_fsdp_rows_follow_torch_chunk(dim0, world):
    chunks = [len(c) for c in torch.arange(dim0).chunk(world)] if dim0 else []
    chunks += [0] * (world - len(chunks))
    assert zma.fsdp_shard_rows(dim0, world) == chunks
    assert sum(chunks) == dim0


def test_fsdp_local_numel():
    shapes = [(7, 5), (7,), (3, 7), (3,)]
    held = [zma.fsdp_local_numel(shapes, 2, r) for r in range(2)]
    assert held == [(4 * 5 + 4 + 2 * 7 + 2, 40), (3 * 5 + 3 + 7 + 1, 40)]
    assert sum(h for h, _ in held) == 35 + 7 + 21 + 3


def test_cli(capsys):
    assert zma.main(["--params", "7.5B", "--dp", "64"]) == 0
    out = capsys.readouterr().out
    for number in ("120.00", "31.41", "16.64", "1.88"):
        assert number in out
    assert zma.parse_count("7.5e9") == zma.parse_count("7.5B") == 7_500_000_000


@pytest.mark.parametrize("argv", [
    ["--params", "-7.5B", "--dp", "64"],
    ["--params", "7.5B", "--dp", "0"],
    ["--params", "7.5B", "--dp", "64", "--schemes", "zero4"],
    ["--params", "7.5B", "--dp", "64", "--shard-group", "3"],
    ["--params", "7.25", "--dp", "2"],
    ["--params", "lots", "--dp", "2"],
    ["--dp", "2"],
])
def test_cli_bad_input_one_line_exit_2(argv, capsys):
    assert zma.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.err.startswith("infralens.training.zero_memory_accounting: error: ")


def test_cli_process_exit_status():
    done = subprocess.run([sys.executable, "-m", "infralens.training.zero_memory_accounting",
                           "--params", "7.5B", "--dp", "0"], capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr

