"""PyTorch's CPU scaled_dot_product_attention (it has its own flash-attention
CPU kernel) at flashcl-bench-cpu's shapes, fp32, for side-by-side runs on the
GPU machine's CPU: B*N = 8192, H = 4, d in --head-dims, N in --seqlens,
causal off and on, layout (B, H, N, d); median of --reps timed calls after a
warm-up, on torch.get_num_threads() threads (--threads sets it).
FLOPs: 4 B H N^2 d, halved when causal (as flashcl-bench-cpu counts).

Usage: python3 sdpa_cpu.py [--head-dims 64,128] [--seqlens 512,...,8192]
         [--threads T] [--reps 3] [--csv FILE]
"""
import statistics, sys, time

import torch
import torch.nn.functional as F


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    dims = [int(x) for x in arg("--head-dims", "64,128").split(",")]
    lens = [int(x) for x in arg("--seqlens", "512,1024,2048,4096,8192").split(",")]
    reps = int(arg("--reps", "3"))
    if arg("--threads", None):
        torch.set_num_threads(int(arg("--threads", "1")))
    H, tokens = 4, 8192
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    rows = []
    for d in dims:
        for N in lens:
            B = tokens // N
            q = torch.rand(B, H, N, d) * 2 - 1
            k, v = torch.rand_like(q) * 2 - 1, torch.rand_like(q) * 2 - 1
            for causal in (0, 1):
                F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                t = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                    t.append(time.perf_counter() - t0)
                flops = 4.0 * B * H * N * N * d * (0.5 if causal else 1.0)
                gf = flops / statistics.median(t) / 1e9
                print(f"fp32 B={B} N={N} d={d} causal={causal}: {gf:.1f} GFLOP/s", flush=True)
                rows.append(("fp32", B, H, N, d, causal, torch.get_num_threads(), f"{gf:.2f}"))
    path = arg("--csv", None)
    if path:
        with open(path, "w") as fh:
            fh.write(f"# torch: {torch.__version__}\nshape_dtype,B,H,N,d,causal,threads,torch_gflops\n")
            for r in rows:
                fh.write(",".join(map(str, r)) + "\n")


if __name__ == "__main__":
    main()
