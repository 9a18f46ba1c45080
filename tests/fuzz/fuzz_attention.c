/* fuzz_attention.c - a libFuzzer target for the attention and KV-cache
 * calls' input checks.
 *
 * Each input is decoded into one call: which entry point (forward,
 * backward and KV-cache, on cl_mem buffers and on host arrays, and the plan
 * queries), an fcl_attention_desc or fcl_kvcache_desc with any sizes (0,
 * small, the limits and around them, any 64-bit value), strides, offsets,
 * dtypes, flags, windows, softcap, ALiBi, rotary, dropout, packed sequences
 * (totals and cu_seqlens contents), block masks, page tables and cache
 * lengths, and which buffers go where (the same buffer twice, a buffer
 * too small, NULL).  It checks:
 *   - no crash and no undefined behaviour (the build has ASan and UBSan);
 *   - whenever the status is not FCL_OK, every buffer and host array the
 *     call could have written is byte-identical to before.
 *
 * The buffers are small (POOL_BYTES each), so a descriptor that passes
 * the checks runs real kernels under PoCL on a few kilobytes.  A kernel
 * build costs seconds, and every (head_dim, dtype, variant, plan) is a new
 * one; to keep the fuzzer in the checks, a head_dim inside 1..256 is
 * mapped onto 8, 16 or 40 (the checks treat every value in range alike;
 * 0 and everything past 256 stay as decoded), and at most MAX_BUILDS
 * programs are built per process: the link wraps clBuildProgram, and a
 * build of any further program fails with CL_OUT_OF_HOST_MEMORY, which
 * the library must turn into a status like any other failure (and is
 * checked like one). */
#include "flashcl.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- at most MAX_BUILDS programs ------------------------------------------- */

enum { MAX_BUILDS = 12 };
static char *g_built[MAX_BUILDS];
static int g_num_built;

cl_int __real_clBuildProgram(cl_program p, cl_uint nd, const cl_device_id *d, const char *o,
                             void(CL_CALLBACK *f)(cl_program, void *), void *u);
cl_int __wrap_clBuildProgram(cl_program p, cl_uint nd, const cl_device_id *d, const char *o,
                             void(CL_CALLBACK *f)(cl_program, void *), void *u);
cl_int __wrap_clBuildProgram(cl_program p, cl_uint nd, const cl_device_id *d, const char *o,
                             void(CL_CALLBACK *f)(cl_program, void *), void *u)
{
    const char *key = o != NULL ? o : "";
    int known = 0;
    for (int i = 0; i < g_num_built && !known; ++i)
        known = strcmp(g_built[i], key) == 0;
    if (!known) {
        if (g_num_built == MAX_BUILDS)
            return CL_OUT_OF_HOST_MEMORY;
        g_built[g_num_built] = malloc(strlen(key) + 1);
        if (g_built[g_num_built] == NULL)
            return CL_OUT_OF_HOST_MEMORY;
        strcpy(g_built[g_num_built++], key);
    }
    return __real_clBuildProgram(p, nd, d, o, f, u);
}

