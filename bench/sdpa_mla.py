"""PyTorch doing multi-head latent attention decoding with matmuls, at
flashcl-bench-decode --shared-kv's shapes, for side-by-side runs on the GPU
machine (FlashMLA's absorbed form, what a model without an MLA kernel runs):
one latent cache (B, sk, 576) shared by Hq query heads, scores = q @ latent^T
(q: B, Hq * rows, 576), P = softmax(scale * scores) (in fp32, rounded to the
storage type), O = P @ latent[..., :512].  The cache is contiguous (PyTorch
has no page table); no mask (one query row sees every key).  Bytes moved =
the cache once, Q and O, as flashcl counts them; copy bandwidth measured in
the same run.  Timing as sdpa_backends.py (median of CUDA events).

Usage: python3 sdpa_mla.py [--dtypes fp16] [--batches 1,16,64]
         [--seqlens 4096,16384,65536] [--heads 16,128] [--rows 1] [--csv FILE]
"""
import torch
from sdpa_backends import bench, write_csv, arg
from sdpa_decode import copy_bandwidth

D, DV = 576, 512


def main():
    ints = lambda name, dflt: [int(x) for x in arg(name, dflt).split(",")]  # noqa: E731
    dtypes = arg("--dtypes", "fp16").split(",")
    batches, lens = ints("--batches", "1,16,64"), ints("--seqlens", "4096,16384,65536")
    heads, rows = ints("--heads", "16,128"), ints("--rows", "1")
    bw = copy_bandwidth()
    print(torch.__version__, torch.cuda.get_device_name(), f"copy bandwidth {bw / 1e9:.0f} GB/s", flush=True)
    out = []
    scale = D ** -0.5
    for dt in dtypes:
        tdt = torch.float16 if dt == "fp16" else torch.bfloat16
        for B in batches:
            for sk in lens:
                latent = torch.randn(B, sk, D, device="cuda", dtype=tdt)
                lt, lv = latent.transpose(1, 2), latent[..., :DV]
                for H in heads:
                    for sq in rows:
                        q = torch.randn(B, H * sq, D, device="cuda", dtype=tdt)
                        call = lambda: torch.softmax(torch.bmm(q, lt).float() * scale, -1).to(tdt).bmm(lv)  # noqa: E731
                        try:
                            ms = bench(call, 20)
                        except torch.OutOfMemoryError:
                            print(f"mla {dt} B={B} sk={sk} Hq={H}: out of memory", flush=True)
                            continue
                        s = ms / 1e3
                        byts = (latent.numel() + q.numel() + B * H * sq * DV) * latent.element_size()
                        fl = 2.0 * B * H * sq * sk * (D + DV)
                        print(f"mla {dt} B={B} sk={sk} Hq={H} rows={sq} | torch {s * 1e6:.1f}us "
                              f"{byts / s / 1e9:.0f}GB/s {100 * byts / s / bw:.0f}% {fl / s / 1e12:.1f}TFLOP/s", flush=True)
                        out.append(("mla", dt, B, H, sk, sq, "torch-matmul", round(s * 1e6, 2),
                                    round(byts / s / 1e9, 1), round(100 * byts / s / bw, 2), round(fl / s / 1e12, 3)))
                        del q
                del latent, lt, lv
                torch.cuda.empty_cache()
    csv = arg("--csv", None)
    if csv:
        write_csv(csv, f"# copy_bandwidth_gbs: {bw / 1e9:.1f}\nkind,dtype,B,Hq,sk,rows,backend,us,gbs,"
                  "pct_copy_bw,tflops", out)


if __name__ == "__main__":
    main()
