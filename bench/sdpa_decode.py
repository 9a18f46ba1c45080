"""PyTorch's SDPA backends at flashcl-bench-decode's shapes, for side-by-side
runs on the GPU machine: decode (B in --batches, Hq/Hkv = 32/8, d = 128,
1 or 4 query rows against sk cached keys, causal, enable_gqa, layout
(B, H, S, d)) with the copy bandwidth measured in the same run, and
small-batch prefill (B = 1, H = 32, N in --prefill-seqlens).  The method of
sdpa_backends.py: median of CUDA-event timings after warm-up.  Bytes moved =
K, V, Q, O once.

Usage: python3 sdpa_decode.py [--dtypes fp16,bf16] [--batches 1,8,32]
         [--seqlens 1024,8192,32768,131072] [--rows 1,4]
         [--prefill-seqlens 128,256,512,1024] [--csv FILE]
"""
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
from sdpa_backends import bench, write_csv, arg

BACKENDS = [(SDPBackend.FLASH_ATTENTION, "fa2"), (SDPBackend.CUDNN_ATTENTION, "cudnn")]


def copy_bandwidth():
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
    ms = bench(lambda: b.copy_(a), 10)
    del a, b
    return 2 * (1 << 30) / (ms / 1e3)


def main():
    ints = lambda name, dflt: [int(x) for x in arg(name, dflt).split(",")]
    dtypes = arg("--dtypes", "fp16,bf16").split(",")
    batches, lens, rows = ints("--batches", "1,8,32"), ints("--seqlens", "1024,8192,32768,131072"), ints("--rows", "1,4")
    prefill = ints("--prefill-seqlens", "128,256,512,1024")
    Hq, Hk, d = 32, 8, 128
    bw = copy_bandwidth()
    print(torch.__version__, torch.cuda.get_device_name(), f"copy bandwidth {bw / 1e9:.0f} GB/s", flush=True)
    out = []
    for dt in dtypes:
        tdt = torch.float16 if dt == "fp16" else torch.bfloat16
        for B in batches:
            for sk in lens:
                k = torch.randn(B, Hk, sk, d, device="cuda", dtype=tdt); v = torch.randn_like(k)
                for sq in rows:
                    q = torch.randn(B, Hq, sq, d, device="cuda", dtype=tdt)
                    byts = (2 * k.numel() + 2 * q.numel()) * k.element_size()
                    line = f"decode {dt} B={B} sk={sk} rows={sq}"
                    for be, name in BACKENDS:
                        try:
                            # No mask: SDPA's is_causal aligns top-left, and its flash
                            # backend takes no explicit mask; with rows <= 4 against
                            # sk >= 1024 keys the bottom-right causal mask (ours)
                            # hides at most 6 scores a head, so the work is the same.
                            with sdpa_kernel(be):
                                ms = bench(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), 50)
                            s = ms / 1e3
                            line += f" | {name} {s * 1e6:.1f}us {byts / s / 1e9:.0f}GB/s {100 * byts / s / bw:.0f}%"
                            out.append(("decode", dt, B, sk, sq, name, round(s * 1e6, 2), round(byts / s / 1e9, 1),
                                        round(100 * byts / s / bw, 2), ""))
                        except Exception as ex:
                            line += f" | {name} n/a ({type(ex).__name__})"
                    print(line, flush=True)
                    del q
                del k, v
                torch.cuda.empty_cache()
        for N in prefill:
            for causal in [False, True]:
                q = torch.randn(1, Hq, N, d, device="cuda", dtype=tdt); k = torch.randn_like(q); v = torch.randn_like(q)
                fl = 4 * Hq * N * N * d * (0.5 if causal else 1)
                line = f"prefill {dt} N={N} causal={int(causal)}"
                for be, name in BACKENDS:
                    try:
                        with sdpa_kernel(be):
                            ms = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), 50)
                        line += f" | {name} {ms * 1e3:.1f}us {fl / ms / 1e9:.1f}TFLOP/s"
                        out.append(("prefill" + ("-causal" if causal else ""), dt, 1, N, N, name,
                                    round(ms * 1e3, 2), "", "", round(fl / ms / 1e9, 2)))
                    except Exception as ex:
                        line += f" | {name} n/a ({type(ex).__name__})"
                print(line, flush=True)
    csv = arg("--csv", None)
    if csv:
        write_csv(csv, f"# copy_bandwidth_gbs: {bw / 1e9:.1f}\nkind,dtype,B,sk,rows,backend,us,gbs,pct_copy_bw,tflops", out)


if __name__ == "__main__":
    main()
