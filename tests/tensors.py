"""Random inputs for tests that compare against a float64 reference."""

import torch


def seeded_randn(seed: int):
    """``rand(*shape)``: standard-normal float64 tensors drawn from one generator seeded with
    ``seed``, so a test module's draws are the same on every run."""
    gen = torch.Generator().manual_seed(seed)
    return lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)
