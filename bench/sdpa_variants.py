"""PyTorch SDPA on the variants it can express, for flashcl-bench-variants.

Usage (GPU machine, where python3 has torch): python3 sdpa_variants.py [--csv FILE]
Same shapes and FLOP count as flashcl-bench-variants: fp16, head_dim 64,
B*N = 16384, H*d = 2048, dense FLOPs 4*B*H*N^2*d (backward 2.5x).
SDPA has dropout and is_causal natively (FlashAttention-2 backend); a sliding
window, ALiBi and a block-sparse pattern only as an explicit attn_mask (the
memory-efficient backend, which reads the N x N mask); nothing for softcap or
packed variable-length batches.
"""
import sys, torch
from torch.nn.attention import SDPBackend

from sdpa_backends import time_sdpa, write_csv  # same timing method (beside this file)

def main():
    csv = sys.argv[sys.argv.index("--csv") + 1] if "--csv" in sys.argv else None
    d = 64
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    rows = []
    for N in [1024, 4096, 16384]:
        B, H = 16384 // N, 2048 // d
        q = torch.randn(B, H, N, d, device="cuda", dtype=torch.float16, requires_grad=True)
        k = torch.randn_like(q, requires_grad=True); v = torch.randn_like(q, requires_grad=True)
        i = torch.arange(N, device="cuda")
        dist = i[:, None] - i[None, :]
        cases = [("plain", SDPBackend.FLASH_ATTENTION, dict()),
                 ("causal", SDPBackend.FLASH_ATTENTION, dict(is_causal=True)),
                 ("dropout 0.1", SDPBackend.FLASH_ATTENTION, dict(dropout_p=0.1)),
                 ("window 256 causal (mask)", SDPBackend.EFFICIENT_ATTENTION,
                  dict(attn_mask=(dist >= 0) & (dist <= 256))),
                 ("block-sparse 0.5 (mask)", SDPBackend.EFFICIENT_ATTENTION,
                  dict(attn_mask=(torch.rand((N + 63) // 64, (N + 63) // 64, device="cuda") < 0.5)
                       .repeat_interleave(64, 0).repeat_interleave(64, 1)[:N, :N]))]
        if N <= 4096:  # an (H, N, N) fp16 bias: 2 GiB at N = 16384
            slopes = torch.pow(2.0, -8.0 * torch.arange(1, H + 1, device="cuda") / H)
            bias = (-slopes[:, None, None] * dist.abs()[None]).to(torch.float16)
            cases.append(("alibi (bias)", SDPBackend.EFFICIENT_ATTENTION, dict(attn_mask=bias)))
        fl = 4 * B * H * N * N * d
        for name, be, kw in cases:
            try:
                ms, msb = time_sdpa(be, q, k, v, **kw)
                line = f"{name:28s} N={N:6d} fwd {ms:8.3f} ms {fl / ms / 1e9:7.1f} TFLOP/s | bwd {msb:8.3f} ms {2.5 * fl / msb / 1e9:7.1f}"
                rows.append((name, N, round(ms, 4), round(msb, 4)))
            except Exception as ex:  # a backend may refuse a shape or mask
                line = f"{name:28s} N={N:6d} n/a ({type(ex).__name__}: {str(ex)[:60]})"
            print(line, flush=True)
    if csv:
        write_csv(csv, "variant,N,fwd_ms,bwd_ms", rows)

if __name__ == "__main__":
    main()
