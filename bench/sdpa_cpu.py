"""PyTorch's CPU scaled_dot_product_attention (it has its own flash-attention
CPU kernel) at flashcl-bench-cpu's shapes, fp32, for side-by-side runs on the
GPU machine's CPU: forward and backward at B*N = 8192, H = 4, d in
--head-dims, N in --seqlens, causal off and on, layout (B, H, N, d); decoding
(one query row, B = 8, 32 query heads on 8 K/V heads, d = 128, sk in
--decode-seqlens).  Median of --reps timed calls after a warm-up, on
torch.get_num_threads() threads (--threads sets it).
FLOPs as flashcl-bench-cpu counts them: forward 4 B H N^2 d, backward 2.5x
(halved when causal); decoding: K/V bytes read per second.

Usage: python3 sdpa_cpu.py [--head-dims 64,128] [--seqlens 512,...,8192]
         [--decode-seqlens 1024,8192,32768] [--threads T] [--reps 3] [--csv FILE]
"""
import statistics, sys, time

import torch
import torch.nn.functional as F


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def median_time(fn, reps):
    fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


def main():
    dims = [int(x) for x in arg("--head-dims", "64,128").split(",")]
    lens = [int(x) for x in arg("--seqlens", "512,1024,2048,4096,8192").split(",")]
    dec = [int(x) for x in arg("--decode-seqlens", "1024,8192,32768").split(",") if x]
    reps = int(arg("--reps", "3"))
    if arg("--threads", None):
        torch.set_num_threads(int(arg("--threads", "1")))
    threads = torch.get_num_threads()
    H, tokens = 4, 8192
    print(f"torch {torch.__version__}, {threads} threads", flush=True)
    rows = []
    for d in dims:
        for N in lens:
            B = tokens // N
            q = (torch.rand(B, H, N, d) * 2 - 1).requires_grad_()
            k = (torch.rand_like(q) * 2 - 1).requires_grad_()
            v = (torch.rand_like(q) * 2 - 1).requires_grad_()
            g = torch.rand_like(q) * 2 - 1
            for causal in (0, 1):
                flops = 4.0 * B * H * N * N * d * (0.5 if causal else 1.0)
                with torch.no_grad():
                    t = median_time(lambda: F.scaled_dot_product_attention(
                        q, k, v, is_causal=bool(causal)), reps)
                rows.append(("fwd", B, H, N, d, causal, threads, f"{flops / t / 1e9:.2f}"))
                out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))

                def backward():
                    torch.autograd.grad(out, (q, k, v), g, retain_graph=True)
                tb = median_time(backward, reps)
                rows.append(("bwd", B, H, N, d, causal, threads, f"{2.5 * flops / tb / 1e9:.2f}"))
                print(f"fp32 B={B} N={N} d={d} causal={causal}: fwd {flops / t / 1e9:.1f}, "
                      f"bwd {2.5 * flops / tb / 1e9:.1f} GFLOP/s", flush=True)
    for sk in dec:
        B, Hq, Hkv, d = 8, 32, 8, 128
        q = torch.rand(B, Hq, 1, d) * 2 - 1
        k = torch.rand(B, Hkv, sk, d) * 2 - 1
        v = torch.rand_like(k) * 2 - 1
        with torch.no_grad():
            t = median_time(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), reps)
        gbs = 2.0 * k.numel() * 4 / t / 1e9
        rows.append(("decode", B, Hq, sk, d, 0, threads, f"{gbs:.2f}"))
        print(f"fp32 decode B={B} sk={sk}: {gbs:.1f} GB/s", flush=True)
    path = arg("--csv", None)
    if path:
        with open(path, "w") as fh:
            fh.write(f"# torch: {torch.__version__}\npass,B,H,N,d,causal,threads,torch\n")
            for r in rows:
                fh.write(",".join(map(str, r)) + "\n")


if __name__ == "__main__":
    main()
