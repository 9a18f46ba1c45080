/* consumer.c - a program built against an installed flashcl: one small
 * forward on the default device through the public header alone, checked
 * against a direct computation.  Exit status 0 and "consumer: OK" on
 * success. */
#include <flashcl.h>

#include <math.h>
#include <stdio.h>

enum { B = 1, H = 2, N = 9, D = 8 };

int main(void)
{
    static float q[B * N * H * D], k[B * N * H * D], v[B * N * H * D], o[B * N * H * D];
    unsigned s = 12345;
    for (int i = 0; i < B * N * H * D; ++i) {
        s = s * 1103515245u + 12345u;
        q[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
        k[i] = (float)((s >> 4) % 1999) / 1000.0f - 1.0f;
        v[i] = (float)((s >> 12) % 2003) / 1000.0f - 1.0f;
    }
    fcl_context *ctx = NULL;
    fcl_status st = fcl_context_create(NULL, &ctx);
    fcl_attention_desc desc;
    fcl_attention_desc_init(&desc, B, H, H, N, N, D, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    if (st == FCL_OK)
        st = fcl_attention_forward_host(ctx, &desc, q, k, v, o, NULL);
    if (st != FCL_OK) {
        fprintf(stderr, "consumer: %s\n%s", fcl_status_string(st),
                ctx ? fcl_context_build_log(ctx) : "");
        fcl_context_destroy(ctx);
        return 1;
    }
    fcl_context_destroy(ctx);
    /* (B, N, H, D): row i of head h at (i * H + h) * D */
    double worst = 0.0;
    for (int h = 0; h < H; ++h)
        for (int i = 0; i < N; ++i) {
            double sc[N], m = -INFINITY, sum = 0.0;
            for (int j = 0; j < N; ++j) {
                double dot = 0.0;
                for (int d = 0; d < D; ++d)
                    dot += (double)q[(i * H + h) * D + d] * k[(j * H + h) * D + d];
                sc[j] = dot / sqrt((double)D);
                m = sc[j] > m ? sc[j] : m;
            }
            for (int j = 0; j < N; ++j)
                sum += (sc[j] = exp(sc[j] - m));
            for (int d = 0; d < D; ++d) {
                double ref = 0.0;
                for (int j = 0; j < N; ++j)
                    ref += sc[j] / sum * v[(j * H + h) * D + d];
                const double err = fabs(ref - o[(i * H + h) * D + d]);
                worst = err > worst ? err : worst;
            }
        }
    if (!(worst < 1e-4)) { /* fp32 storage and arithmetic, 9 keys */
        fprintf(stderr, "consumer: max error %g\n", worst);
        return 1;
    }
    printf("consumer: OK (max error %.2g)\n", worst);
    return 0;
}
