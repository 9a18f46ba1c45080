/* flashcl-demo - the main job on the default device: show its on-chip memory
 * and the tiling chosen, run attention forward and backward on a real-sized
 * input (GPT-2 small: 12 heads of 64, 1024 tokens, batch 2, causal, fp16
 * storage), and check every output against a float64 reference with the test
 * suite's tolerance rule (tests/test_support.h).  Exit status 0 only if the
 * check passes.  Options: --seqlen N, --dtype fp32|fp16|bf16, --batch B. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "flashcl.h"
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    fa_case c = {2, 12, 12, 1024, 1024, 64, FCL_DTYPE_FP16, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 2026, NULL};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seqlen")) c.seqlen_q = c.seqlen_k = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--batch")) c.batch = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--dtype"))
            c.dtype = !strcmp(argv[i + 1], "fp32") ? FCL_DTYPE_FP32
                      : !strcmp(argv[i + 1], "bf16") ? FCL_DTYPE_BF16 : FCL_DTYPE_FP16;
        else { fprintf(stderr, "usage: flashcl-demo [--seqlen N] [--batch B] [--dtype T]\n"); return 2; }
    }
    fcl_context *ctx = NULL;
    fcl_status st = fcl_context_create(NULL, &ctx);
    if (st != FCL_OK) {
        fprintf(stderr, "flashcl-demo: no context: %s\n", fcl_status_string(st));
        return 1;
    }
    fcl_device_info info;
    fcl_context_device_info(ctx, &info);
    printf("device: %s (%s)\n", info.name, info.platform_name);
    printf("on-chip memory: reported %.1f KiB, usable %.1f KiB%s\n", info.local_mem_reported / 1024.0,
           info.local_mem_usable / 1024.0, info.local_mem_probed ? " (probed)" : "");

    fcl_attention_desc d;
    fcl_attention_desc_init(&d, c.batch, c.heads_q, c.heads_kv, c.seqlen_q, c.seqlen_k, c.head_dim,
                            c.dtype, c.layout);
    const char *names[3] = {"forward", "backward dK/dV", "backward dQ"};
    for (int k = 0; k < 3; ++k) {
        fcl_plan p;
        st = fcl_plan_query(ctx, &d, (fcl_kernel_kind)k, &p);
        if (st != FCL_OK) {
            fprintf(stderr, "flashcl-demo: %s plan: %s\n%s\n", names[k], fcl_status_string(st),
                    fcl_context_build_log(ctx));
            return 1;
        }
        printf("%-15s paper rule Br=%zu Bc=%zu; launched Br=%zu Bc=%zu, %zu work-items, %.1f KiB local\n",
               names[k], p.paper_br, p.paper_bc, p.br, p.bc, p.work_group_size, p.local_bytes / 1024.0);
    }
    char what[256];
    fa_describe(&c, what, sizeof what);
    printf("\nattention on %s\n", what);
    fa_result r;
    double t0 = now_s();
    int ok_f = fa_check_forward(ctx, &c, &r);
    printf("forward : max error %.3g vs float64 (storage-type reference %.3g, tolerance %.3g) %s\n",
           r.err, r.err_lowp, r.tol, ok_f ? "ok" : "FAIL");
    int ok_b = fa_check_backward(ctx, &c, &r);
    printf("backward: max error %.3g vs float64 in %s (storage-type reference %.3g, tolerance %.3g) %s\n",
           r.err, r.worst ? r.worst : "-", r.err_lowp, r.tol, ok_b ? "ok" : "FAIL");
    printf("(%.1f s including the float64 reference)\n", now_s() - t0);
    fcl_context_destroy(ctx);
    printf("%s\n", ok_f && ok_b ? "PASS" : "FAIL");
    return ok_f && ok_b ? 0 : 1;
}
