"""Random inputs for tests that compare against a float64 reference."""

import torch


def seeded_randn(seed: int):
    """``rand(*shape)``: standard-normal float64 tensors drawn from one generator seeded with
    ``seed``, so a test module's draws are the same on every run."""
    gen = torch.Generator().manual_seed(seed)
    return lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)


def aten_traffic(fn, *args) -> list[tuple[str, int, int]]:
    """(operator, bytes of its tensor inputs, bytes of its outputs) of every ATen operator
    ``fn(*args)`` runs that makes new storage, in order: what each eager kernel must read and
    write if nothing stays in a cache. Views (``t``, ``view``, ``split``, ``expand``) are skipped."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    rows = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            ins = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
            outs = [o for o in tree_leaves(out) if isinstance(o, torch.Tensor)]
            bases = {t.untyped_storage().data_ptr() for t in ins}
            if outs and all(o.untyped_storage().data_ptr() not in bases for o in outs):
                reads, writes = sum(t.nbytes for t in ins), sum(o.nbytes for o in outs)
                rows.append((func.overloadpacket.__name__, reads, writes))
            return out

    with Log():
        fn(*args)
    return rows
