#!/usr/bin/env bash
# Lab 09's command file: one command per level of "why is it slow", coarse to fine.
# Usage: bash commands.sh LEVEL [program and arguments...]   (LEVEL: torch | nsys | ncu-sol | ncu-full)
# Every level profiles the program given after LEVEL, e.g.
#   bash src/infralens/profiling/commands.sh ncu-sol python -m infralens.profiling.targets matmul
# ncu options (a kernel filter: --kernel-name regex:NAME) go after the level, before the program.
set -euo pipefail
[ "$#" -gt 0 ] || { echo "commands.sh: error: usage: commands.sh torch|nsys|ncu-sol|ncu-full PROGRAM [ARGS...]" >&2; exit 2; }
level="$1"
shift
[ "$#" -gt 0 ] || { echo "commands.sh: error: give the program to profile after the level" >&2; exit 2; }

case "$level" in
  # [profiling:levels]
  torch)      # 1. the step: operators, kernels, gaps (no extra tools; the program calls torch.profiler)
    PYTHONPATH=src "$@" ;;
  nsys)       # 2. the timeline of the whole process: CPU threads, CUDA API, kernels, memcpy, NCCL
    nsys profile --trace=cuda,nvtx,osrt --sample=none --output=profile --force-overwrite=true "$@"
    nsys stats --report cuda_gpu_kern_sum,cuda_api_sum profile.nsys-rep ;;
  ncu-sol)    # 3. one kernel against the GPU's peaks: which unit limits it
    ncu --section SpeedOfLight --launch-skip 1 --launch-count 1 --clock-control none "$@" ;;
  ncu-full)   # 4. why that unit is slow: memory traffic, scheduler, warp stalls, source lines
    ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats \
        --section WarpStateStats --section Occupancy --section SourceCounters \
        --launch-skip 1 --launch-count 1 --clock-control none --export kernel --force-overwrite "$@" ;;
  # [/profiling:levels]
  *) echo "commands.sh: error: unknown level '$level' (torch, nsys, ncu-sol, ncu-full)" >&2; exit 2 ;;
esac
