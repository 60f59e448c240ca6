"""A stand-in for the compiled probe on a machine without a GPU.

It answers cudaOccupancyMaxActiveBlocksPerMultiprocessor with the calculator itself, so tests
that use it check the plumbing around the runtime (attributes set and restored, records written,
prose built from them), not the calculator; test_occupancy.py checks the calculator against
NVIDIA's cuda_occupancy.h.
"""

from __future__ import annotations

from infralens.gpuarch.occupancy import Kernel, occupancy


class FakeProbe:
    kernels = ["occ_copy", "occ_reduce_dyn", "occ_transpose33", "occ_sgemm_8x8",
               "occ_sgemm_8x8_lb3", "occ_stage_dyn"]
    regs = {"occ_copy": 32, "occ_reduce_dyn": 12, "occ_transpose33": 16, "occ_sgemm_8x8": 128,
            "occ_sgemm_8x8_lb3": 80, "occ_stage_dyn": 20}
    static = {"occ_transpose33": 4224, "occ_sgemm_8x8": 8192, "occ_sgemm_8x8_lb3": 8192}

    def __init__(self):
        self.max_dyn = {k: 49152 - self.static.get(k, 0) for k in self.kernels}
        self.carveout = {k: -1 for k in self.kernels}

    def device_attributes(self):
        return {"compute_capability_major": 9, "compute_capability_minor": 0, "warp_size": 32,
                "multiprocessor_count": 132, "max_threads_per_multiprocessor": 2048,
                "max_blocks_per_multiprocessor": 32, "max_threads_per_block": 1024,
                "max_registers_per_multiprocessor": 65536, "max_registers_per_block": 65536,
                "max_shared_memory_per_multiprocessor": 233472,
                "max_shared_memory_per_block": 49152, "max_shared_memory_per_block_optin": 232448,
                "reserved_shared_memory_per_block": 1024, "l2_cache_size": 52428800,
                "global_memory_bus_width": 5120}

    def func_attributes(self, k):
        return {"num_regs": self.regs[k], "shared_size_bytes": self.static.get(k, 0),
                "local_size_bytes": 152 if k.endswith("lb3") else 0, "const_size_bytes": 0,
                "max_threads_per_block": 256 if k.endswith("lb3") else 1024,
                "max_dynamic_shared_size_bytes": self.max_dyn[k], "preferred_shmem_carveout": -1,
                "binary_version": 90}

    def set_max_dynamic_smem(self, k, n):
        self.max_dyn[k] = n

    def set_carveout(self, k, pct):
        self.carveout[k] = pct

    def max_active_blocks(self, k, block, dyn):
        a = self.func_attributes(k)
        kern = Kernel(block, a["num_regs"], a["shared_size_bytes"], dyn, self.max_dyn[k])
        pct = self.carveout[k]
        return occupancy(kern, (9, 0), carveout_percent=None if pct < 0 else pct).blocks_per_sm

    def try_launch(self, k, block, dyn):
        return 0 if self.max_active_blocks(k, block, dyn) else 701

    def error_string(self, code):
        return "no error" if code == 0 else "too many resources requested for launch"

    def chase(self, mode, nbytes, stride, steps, seed=1):
        ns = {2: 20.0, 0: 25.0}.get(mode, 150.0 if nbytes < 64 * 2**20 else 600.0)
        return {"cycles": ns * 1.755, "ns": ns}


class FakeSMProbe:
    """A stand-in for the compiled SM probe: FMA chains of 4.5 cycles per dependent FMA (the
    loop included) and one instruction per clock per scheduler, and spinning blocks that an SM
    holds exactly as the calculator allows (so a residency check against it must report
    agreement)."""

    def __init__(self, sms: int = 132):
        self.sms = sms

    def ffma_cycles(self, threads, steps):
        # 16 FFMAs and 3 other instructions per loop iteration, 72 cycles per iteration alone.
        warps = -(-threads // 32)
        per_scheduler = -(-warps // 4)
        return round(steps / 16 * max(72, 19 * per_scheduler))

    def resident(self, grid, threads, dyn, spin_ns):
        from infralens.gpuarch import sm_probe as sp

        per_sm = occupancy(sp.resident_kernel(threads, dyn)).blocks_per_sm
        waves = [i // (self.sms * per_sm) for i in range(grid)]
        return [(i % self.sms, w * spin_ns, (w + 1) * spin_ns) for i, w in enumerate(waves)]
