"""The collective benchmark refuses, in one line, what it cannot measure (it runs on GPUs only)."""

import pytest
import torch

from infralens.parallel.collective_bench import main


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without GPUs")
def test_without_gpus_is_one_line(capsys, tmp_path):
    assert main(["--out", str(tmp_path / "bw.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CUDA" in err


def test_bad_sizes_are_one_line(capsys, tmp_path):
    assert main(["--out", str(tmp_path / "bw.json"), "--factor", "1"]) == 2
    assert main(["--out", str(tmp_path / "bw.json"), "--min-bytes", "0"]) == 2
    assert main(["--out", str(tmp_path / "bw.json"), "--ops", "broadcast"]) == 2
    assert capsys.readouterr().err.count("\n") == 3
