"""PyTorch's attention backends at the shapes of flashcl-bench, for issue-style
side-by-side runs: the method of the shared sdpa_anchor.py (median of 20
CUDA-event timings after 3 warm-ups; FLOPs 4*B*H*N*N*d, halved when causal,
backward 2.5x; B*N = 16384, H*d = 2048, layout (B, H, N, d)), extended to
bf16 and head_dim 256.  --head-dim-v DV: V (and O) DV wide, q and k d wide,
FLOPs as flashcl-bench counts them (forward 2*B*H*N*N*(d + DV), backward
2*B*H*N*N*(3d + 2DV), halved when causal).  --device cpu (wall-clock
timings) only to try the script without a GPU; --tokens for smaller B*N.

Usage (GPU machine, where python3 has torch):
  python3 sdpa_backends.py [--dtypes fp16,bf16] [--head-dims 64,128,256]
                           [--seqlens 1024,4096,16384] [--head-dim-v DV]
                           [--causal 0,1] [--tokens 16384] [--csv FILE]
"""
import sys, time, torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend


def bench(fn, reps=20):
    """Median ms of fn after 3 warm-ups: CUDA events, or the wall clock on the CPU."""
    for _ in range(3):
        fn()
    cuda = torch.cuda.is_available() and DEVICE == "cuda"
    if cuda:
        torch.cuda.synchronize()
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        if cuda:
            s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
        else:
            t0 = time.perf_counter(); fn(); ts.append(1e3 * (time.perf_counter() - t0))
    ts.sort()
    return ts[len(ts) // 2]


def time_sdpa(backend, q, k, v, **kw):
    """Median ms of the forward and of the backward (dQ, dK, dV from a random
    dO) of scaled_dot_product_attention(q, k, v, **kw) on one backend."""
    with sdpa_kernel(backend):
        f = lambda: F.scaled_dot_product_attention(q, k, v, **kw)
        ms = bench(f)
        o = f(); do = torch.randn_like(o)
        msb = bench(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
    return ms, msb


def write_csv(path, header, rows):
    with open(path, "w") as fh:
        fh.write(header + "\n")
        for r in rows:
            fh.write(",".join(map(str, r)) + "\n")


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


DEVICE = arg("--device", "cuda")


def main():
    dtypes = arg("--dtypes", "fp16,bf16").split(",")
    dims = [int(x) for x in arg("--head-dims", "64,128,256").split(",")]
    lens = [int(x) for x in arg("--seqlens", "1024,4096,16384").split(",")]
    causals = [bool(int(x)) for x in arg("--causal", "0,1").split(",")]
    tokens, dv_arg = int(arg("--tokens", "16384")), int(arg("--head-dim-v", "0"))
    csv = arg("--csv", None)
    print(torch.__version__, torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE,
          flush=True)
    rows = []
    for dt in dtypes:
        tdt = torch.float16 if dt == "fp16" else torch.bfloat16
        for d in dims:
            dv = dv_arg or d
            for causal in causals:
                for N in lens:
                    B = max(1, tokens // N); H = max(1, 2048 // d)
                    q = torch.randn(B, H, N, d, device=DEVICE, dtype=tdt, requires_grad=True)
                    k = torch.randn_like(q, requires_grad=True)
                    v = torch.randn(B, H, N, dv, device=DEVICE, dtype=tdt, requires_grad=True)
                    pairs = 2 * B * H * N * N * (0.5 if causal else 1)
                    fl, flb = pairs * (d + dv), pairs * (3 * d + 2 * dv)
                    line = f"{dt} d={d} dv={dv} causal={int(causal)} N={N} B={B} H={H}"
                    for be, name in [(SDPBackend.FLASH_ATTENTION, "fa2"), (SDPBackend.CUDNN_ATTENTION, "cudnn"),
                                     (SDPBackend.EFFICIENT_ATTENTION, "memeff")]:
                        try:
                            ms, msb = time_sdpa(be, q, k, v, is_causal=causal)
                            tf, tb = fl / ms / 1e9, flb / msb / 1e9
                            line += f" | {name} fwd {tf:.0f} bwd {tb:.0f}"
                            rows.append((dt, d, int(causal), N, B, H, name, round(tf, 1), round(tb, 1),
                                         dv, round(ms, 4), round(msb, 4)))
                        except Exception as ex:  # a backend may not take a shape
                            line += f" | {name} n/a ({type(ex).__name__})"
                    print(line, flush=True)
                    del q, k, v
                    torch.cuda.empty_cache()
    if csv:
        write_csv(csv, "dtype,d,causal,N,B,H,backend,fwd_tflops,bwd_tflops,dv,fwd_ms,bwd_ms", rows)


if __name__ == "__main__":
    main()
