"""Simulated CPU devices: an N-device mesh on one host, for sharding without a cluster.

XLA's CPU client can present one host as N devices. JAX reads the count once, when its CPU
backend starts, so :func:`host_devices` must run before the first array is made.
"""

from __future__ import annotations

__all__ = ["host_devices"]


def host_devices(n: int) -> list:
    """Ask for ``n`` CPU devices and return ``jax.devices("cpu")``; refuses once JAX has started.

    Raises ``ValueError`` for ``n < 1`` and ``RuntimeError`` when the CPU backend already runs
    with another count (restart the process, or call this first).
    """
    if n < 1:
        raise ValueError(f"the device count must be at least 1, not {n}")
    import jax
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        have = jax.devices("cpu")
        if len(have) != n:
            raise RuntimeError(f"JAX's CPU backend already runs with {len(have)} device(s); "
                               f"host_devices({n}) must be called before the first JAX array")
        return have
    jax.config.update("jax_num_cpu_devices", n)
    return jax.devices("cpu")
