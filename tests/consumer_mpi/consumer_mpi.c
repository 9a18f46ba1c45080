/* consumer_mpi.c - a program built against an installed flashcl_mpi: the
 * ring forward on however many ranks it is started with, through the
 * public headers alone; with one rank (started without mpirun) it must be
 * bitwise the plain call.  Exit status 0 and "consumer_mpi: OK" on success. */
#include <flashcl_mpi.h>

#include <stdio.h>
#include <string.h>

enum { H = 2, N = 12, D = 8 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    static float q[N * H * D], k[N * H * D], v[N * H * D], o[N * H * D], plain[N * H * D];
    unsigned s = 777;
    for (int i = 0; i < N * H * D; ++i) {
        s = s * 1103515245u + 12345u;
        q[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
        k[i] = (float)((s >> 4) % 1999) / 1000.0f - 1.0f;
        v[i] = (float)((s >> 12) % 2003) / 1000.0f - 1.0f;
    }
    fcl_mpi *m = NULL;
    fcl_status st = fcl_mpi_create(MPI_COMM_WORLD, NULL, NULL, &m);
    fcl_mpi_desc d;
    fcl_mpi_desc_init(&d, 1, H, H, N, D, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    d.causal = 1;
    if (st == FCL_OK)
        st = fcl_mpi_attention_forward_host(m, &d, q, k, v, o, NULL);
    fcl_attention_desc pd;
    fcl_attention_desc_init(&pd, 1, H, H, N, N, D, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    pd.causal = 1;
    if (st == FCL_OK && fcl_mpi_size(m) == 1)
        st = fcl_attention_forward_host(fcl_mpi_context(m), &pd, q, k, v, plain, NULL);
    int ok = st == FCL_OK && (fcl_mpi_size(m) > 1 || memcmp(o, plain, sizeof o) == 0);
    if (fcl_mpi_rank(m) <= 0)
        printf("consumer_mpi: %s\n", ok ? "OK" : st != FCL_OK ? fcl_status_string(st) : "differs");
    fcl_mpi_destroy(m);
    MPI_Finalize();
    return ok ? 0 : 1;
}