/* ---- decoding the input ------------------------------------------------------ */

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t u8(reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static uint64_t u64(reader *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
        v |= (uint64_t)u8(r) << (8 * i);
    return v;
}

static float raw_float(reader *r)
{
    uint32_t bits = (uint32_t)u64(r);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* A size: mostly small, often a limit or next to one, sometimes anything. */
static size_t size_of(reader *r)
{
    static const uint64_t edge[] = {0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 63, 64, 65, 255, 256, 257,
                                    1023, 1024, 1025, (1u << 24) - 1, 1u << 24, (1u << 24) + 1,
                                    INT_MAX / 2, INT_MAX / 2 + 1, INT_MAX, 1ull << 31,
                                    1ull << 32, (1ull << 32) + 1, 1ull << 62, SIZE_MAX / 2,
                                    SIZE_MAX / 2 + 1, SIZE_MAX - 1, SIZE_MAX};
    const uint8_t sel = u8(r);
    if (sel < 160)
        return sel % 40;
    if (sel < 248)
        return (size_t)edge[(sel - 160) % (sizeof edge / sizeof edge[0])];
    return (size_t)u64(r);
}

static int64_t window_of(reader *r)
{
    static const int64_t w[] = {-1, -1, -1, 0, 1, 3, 16, -2, INT64_MIN, INT64_MAX, INT_MAX,
                                (int64_t)INT_MAX + 1};
    const uint8_t sel = u8(r);
    return sel < 240 ? w[sel % (sizeof w / sizeof w[0])] : (int64_t)u64(r);
}

static float value_of(reader *r, const float *common, size_t n)
{
    const uint8_t sel = u8(r);
    return sel < 240 ? common[sel % n] : raw_float(r);
}

static int int_of(reader *r, const int *common, size_t n)
{
    const uint8_t sel = u8(r);
    return sel < 240 ? common[sel % n] : (int)(uint32_t)u64(r);
}

static size_t head_dim_of(reader *r)
{
    const size_t d = size_of(r);
    static const size_t kept[] = {8, 16, 40};
    return d >= 1 && d <= 256 ? kept[d % 3] : d;
}

static fcl_dtype dtype_of(reader *r)
{
    static const int t[] = {FCL_DTYPE_FP16,     FCL_DTYPE_FP32, FCL_DTYPE_BF16,
                            FCL_DTYPE_FP8_E4M3, FCL_DTYPE_FP8_E5M2, 5, -1};
    return (fcl_dtype)int_of(r, t, sizeof t / sizeof t[0]);
}

static void layout_of(reader *r, fcl_layout *l)
{
    l->offset = size_of(r);
    l->stride_batch = size_of(r);
    l->stride_head = size_of(r);
    l->stride_seq = size_of(r);
}

/* ---- buffers ----------------------------------------------------------------- */

enum { POOL_BYTES = 1 << 14, TINY_BYTES = 16 };
/* device buffers: POOL large ones, one tiny one, then NULL */
enum { POOL = 10, CHOICES = POOL + 2 };
/* host arrays, one per role */
enum { H_Q, H_K, H_V, H_O, H_LSE, H_DOUT, H_DQ, H_DK, H_DV, H_AUX0, H_AUX1, H_AUX2, H_AUX3, HOST };

static fcl_context *g_ctx;
static cl_command_queue g_queue;
static cl_mem g_pool[CHOICES];
static unsigned char *g_pristine;  /* every device buffer's bytes, POOL_BYTES each */
static unsigned char *g_readback;
static unsigned char *g_host[HOST];
static unsigned char *g_host_pristine[HOST];

static int g_verbose; /* FCL_FUZZ_VERBOSE set: print each call's status (to check seeds) */

static void report(const char *call, fcl_status st)
{
    if (g_verbose)
        fprintf(stderr, "%s: %s\n", call, fcl_status_string(st));
}

static void die(const char *what)
{
    fprintf(stderr, "fuzz_attention: %s\n", what);
    abort();
}

static void fill(unsigned char *p, size_t n, uint32_t seed)
{
    /* small values in every storage type: bytes 0x00..0x3f */
    for (size_t i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (unsigned char)((seed >> 24) & 0x3f);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.disk_cache = 0;
    g_verbose = getenv("FCL_FUZZ_VERBOSE") != NULL;
    if (fcl_context_create(&o, &g_ctx) != FCL_OK)
        die("no context");
    g_queue = fcl_context_cl_queue(g_ctx);
    g_pristine = malloc((size_t)POOL * POOL_BYTES);
    g_readback = malloc(POOL_BYTES);
    if (g_pristine == NULL || g_readback == NULL)
        die("out of memory");
    fill(g_pristine, (size_t)POOL * POOL_BYTES, 1);
    for (int i = 0; i < POOL + 1; ++i) {
        const size_t n = i < POOL ? POOL_BYTES : TINY_BYTES;
        cl_int err = CL_SUCCESS;
        g_pool[i] = clCreateBuffer(fcl_context_cl_context(g_ctx),
                                   CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n,
                                   g_pristine + (size_t)(i < POOL ? i : 0) * POOL_BYTES, &err);
        if (err != CL_SUCCESS)
            die("clCreateBuffer");
    }
    g_pool[POOL + 1] = NULL;
    for (int i = 0; i < HOST; ++i) {
        g_host[i] = malloc(POOL_BYTES);
        g_host_pristine[i] = malloc(POOL_BYTES);
        if (g_host[i] == NULL || g_host_pristine[i] == NULL)
            die("out of memory");
        fill(g_host_pristine[i], POOL_BYTES, 100 + (uint32_t)i);
        memcpy(g_host[i], g_host_pristine[i], POOL_BYTES);
    }
    return 0;
}

/* Writes `n` int32 from the input (raw, or increasing from 0) to pool
 * buffer `i` (if it is a real one) and to host array `h`. */
static void int_array(reader *r, int i, int h, size_t n)
{
    int32_t v[64];
    const size_t m = n < 64 ? n : 64;
    const int increasing = u8(r) < 200;
    int32_t at = 0;
    for (size_t j = 0; j < m; ++j) {
        v[j] = increasing ? at : (int32_t)(uint32_t)u64(r);
        at += u8(r) % 9;
    }
    if (i < POOL &&
        clEnqueueWriteBuffer(g_queue, g_pool[i], CL_TRUE, 0, m * 4, v, 0, NULL, NULL) != CL_SUCCESS)
        die("clEnqueueWriteBuffer");
    if (i < POOL)
        memcpy(g_pristine + (size_t)i * POOL_BYTES, v, m * 4);
    memcpy(g_host[h], v, m * 4);
    memcpy(g_host_pristine[h], v, m * 4);
}

/* ---- extents the header promises, for the host-pointer calls -------------- */

/* Bytes of a (n0, n1, n2, d) tensor laid out as l; UINT64_MAX on overflow. */
static uint64_t extent(const fcl_layout *l, uint64_t n0, uint64_t s0, uint64_t n1, uint64_t s1,
                       uint64_t n2, uint64_t s2, uint64_t d, uint64_t es)
{
    if (n0 == 0 || n1 == 0 || n2 == 0 || d == 0)
        return 0;
    uint64_t a = 0, b = 0, c = 0, e = 0;
    if (__builtin_mul_overflow(n0 - 1, s0, &a) || __builtin_mul_overflow(n1 - 1, s1, &b) ||
        __builtin_mul_overflow(n2 - 1, s2, &c) || __builtin_add_overflow(a, b, &e) ||
        __builtin_add_overflow(e, c, &e) || __builtin_add_overflow(e, l->offset, &e) ||
        __builtin_add_overflow(e, d, &e) || __builtin_mul_overflow(e, es, &e))
        return UINT64_MAX;
    return e;
}

static int fits(uint64_t bytes) { return bytes <= POOL_BYTES; }

/* Bytes per element the host arrays must allow for: the larger of the
 * input and output types (they differ for FP8; an unknown type counts 1). */
static uint64_t host_elem_bytes(fcl_dtype dtype, fcl_dtype out_dtype)
{
    const uint64_t a = fcl_dtype_size(dtype), b = fcl_dtype_size(out_dtype);
    return a > b ? a : b ? b : 1;
}

static uint64_t attn_tensor(const fcl_attention_desc *d, const fcl_layout *l, int kv)
{
    const uint64_t es = host_elem_bytes(d->dtype, d->out_dtype);
    const uint64_t h = kv ? d->heads_kv : d->heads_q;
    const uint64_t rows = d->varlen ? (kv ? d->total_k : d->total_q) : (kv ? d->seqlen_k : d->seqlen_q);
    const uint64_t b = d->varlen ? 1 : d->batch;
    return extent(l, b, l->stride_batch, h, l->stride_head, rows, l->stride_seq, d->head_dim, es);
}

static int attn_host_fits(const fcl_attention_desc *d)
{
    const fcl_layout *q[4] = {&d->q, &d->o, &d->dout, &d->dq};
    const fcl_layout *k[4] = {&d->k, &d->v, &d->dk, &d->dv};
    for (int i = 0; i < 4; ++i)
        if (!fits(attn_tensor(d, q[i], 0)) || !fits(attn_tensor(d, k[i], 1)))
            return 0;
    const uint64_t rows = d->varlen ? d->total_q : d->seqlen_q;
    const uint64_t b = d->varlen ? 1 : d->batch;
    uint64_t lse = 0;
    if (__builtin_mul_overflow(b * 1, d->heads_q, &lse) || __builtin_mul_overflow(lse, rows, &lse) ||
        __builtin_add_overflow(lse, d->lse_offset, &lse) || lse > POOL_BYTES / 4)
        return 0;
    /* aux arrays as the header sizes them */
    if (d->alibi != FCL_ALIBI_NONE && (d->batch > 64 || d->heads_q > 64 ||
                                       d->batch * d->heads_q * 4 > POOL_BYTES))
        return 0;
    if (d->varlen && d->batch + 1 > 64)
        return 0;
    if (d->block_m != 0 && d->block_n != 0) {
        if (d->seqlen_q > POOL_BYTES || d->seqlen_k > POOL_BYTES || d->batch > POOL_BYTES ||
            d->heads_q > POOL_BYTES || d->block_mask_stride_batch > POOL_BYTES ||
            d->block_mask_stride_head > POOL_BYTES)
            return 0;
        const uint64_t nbm = (d->seqlen_q + d->block_m - 1) / d->block_m;
        const uint64_t nbn = (d->seqlen_k + d->block_n - 1) / d->block_n;
        const uint64_t bytes = (d->batch - 1) * d->block_mask_stride_batch +
                               (d->heads_q - 1) * d->block_mask_stride_head + nbm * nbn;
        if (bytes > POOL_BYTES)
            return 0;
    }
    return 1;
}

static int kv_host_fits(const fcl_kvcache_desc *d)
{
    const uint64_t es = host_elem_bytes(d->dtype, d->out_dtype);
    const fcl_layout *l[2] = {&d->q, &d->o};
    for (int i = 0; i < 2; ++i)
        if (!fits(extent(l[i], d->batch, l[i]->stride_batch, d->seqlen_q, l[i]->stride_seq,
                         d->heads_q, l[i]->stride_head, d->head_dim, es)))
            return 0;
    const uint64_t cb = d->page_size ? d->num_pages : d->batch;
    const uint64_t cr = d->page_size ? d->page_size : d->cache_seqlen;
    const fcl_layout *c[2] = {&d->k_cache, &d->v_cache};
    for (int i = 0; i < 2; ++i)
        if (!fits(extent(c[i], cb, c[i]->stride_batch, cr, c[i]->stride_seq, d->heads_kv,
                         c[i]->stride_head, d->head_dim, es)))
            return 0;
    const fcl_layout *n[2] = {&d->k_new, &d->v_new};
    for (int i = 0; i < 2 && d->seqlen_new > 0; ++i)
        if (!fits(extent(n[i], d->batch, n[i]->stride_batch, d->seqlen_new, n[i]->stride_seq,
                         d->heads_kv, n[i]->stride_head, d->head_dim, es)))
            return 0;
    uint64_t lse = 0;
    if (__builtin_mul_overflow(d->batch * 1, d->heads_q, &lse) ||
        __builtin_mul_overflow(lse, d->seqlen_q, &lse) ||
        __builtin_add_overflow(lse, d->lse_offset, &lse) || lse > POOL_BYTES / 4)
        return 0;
    if (d->batch > 64)
        return 0; /* cache_seqlens: 64 entries are set from the input */
    if (d->page_size > 0) {
        uint64_t pt = 0;
        if (__builtin_mul_overflow(d->batch - 1, d->page_table_stride, &pt) ||
            __builtin_add_overflow(pt, d->max_pages_per_seq, &pt) || pt > 64)
            return 0;
    }
    if (d->alibi != FCL_ALIBI_NONE && d->batch * d->heads_q * 4 > POOL_BYTES)
        return 0;
    uint64_t rot = 0; /* the rotary tables, read from the slopes' floats */
    if (d->rotary_dim > 0 && (__builtin_mul_overflow(d->rotary_rows, d->rotary_dim / 2, &rot) ||
                              rot > POOL_BYTES / 4))
        return 0;
    return 1;
}

/* ---- the checks after a call ------------------------------------------------- */

/* Device buffers: unchanged after a failure; back to their bytes after a success. */
static void check_device(const char *call, fcl_status st)
{
    report(call, st);
    if (clFinish(g_queue) != CL_SUCCESS)
        die("clFinish");
    for (int i = 0; i < POOL; ++i) {
        unsigned char *want = g_pristine + (size_t)i * POOL_BYTES;
        if (st == FCL_OK) {
            if (clEnqueueWriteBuffer(g_queue, g_pool[i], CL_TRUE, 0, POOL_BYTES, want, 0, NULL,
                                     NULL) != CL_SUCCESS)
                die("clEnqueueWriteBuffer");
            continue;
        }
        if (clEnqueueReadBuffer(g_queue, g_pool[i], CL_TRUE, 0, POOL_BYTES, g_readback, 0, NULL,
                                NULL) != CL_SUCCESS)
            die("clEnqueueReadBuffer");
        if (memcmp(g_readback, want, POOL_BYTES) != 0) {
            fprintf(stderr, "status %d (%s) but device buffer %d changed\n", st,
                    fcl_status_string(st), i);
            abort();
        }
    }
}

static void check_host(const char *call, fcl_status st)
{
    report(call, st);
    for (int i = 0; i < HOST; ++i) {
        if (st != FCL_OK && memcmp(g_host[i], g_host_pristine[i], POOL_BYTES) != 0) {
            fprintf(stderr, "status %d (%s) but host array %d changed\n", st,
                    fcl_status_string(st), i);
            abort();
        }
        memcpy(g_host[i], g_host_pristine[i], POOL_BYTES);
    }
}

/* ---- the calls ------------------------------------------------------------------ */

static cl_mem pick(reader *r) { return g_pool[u8(r) % CHOICES]; }

static void decode_attention(reader *r, fcl_attention_desc *d, int *cu_q, int *cu_k)
{
    const size_t B = size_of(r), Hq = size_of(r), Hkv = size_of(r), Sq = size_of(r),
                 Sk = size_of(r), D = head_dim_of(r);
    const fcl_dtype dt = dtype_of(r);
    fcl_attention_desc_init(d, B, Hq, Hkv, Sq, Sk, D, dt, (fcl_layout_kind)(u8(r) & 1));
    const uint8_t flags = u8(r);
    if (flags & 1) {
        fcl_layout *l[8] = {&d->q, &d->k, &d->v, &d->o, &d->dout, &d->dq, &d->dk, &d->dv};
        for (int i = 0; i < 8; ++i)
            if (u8(r) & 1)
                layout_of(r, l[i]);
    }
    static const float scales[] = {0.0f, 0.125f, -1.0f, NAN, INFINITY};
    static const float caps[] = {0.0f, 0.0f, 30.0f, 0.5f, -1.0f, NAN, INFINITY};
    static const float drops[] = {0.0f, 0.0f, 0.25f, 0.999999f, 1.0f, -0.5f, NAN};
    static const int small[] = {0, 0, 1, 2, -1, 3, 1024, 1025, INT_MAX, INT_MIN};
    if (flags & 2)
        d->softmax_scale = value_of(r, scales, 5);
    if (flags & 4)
        d->causal = int_of(r, small, 4);
    if (flags & 8)
        d->lse_offset = size_of(r);
    if (flags & 16) {
        d->window_left = window_of(r);
        d->window_right = window_of(r);
    }
    if (flags & 32) {
        d->softcap = value_of(r, caps, 7);
        d->alibi = (fcl_alibi_mode)int_of(r, small, 6);
        d->dropout_p = value_of(r, drops, 7);
        d->dropout_seed = u64(r);
        d->dropout_offset = (uint32_t)u64(r);
        d->num_splits = int_of(r, small, 10);
    }
    if (flags & 64) {
        d->varlen = int_of(r, small, 5);
        d->total_q = size_of(r);
        d->total_k = size_of(r);
        *cu_q = 1;
        *cu_k = 1;
    }
    if (flags & 128) {
        d->block_m = size_of(r);
        d->block_n = size_of(r);
        d->block_mask_stride_batch = size_of(r);
        d->block_mask_stride_head = size_of(r);
    }
}

static void decode_kvcache(reader *r, fcl_kvcache_desc *d)
{
    const size_t B = size_of(r), Hq = size_of(r), Hkv = size_of(r), D = head_dim_of(r),
                 Sq = size_of(r), Snew = size_of(r);
    fcl_kvcache_desc_init(d, B, Hq, Hkv, D, Sq, Snew, dtype_of(r));
    const uint8_t flags = u8(r);
    if (flags & 1) {
        const size_t pages = size_of(r), page_size = size_of(r), per_seq = size_of(r);
        fcl_kvcache_desc_set_paged(d, pages, page_size, per_seq);
    } else
        fcl_kvcache_desc_set_contiguous(d, size_of(r));
    static const float caps[] = {0.0f, 0.0f, 30.0f, -1.0f, NAN};
    static const int small[] = {0, 0, 1, 2, -1, 3, 1024, 1025, INT_MAX};
    if (flags & 2) {
        fcl_layout *l[6] = {&d->q, &d->o, &d->k_cache, &d->v_cache, &d->k_new, &d->v_new};
        for (int i = 0; i < 6; ++i)
            if (u8(r) & 1)
                layout_of(r, l[i]);
    }
    if (flags & 4) {
        d->causal = int_of(r, small, 4);
        d->window_left = window_of(r);
        d->window_right = window_of(r);
        d->softcap = value_of(r, caps, 5);
        d->alibi = (fcl_alibi_mode)int_of(r, small, 6);
    }
    if (flags & 8) {
        d->page_table_stride = size_of(r);
        d->lse_offset = size_of(r);
        d->num_splits = int_of(r, small, 9);
    }
    if (flags & 16) {
        static const float scales[] = {0.0f, 0.125f, -1.0f, NAN, INFINITY};
        d->softmax_scale = value_of(r, scales, 5);
    }
    if (flags & 32) {
        d->rotary_dim = size_of(r);
        d->rotary_interleaved = int_of(r, small, 4);
        d->rotary_rows = size_of(r);
    }
}

static void call_attention(reader *r, int entry)
{
    fcl_attention_desc d;
    int cu_q = 0, cu_k = 0;
    decode_attention(r, &d, &cu_q, &cu_k);
    /* the aux arrays: cu_seqlens from the input, slopes and mask as filled */
    /* FP8's output type (ignored for other dtypes) and descales: any
     * buffer, often none */
    if (u8(r) & 1)
        d.out_dtype = dtype_of(r);
    int aux_buf[7];
    for (int i = 0; i < 7; ++i)
        aux_buf[i] = i < 4 || u8(r) < 64 ? u8(r) % CHOICES : CHOICES - 1;
    if (cu_q)
        int_array(r, aux_buf[1], H_AUX1, d.batch + 1 < 64 ? d.batch + 1 : 64);
    if (cu_k)
        int_array(r, aux_buf[2], H_AUX2, d.batch + 1 < 64 ? d.batch + 1 : 64);
    const fcl_attention_aux aux = {g_pool[aux_buf[0]], g_pool[aux_buf[1]], g_pool[aux_buf[2]],
                                   g_pool[aux_buf[3]], g_pool[aux_buf[4]], g_pool[aux_buf[5]],
                                   g_pool[aux_buf[6]], NULL, NULL};
    const int no_aux = u8(r) < 16;
    const cl_uint num_wait = u8(r) < 8; /* with a NULL list */
    cl_event ev = NULL;
    cl_event *want_ev = u8(r) & 1 ? &ev : NULL;
    fcl_status st = FCL_OK;
    switch (entry) {
    case 0: {
        cl_mem m[5];
        for (int i = 0; i < 5; ++i)
            m[i] = pick(r);
        st = fcl_attention_forward_ex(g_ctx, &d, no_aux ? NULL : &aux, m[0], m[1], m[2], m[3],
                                      m[4], num_wait, NULL, want_ev);
        break;
    }
    case 1: {
        cl_mem m[9];
        for (int i = 0; i < 9; ++i)
            m[i] = pick(r);
        st = fcl_attention_backward_ex(g_ctx, &d, no_aux ? NULL : &aux, m[0], m[1], m[2], m[3],
                                       m[4], m[5], m[6], m[7], m[8], num_wait, NULL, want_ev);
        break;
    }
    case 2:
    case 3: {
        if (!attn_host_fits(&d))
            return;
        /* descales and rotary tables, when chosen, read the slopes' floats */
        const float *f = (const float *)g_host[H_AUX0];
        const fcl_attention_aux_host ah = {f,
                                           (const int32_t *)g_host[H_AUX1],
                                           (const int32_t *)g_host[H_AUX2],
                                           g_host[H_AUX3],
                                           aux_buf[4] < POOL ? f : NULL,
                                           aux_buf[5] < POOL ? f : NULL,
                                           aux_buf[6] < POOL ? f : NULL, NULL, NULL};
        const uint8_t nulls = u8(r) < 16 ? u8(r) : 0;
        unsigned char *p[HOST];
        for (int i = 0; i < HOST; ++i)
            p[i] = (((nulls >> (i % 8)) & 1) && i < H_AUX0) ? NULL : g_host[i];
        if (entry == 2)
            st = fcl_attention_forward_host_ex(g_ctx, &d, no_aux ? NULL : &ah, p[H_Q], p[H_K],
                                               p[H_V], p[H_O], (float *)p[H_LSE]);
        else
            st = fcl_attention_backward_host_ex(g_ctx, &d, no_aux ? NULL : &ah, p[H_Q], p[H_K],
                                                p[H_V], p[H_O], (const float *)p[H_LSE],
                                                p[H_DOUT], p[H_DQ], p[H_DK], p[H_DV]);
        check_host(entry == 2 ? "forward_host" : "backward_host", st);
        return;
    }
    case 4: {
        fcl_plan plan;
        static const int kinds[] = {0, 1, 2, 3, 4, -1};
        report("plan_query", fcl_plan_query(g_ctx, &d, (fcl_kernel_kind)int_of(r, kinds, 6), &plan));
        return;
    }
    default: {
        /* the dropout mask, on a host array */
        uint64_t bytes = 0;
        if (__builtin_mul_overflow((uint64_t)d.batch, d.heads_q, &bytes) ||
            __builtin_mul_overflow(bytes, d.seqlen_q, &bytes) ||
            __builtin_mul_overflow(bytes, d.seqlen_k, &bytes) || bytes > POOL_BYTES)
            return;
        check_host("dropout_mask_host", fcl_dropout_mask_host(g_ctx, &d, g_host[H_O]));
        return;
    }
    }
    if (st == FCL_OK && ev != NULL)
        clReleaseEvent(ev);
    check_device(entry == 0 ? "forward" : "backward", st);
}

static void call_kvcache(reader *r, int entry)
{
    fcl_kvcache_desc d;
    decode_kvcache(r, &d);
    const int lens = u8(r) % CHOICES, pages = u8(r) % CHOICES;
    int_array(r, lens, H_AUX1, d.batch < 64 ? d.batch : 64);
    int_array(r, pages, H_AUX2, 64);
    if (entry == 0) {
        fcl_kvcache_buffers b;
        cl_mem *m[15] = {&b.q, &b.k_cache, &b.v_cache, &b.cache_seqlens, &b.page_table,
                         &b.k_new, &b.v_new, &b.alibi_slopes, &b.o, &b.lse,
                         &b.descale_q, &b.descale_k, &b.descale_v, &b.rotary_cos, &b.rotary_sin};
        for (int i = 0; i < 15; ++i) /* FP8 descales and rotary tables: often none */
            *m[i] = i < 10 || u8(r) < 64 ? pick(r) : NULL;
        b.cache_seqlens = g_pool[lens];
        b.page_table = g_pool[pages];
        const cl_uint num_wait = u8(r) < 8;
        cl_event ev = NULL;
        const fcl_status st = fcl_attention_kvcache(g_ctx, &d, &b, num_wait, NULL,
                                                    u8(r) & 1 ? &ev : NULL);
        if (st == FCL_OK && ev != NULL)
            clReleaseEvent(ev);
        check_device("kvcache", st);
    } else if (entry == 1) {
        if (!kv_host_fits(&d))
            return;
        /* descales and rotary tables, when chosen, read the slopes' floats */
        const float *f = (const float *)g_host[H_AUX0];
        const uint8_t scales = u8(r);
        fcl_kvcache_host a = {g_host[H_Q], g_host[H_K], g_host[H_V], (const int32_t *)g_host[H_AUX1],
                              (const int32_t *)g_host[H_AUX2], g_host[H_DQ], g_host[H_DK],
                              f, g_host[H_O], (float *)g_host[H_LSE],
                              scales & 1 ? f : NULL, scales & 2 ? f : NULL, scales & 4 ? f : NULL,
                              scales & 32 ? f : NULL, scales & 8 ? f : NULL, scales & 16 ? f : NULL};
        const uint8_t nulls = u8(r) < 16 ? u8(r) : 0;
        const void **p[10] = {&a.q, (const void **)&a.k_cache, (const void **)&a.v_cache,
                              (const void **)&a.cache_seqlens, (const void **)&a.page_table,
                              &a.k_new, &a.v_new, (const void **)&a.alibi_slopes,
                              (const void **)&a.o, (const void **)&a.lse};
        for (int i = 0; i < 10; ++i)
            if ((nulls >> (i % 8)) & 1)
                *p[i] = NULL;
        check_host("kvcache_host", fcl_attention_kvcache_host(g_ctx, &d, &a));
    } else {
        fcl_plan plan;
        report("kvcache_plan_query", fcl_kvcache_plan_query(g_ctx, &d, &plan));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    const uint8_t entry = u8(&r) % 9;
    if (entry < 6)
        call_attention(&r, entry);
    else
        call_kvcache(&r, entry - 6);
    return 0;
}
