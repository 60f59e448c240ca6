import json, time, torch
from infralens.kernels.w4a16 import bench_w4a16
from infralens.kernels.lowp_gemm import bench_lowp_gemm
t=time.time()
r=bench_w4a16()
print("copy GB/s", round(r["copy_gbps"]))
for s in r["shapes"]:
    print(s["k"], s["n"], s["config"], "tried", len(s["tried"]))
    top=sorted(s["tried"], key=lambda q: q["ms"])[:5]
    for q in top: print("   ", q)
    for row in s["rows"]:
        print("  M=%d ours %.4f ms cublas %.4f ms speedup %.2f  wGB/s %.0f  cublas GB/s %.0f err %.1e" % (row["m"], row["ms"], row["cublas_ms"], row["speedup"], row["weight_gbps"], row["cublas_weight_gbps"], row["max_rel_err"]))
print(time.time()-t)
print(json.dumps(bench_lowp_gemm(), indent=0))
