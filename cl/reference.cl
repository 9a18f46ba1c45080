/* reference.cl - standard (materialising) attention, the baseline the
 * benchmarks compare with: what a user writes without a fused kernel.
 *   forward:  S = scale * Q K^T -> global memory, P = softmax(S) in place, O = P V
 *   backward: dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)),
 *             dQ = scale * dS K, dK = scale * dS^T Q
 * fp32, contiguous (batch*heads, seq, dim) tensors, N x N matrices per head.
 * The products use a textbook 16 x 16 __local-tiled matrix multiply. */

#define TS 16

/* C[b] = alpha * op(A[b]) op(B[b]), row-major, C is M x N, the inner size K.
 * trans_a: A is stored K x M; trans_b: B is stored N x K. */
__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void ref_gemm(__global const float *A, __global const float *B, __global float *C, int M, int N,
              int K, int lda, int ldb, int ldc, long sa, long sb, long sc, int trans_a,
              int trans_b, float alpha)
{
    __local float As[TS][TS + 1];
    __local float Bs[TS][TS + 1];
    const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
    const int col = (int)get_group_id(0) * TS + tx, row = (int)get_group_id(1) * TS + ty;
    const long b = (long)get_group_id(2);
    A += b * sa;
    B += b * sb;
    C += b * sc;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        const int ak = k0 + tx, bk = k0 + ty;
        As[ty][tx] = (row < M && ak < K) ? (trans_a ? A[(long)ak * lda + row] : A[(long)row * lda + ak]) : 0.0f;
        Bs[ty][tx] = (col < N && bk < K) ? (trans_b ? B[(long)col * ldb + bk] : B[(long)bk * ldb + col]) : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; ++k) acc = mad(As[ty][k], Bs[k][tx], acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N) C[(long)row * ldc + col] = alpha * acc;
}

/* Row softmax of S (rows x n per head) in place, one work-group per row, with
 * the causal mask aligned bottom-right (diag = n_keys - n_queries). */
__kernel void ref_softmax_rows(__global float *S, int rows, int n, int causal)
{
    __local float red[256];
    const long r = (long)get_group_id(0);
    __global float *row = S + r * n;
    const int i = (int)(r % rows);
    const int last = causal ? min(n - 1, i + n - rows) : n - 1; /* last visible key */
    const int t = (int)get_local_id(0), T = (int)get_local_size(0);
    float m = -INFINITY;
    for (int j = t; j <= last; j += T) m = fmax(m, row[j]);
    red[t] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = T / 2; s > 0; s >>= 1) {
        if (t < s) red[t] = fmax(red[t], red[t + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    float l = 0.0f;
    for (int j = t; j < n; j += T) {
        const float e = j <= last ? exp(row[j] - m) : 0.0f;
        row[j] = e;
        l += e;
    }
    red[t] = l;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = T / 2; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = red[0] > 0.0f ? 1.0f / red[0] : 0.0f;
    for (int j = t; j < n; j += T) row[j] *= inv;
}

/* delta[r] = rowsum(dO * O) for each of the rows (d columns). */
__kernel void ref_row_dot(__global const float *dO, __global const float *O, __global float *delta,
                          int d)
{
    const long r = (long)get_global_id(0);
    float s = 0.0f;
    for (int k = 0; k < d; ++k) s = mad(dO[r * d + k], O[r * d + k], s);
    delta[r] = s;
}

/* dS = P * (dP - delta_row), in place over dP; n columns per row. */
__kernel void ref_softmax_grad(__global const float *P, __global float *dP,
                               __global const float *delta, int n)
{
    const long e = (long)get_global_id(0);
    dP[e] = P[e] * (dP[e] - delta[e / n]);
}
