/* test_kvcache - the KV-cache call against the float64 reference
 * (kvcache_support.h says how a case is built and checked: random caches
 * everywhere, shuffled pages, ragged lengths, appends, exact cache bytes
 * after the call, O and LSE by the tolerance rule, bitwise repeatability).
 * The cases cover 1, 4 and 16 query rows (and 70, chunked prefill), GQA 1,
 * 4 and 8, page sizes 1, 16, 48, 64 and 256, splits 1, 2, 7 and automatic,
 * every storage type, causal masks, windows, softcap and ALiBi, the
 * tensor-core pieces on emulated warp operations, and every emulated device
 * profile; a caller's out-of-order queue; the plan query; split-KV in the
 * forward call; attention sinks in all of these shapes; rotary position
 * embedding (both pair forms, checked against a float64 rotation, in both
 * calls and on the same range of shapes) and its bad inputs.  Then every bad
 * input: a status from the host call with nothing changed, and from the
 * cl_mem call NaN for the bad sequence alone (the device checks what it
 * cannot read back), the other sequences still right.
 */
#include "internal.h"
#include "kvcache_support.h"
#include "test_support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int lens3[] = {37, 0, 90};
static const int lens2[] = {100, 17};
static const int lens1[] = {200};

static void test_decode_shapes(void **state)
{
    (void)state;
    /* B Hq Hk d sq new dtype page cap lens causal window softcap alibi splits seed */
    const kv_case cases[] = {
        {3, 8, 2, 32, 1, 1, FCL_DTYPE_FP16, 0, 128, lens3, 1, -1, 0, 0, 0, 1},
        {3, 8, 2, 32, 1, 1, FCL_DTYPE_FP16, 16, 128, lens3, 1, -1, 0, 0, 2, 2},
        {3, 4, 4, 24, 4, 2, FCL_DTYPE_FP32, 48, 144, lens3, 1, -1, 0, 0, 7, 3},
        {2, 8, 1, 64, 4, 0, FCL_DTYPE_BF16, 1, 120, lens2, 0, -1, 0, 0, 1, 4},
        {2, 8, 1, 16, 16, 3, FCL_DTYPE_FP32, 256, 256, lens2, 1, -1, 0, 0, 0, 5},
        {1, 16, 2, 40, 16, 16, FCL_DTYPE_FP16, 0, 256, lens1, 1, -1, 0, 0, 7, 6},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        failures += !kv_run(fa_ctx, &cases[i]);
    assert_int_equal(failures, 0);
}

static void test_variants(void **state)
{
    (void)state;
    const kv_case cases[] = {
        /* window and softcap, paged; ALiBi with packed heads; chunked prefill */
        {3, 8, 2, 32, 4, 1, FCL_DTYPE_FP32, 16, 128, lens3, 1, 20, 0, 0, 2, 7},
        {2, 8, 2, 32, 1, 2, FCL_DTYPE_FP32, 0, 128, lens2, 0, -1, 5.0f, 1, 7, 8},
        {2, 4, 2, 16, 70, 70, FCL_DTYPE_FP16, 16, 192, lens2, 1, 33, 0, 1, 0, 9},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        failures += !kv_run(fa_ctx, &cases[i]);
    assert_int_equal(failures, 0);
}

/* A context of the default device planning the tensor-core pieces, with
 * their warp operations emulated. */
static fcl_context *emulated_tensor_core_context(void)
{
    fcl_context *ctx = test_context(NULL);
    assert_non_null(ctx);
    assert_int_equal(fcl_debug_emulate_tensor_cores(ctx, 1), FCL_OK);
    return ctx;
}

/* The tensor-core pieces (emulated warp operations) with packing, pages
 * (a tile across pages, with the pages read a tile ahead; whole tiles in a
 * page; one key per page) and splits. */
static void test_tensor_cores(void **state)
{
    (void)state;
    fcl_context *ctx = emulated_tensor_core_context();
    const kv_case cases[] = {
        {3, 8, 2, 16, 1, 1, FCL_DTYPE_FP16, 48, 144, lens3, 1, -1, 0, 0, 2, 10},
        {2, 4, 1, 32, 4, 1, FCL_DTYPE_BF16, 64, 128, lens2, 1, -1, 0, 1, 0, 11},
        {2, 8, 8, 16, 1, 0, FCL_DTYPE_FP16, 0, 128, lens2, 0, -1, 0, 0, 7, 12},
        {2, 8, 2, 16, 4, 2, FCL_DTYPE_BF16, 1, 128, lens2, 1, -1, 0, 0, 1, 13},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        failures += !kv_run(ctx, &cases[i]);
    fcl_plan plan;
    kv_state st;
    kv_init(&cases[0], &st);
    assert_int_equal(fcl_kvcache_plan_query(ctx, &st.desc, &plan), FCL_OK);
    assert_int_equal(plan.kernel, FCL_KERNEL_DECODE);
    assert_string_equal(plan.variant, "emulated-mma-sync");
    assert_int_equal(plan.pack, 4);
    assert_int_equal(plan.br, 16);
    assert_int_equal(plan.num_splits, 2);
    kv_free(&st);
    fcl_context_destroy(ctx);
    assert_int_equal(failures, 0);
}

/* A caller's out-of-order queue: the check, the attention and the merge
 * must then be chained by events, and split scratch guarded between calls. */
static void test_out_of_order_queue(void **state)
{
    (void)state;
    fcl_context *base = test_context(NULL);
    assert_non_null(base);
    cl_command_queue q = NULL;
    fcl_context *ctx = NULL;
    const int made = test_out_of_order_context(base, &q, &ctx);
    if (made <= 0)
        fcl_context_destroy(base);
    assert_true(made >= 0);
    if (made == 0)
        return;
    const kv_case cases[] = {
        {2, 8, 2, 32, 1, 2, FCL_DTYPE_FP32, 16, 128, lens2, 1, -1, 0, 0, 3, 20},
        {3, 8, 2, 32, 4, 0, FCL_DTYPE_FP16, 0, 128, lens3, 1, -1, 0, 0, 0, 21},
    };
    int failures = 0;
    const kv_rotary rot = {32, 1};
    for (int round = 0; round < 2; ++round) /* the second reuses the scratch */
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
            failures += !kv_run(ctx, &cases[i]);
            failures += !kv_run_rotary(ctx, &cases[i], &rot); /* rotated Q in the workspace */
        }
    fcl_context_destroy(ctx);
    clReleaseCommandQueue(q);
    fcl_context_destroy(base);
    assert_int_equal(failures, 0);
}

static void test_profiles(void **state)
{
    (void)state;
    const kv_case c = {3, 8, 2, 32, 4, 1, FCL_DTYPE_FP16, 16, 128, lens3, 1, -1, 0, 0, 0, 13};
    int failures = 0;
    for (size_t i = 0; i < fcl_profile_count(); ++i) {
        fcl_context *ctx = test_context(fcl_profile_name(i));
        assert_non_null(ctx);
        failures += !kv_run(ctx, &c);
        const kv_rotary rot = {24, (int)(i % 2)};
        failures += !kv_run_rotary(ctx, &c, &rot);
        fcl_context_destroy(ctx);
    }
    assert_int_equal(failures, 0);
}

/* V, v_new and O narrower than K (head_dim_v): DeepSeek's 192/128 and odd
 * widths, contiguous and paged (shuffled pages), ragged lengths, appends,
 * GQA packing, split-KV automatic and forced, every storage type. */
static void test_value_head_dim(void **state)
{
    (void)state;
    const kv_case cases[] = {
        {3, 8, 2, 192, 1, 2, FCL_DTYPE_FP16, 0, 120, lens3, 0, -1, 0, 0, 0, 41},
        {3, 8, 1, 192, 2, 1, FCL_DTYPE_BF16, 16, 128, lens3, 1, -1, 0, 0, 5, 42},
        {2, 4, 4, 40, 3, 3, FCL_DTYPE_FP32, 32, 160, lens2, 1, -1, 0, 0, 0, 43},
        {1, 2, 1, 64, 1, 0, FCL_DTYPE_FP32, 0, 256, lens1, 0, -1, 0, 0, 3, 44},
    };
    const size_t dv[] = {128, 128, 7, 48};
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        failures += !kv_run_value_dim(fa_ctx, &cases[i], dv[i]);
    assert_int_equal(failures, 0);
}

/* What the plan query says: packing, decode plans, splits forced and not. */
static void test_plan(void **state)
{
    (void)state;
    fcl_kvcache_desc d;
    fcl_kvcache_desc_init(&d, 1, 32, 8, 128, 1, 0, FCL_DTYPE_FP32);
    fcl_kvcache_desc_set_paged(&d, 4096, 16, 1024);
    fcl_plan p;
    assert_int_equal(fcl_kvcache_plan_query(fa_ctx, &d, &p), FCL_OK);
    assert_int_equal(p.kernel, FCL_KERNEL_DECODE);
    assert_int_equal(p.pack, 4);
    assert_true(p.br >= 4 && p.br <= 16);
    d.num_splits = 7;
    const fcl_status forced = fcl_kvcache_plan_query(fa_ctx, &d, &p);
    if (fa_ctx->loop_limit != 0 && forced == FCL_ERROR_DEVICE_LOOP_LIMIT) {
        /* llvmpipe: 2341 keys a chunk outrun its loop limit, and forced
         * chunks are not split further */
        print_message("7 forced splits: %s\n", fcl_status_string(forced));
    } else {
        assert_int_equal(forced, FCL_OK);
        assert_int_equal(p.num_splits, 7);
        assert_int_equal(p.split_keys % p.bc, 0);
        assert_true(p.split_keys * 7 >= 16384 && p.split_keys * 6 < 16384); /* the 7th is not empty */
    }
    /* many query rows: the forward's plan, no packing */
    fcl_kvcache_desc_init(&d, 1, 32, 8, 128, 512, 0, FCL_DTYPE_FP32);
    fcl_kvcache_desc_set_contiguous(&d, 4096);
    assert_int_equal(fcl_kvcache_plan_query(fa_ctx, &d, &p), FCL_OK);
    assert_int_equal(p.kernel, FCL_KERNEL_FORWARD);
    assert_int_equal(p.pack, 1);
}

/* The forward call gets packing and split-KV too: forced splits give the
 * same result as the reference, and are bitwise repeatable. */
static void test_forward_splits(void **state)
{
    (void)state;
    const fa_case cases[] = {
        {2, 8, 2, 3, 150, 32, FCL_DTYPE_FP16, 1, 0, FCL_LAYOUT_BSHD, 1, {0, 0, 0}, 21, NULL},
        {1, 4, 4, 70, 200, 16, FCL_DTYPE_FP32, 0, 0, FCL_LAYOUT_BHSD, 0, {0, 0, 0}, 22, NULL},
    };
    for (int splits = 0; splits <= 7; splits += 7) {
        for (size_t i = 0; i < 2; ++i) {
            fa_result r;
            fa_case c = cases[i];
            fa_variants v = fa_no_variants();
            v.num_splits = splits;
            c.var = &v;
            fcl_attention_desc probe;
            fcl_attention_desc_init(&probe, c.batch, c.heads_q, c.heads_kv, c.seqlen_q,
                                    c.seqlen_k, c.head_dim, c.dtype, c.layout);
            probe.num_splits = splits;
            fcl_plan p;
            assert_int_equal(fcl_plan_query(fa_ctx, &probe, FCL_KERNEL_FORWARD, &p), FCL_OK);
            if (splits == 7)
                assert_int_equal(p.num_splits, 7);
            assert_true(fa_check_forward(fa_ctx, &c, &r));
            assert_true(fa_check_backward(fa_ctx, &c, &r));
            assert_true(fa_check_deterministic(fa_ctx, &c, 0));
        }
    }
    /* many chunks: the merge's parts beyond one per work-item, and a
     * count that is not a multiple of four, columns in three blocks, the
     * last one partial */
    fa_case many = {1, 2, 2, 1, 8320, 72, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 23, NULL};
    fa_variants v = fa_no_variants();
    v.num_splits = 130;
    many.var = &v;
    fa_result r;
    assert_true(fa_check_forward(fa_ctx, &many, &r));
    assert_true(fa_check_deterministic(fa_ctx, &many, 0));
    /* the most chunks there are, and one more */
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 4, 4, 2, 3000, 16, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    fcl_plan p;
    d.num_splits = 1024;
    assert_int_equal(fcl_plan_query(fa_ctx, &d, FCL_KERNEL_FORWARD, &p), FCL_OK);
    assert_int_equal(p.num_splits, 1024);
    d.num_splits = 1025;
    assert_int_equal(fcl_plan_query(fa_ctx, &d, FCL_KERNEL_FORWARD, &p), FCL_ERROR_INVALID_VALUE);
    d.num_splits = -1;
    assert_int_equal(fcl_plan_query(fa_ctx, &d, FCL_KERNEL_FORWARD, &p), FCL_ERROR_INVALID_VALUE);
}

/* ---- K and V pages in one allocation ------------------------------------------ */

/* Floats fewer than heads_q in the sinks buffer run_on_buffers makes (to
 * check the size check). */
static size_t sinks_missing;

/* The cl_mem form on st's arrays (kv_run_on_buffers) on fa_ctx. */
static fcl_status run_on_buffers(kv_state *st)
{
    return kv_run_on_buffers(fa_ctx, st, sinks_missing);
}

/* FlashInfer's and vLLM's layout, [page][2][page_size][heads_kv][d]: K and V
 * of a page in one allocation.  Appended rows land in both, across pages,
 * in both forms; a layout whose K and V really share bytes is refused by
 * both.  (Before footprints were compared, the host form returned FCL_OK
 * with K's appended rows lost, and the cl_mem form refused the layout.) */
static void test_interleaved_pages(void **state)
{
    (void)state;
    /* the smallest case found: d 16, pages of 4, one appended row into an empty sequence */
    static const int len0[] = {0}, lens_edge[] = {3, 14, 0};
    const kv_case cases[] = {
        /* B Hq Hk d sq new dtype page cap lens causal window softcap alibi splits seed */
        {1, 1, 1, 16, 1, 1, FCL_DTYPE_FP32, 4, 8, len0, 0, -1, 0, 0, 0, 40},
        {3, 8, 2, 32, 2, 5, FCL_DTYPE_FP32, 4, 32, lens_edge, 1, -1, 0, 0, 0, 41},
        {3, 4, 4, 24, 1, 3, FCL_DTYPE_FP16, 16, 144, lens3, 1, -1, 0, 0, 2, 42},
        {2, 8, 2, 64, 4, 2, FCL_DTYPE_BF16, 0, 128, lens2, 1, -1, 0, 0, 0, 43},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        assert_true(kv_run_interleaved(fa_ctx, &cases[i]));
        kv_state st;
        kv_init_interleaved(&cases[i], &st);
        assert_int_equal(run_on_buffers(&st), FCL_OK);
        assert_memory_equal(st.kc, st.kc_expect, st.ncache * st.es);
        assert_true(kv_check_outputs(&cases[i], &st, "cl_mem, interleaved"));
        kv_free(&st);
    }
    /* V's rows moved half a row into K's: the same bytes, refused by both forms */
    kv_state st;
    kv_init_interleaved(&cases[1], &st);
    st.desc.v_cache.offset = st.desc.k_cache.offset + cases[1].head_dim / 2;
    unsigned char *before = malloc(st.ncache * st.es);
    memcpy(before, st.kc, st.ncache * st.es);
    fcl_kvcache_host a = kv_host_arrays(&st);
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st.desc, &a), FCL_ERROR_BUFFER_ALIASING);
    assert_memory_equal(st.kc, before, st.ncache * st.es);
    assert_int_equal(run_on_buffers(&st), FCL_ERROR_BUFFER_ALIASING);
    /* the last row of K's page and the first of V's page meet: refused */
    st.desc.v_cache.offset = st.desc.k_cache.offset + st.v_shift - cases[1].head_dim;
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st.desc, &a), FCL_ERROR_BUFFER_ALIASING);
    assert_int_equal(run_on_buffers(&st), FCL_ERROR_BUFFER_ALIASING);
    free(before);
    kv_free(&st);
}

/* ---- rotary position embedding ------------------------------------------------ */

static fcl_status run_on_buffers(kv_state *st);
static void expect_host_status(kv_state *st, fcl_status want);

/* Rotary on Q and the appended K rows against a float64 rotation, both
 * forms (interleaved, half-split), in both calls: contiguous and paged
 * caches (shuffled pages, appends across page boundaries), ragged lengths
 * (an empty sequence whose query rows lie before position 0), GQA,
 * split-KV, every storage type, causal and not (several non-causal query
 * rows: each at its own position), a window, rotary_dim < head_dim, no
 * appended rows (Q alone), the tensor-core pieces on emulated warp
 * operations and a caller's out-of-order queue. */
static void test_rotary(void **state)
{
    (void)state;
    static const int lens_cross[] = {3, 14, 0};
    const kv_case cases[] = {
        /* B Hq Hk d sq new dtype page cap lens causal window softcap alibi splits seed */
        {3, 8, 2, 32, 1, 1, FCL_DTYPE_FP16, 16, 128, lens3, 1, -1, 0, 0, 0, 60},
        {3, 8, 2, 32, 4, 5, FCL_DTYPE_FP32, 4, 32, lens_cross, 1, -1, 0, 0, 0, 61},
        {3, 4, 4, 24, 4, 2, FCL_DTYPE_BF16, 0, 144, lens3, 0, -1, 0, 0, 3, 62},
        {2, 8, 1, 64, 1, 0, FCL_DTYPE_FP16, 48, 144, lens2, 1, -1, 0, 0, 2, 63},
        {2, 4, 2, 16, 6, 6, FCL_DTYPE_FP32, 16, 192, lens2, 1, 33, 0, 1, 0, 64},
        {1, 16, 2, 40, 16, 16, FCL_DTYPE_BF16, 0, 256, lens1, 0, -1, 0, 0, 7, 65},
    };
    /* rotary_dim: all of head_dim, or part of it */
    const size_t dims[] = {32, 8, 24, 64, 10, 40};
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        for (int inter = 0; inter <= 1; ++inter) {
            const kv_rotary rot = {dims[i], inter};
            failures += !kv_run_rotary(fa_ctx, &cases[i], &rot);
            kv_state st;
            kv_init_rotary(&cases[i], &rot, &st);
            const fcl_status s = run_on_buffers(&st);
            if (s != FCL_OK || !kv_adopt_rotation(fa_ctx, &st) ||
                memcmp(st.kc, st.kc_expect, st.ncache * st.es) != 0 ||
                memcmp(st.vc, st.vc_expect, st.ncache * st.es) != 0 ||
                !kv_check_outputs(&cases[i], &st, "cl_mem, rotary")) {
                printf("rotary case %zu interleaved %d: cl_mem form failed (%s)\n", i, inter,
                       fcl_status_string(s));
                ++failures;
            }
            kv_free(&st);
        }
    fcl_context *tc = emulated_tensor_core_context();
    const kv_case tc_cases[] = {
        {3, 8, 2, 16, 1, 1, FCL_DTYPE_FP16, 48, 144, lens3, 1, -1, 0, 0, 2, 66},
        {2, 8, 2, 32, 4, 2, FCL_DTYPE_BF16, 16, 128, lens2, 0, -1, 0, 0, 0, 67},
    };
    for (size_t i = 0; i < sizeof tc_cases / sizeof tc_cases[0]; ++i) {
        const kv_rotary rot = {i == 0 ? 16 : 20, (int)i};
        failures += !kv_run_rotary(tc, &tc_cases[i], &rot);
    }
    fcl_context_destroy(tc);
    assert_int_equal(failures, 0);
}

/* Rotary's bad inputs: statuses from the one descriptor check (plan query,
 * host and cl_mem forms alike) and the buffer checks, nothing read or
 * written by a refused host call (its tables poisoned). */
static void test_rotary_bad_inputs(void **state)
{
    (void)state;
    const kv_case c = {2, 8, 2, 32, 1, 1, FCL_DTYPE_FP16, 16, 128, lens2, 1, -1, 0, 0, 0, 68};
    const kv_rotary rot = {16, 0};
    kv_state st;
    kv_init_rotary(&c, &rot, &st);
    const fcl_kvcache_desc good = st.desc;
    static const struct {
        size_t dim, rows;
        int interleaved;
        fcl_dtype dtype;
        fcl_status want;
    } cases[] = {
        {15, 133, 0, FCL_DTYPE_FP16, FCL_ERROR_INVALID_VALUE},   /* odd */
        {34, 133, 0, FCL_DTYPE_FP16, FCL_ERROR_INVALID_VALUE},   /* > head_dim */
        {16, 127, 0, FCL_DTYPE_FP16, FCL_ERROR_INVALID_VALUE},   /* rows < capacity 128 */
        {16, ((size_t)1 << 30) + 1, 0, FCL_DTYPE_FP16, FCL_ERROR_INVALID_VALUE},
        {16, 133, 2, FCL_DTYPE_FP16, FCL_ERROR_INVALID_VALUE},   /* interleaved 2 */
        {0, 0, -1, FCL_DTYPE_FP16, FCL_ERROR_INVALID_VALUE},     /* ... also when off */
        {16, 133, 0, FCL_DTYPE_FP8_E4M3, FCL_ERROR_DTYPE_UNSUPPORTED},
    };
    const size_t table_floats = st.rot_floats;
    FCL_POISON(st.rot_cos, table_floats * sizeof(float));
    FCL_POISON(st.rot_sin, table_floats * sizeof(float));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        st.desc = good;
        st.desc.rotary_dim = cases[i].dim;
        st.desc.rotary_rows = cases[i].rows;
        st.desc.rotary_interleaved = cases[i].interleaved;
        st.desc.dtype = cases[i].dtype;
        fcl_plan plan;
        assert_int_equal(fcl_kvcache_plan_query(fa_ctx, &st.desc, &plan), cases[i].want);
        if (cases[i].dim > 0) /* tables given when rotary is off are refused too */
            expect_host_status(&st, cases[i].want);
    }
    FCL_UNPOISON(st.rot_cos, table_floats * sizeof(float));
    FCL_UNPOISON(st.rot_sin, table_floats * sizeof(float));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        if (cases[i].dtype != FCL_DTYPE_FP16 || cases[i].dim == 0)
            continue; /* run_on_buffers sizes its buffers for fp16 */
        st.desc = good;
        st.desc.rotary_dim = cases[i].dim;
        st.desc.rotary_rows = cases[i].rows;
        st.desc.rotary_interleaved = cases[i].interleaved;
        assert_int_equal(run_on_buffers(&st), cases[i].want);
    }
    st.desc = good;
    /* tables missing, given without rotary, or meeting an output */
    fcl_kvcache_host a = kv_host_arrays(&st);
    a.rotary_sin = NULL;
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st.desc, &a), FCL_ERROR_NULL_ARGUMENT);
    st.desc.rotary_dim = 0;
    expect_host_status(&st, FCL_ERROR_INVALID_VALUE);
    st.desc = good;
    a = kv_host_arrays(&st);
    a.rotary_cos = (const float *)st.o;
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st.desc, &a), FCL_ERROR_BUFFER_ALIASING);

    /* the cl_mem form: a table too small, or an output */
    cl_context clx = fcl_context_cl_context(fa_ctx);
    cl_int err = CL_SUCCESS;
    const size_t cache_bytes = st.ncache * st.es, table_bytes = table_floats * sizeof(float);
#define BUF(ptr, bytes) clCreateBuffer(clx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, (bytes), (ptr), &err)
    fcl_kvcache_buffers b = {
        .q = BUF(st.q, st.nq * st.es),
        .k_cache = BUF(st.kc, cache_bytes),
        .v_cache = BUF(st.vc, cache_bytes),
        .cache_seqlens = BUF(st.lens, c.batch * sizeof(int32_t)),
        .page_table = BUF(st.pages, c.batch * st.desc.page_table_stride * sizeof(int32_t)),
        .k_new = BUF(st.kn, st.nnew * st.es),
        .v_new = BUF(st.vn, st.nnew * st.es),
        .o = BUF(st.o, st.nq * st.es),
        .rotary_cos = BUF(st.rot_cos, table_bytes),
        .rotary_sin = BUF(st.rot_sin, table_bytes - 4)};
#undef BUF
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &b, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_TOO_SMALL);
    fcl_kvcache_buffers bad = b;
    bad.rotary_sin = b.rotary_cos;
    bad.o = b.rotary_cos; /* large enough for O: refused for meeting a table */
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &bad, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    bad.o = b.o;
    bad.rotary_cos = NULL;
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &bad, 0, NULL, NULL),
                     FCL_ERROR_NULL_ARGUMENT);
    st.desc.rotary_dim = 0;
    bad.rotary_cos = b.rotary_cos;
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &bad, 0, NULL, NULL),
                     FCL_ERROR_INVALID_VALUE);
    cl_mem all[] = {b.q, b.k_cache, b.v_cache, b.cache_seqlens, b.page_table,
                    b.k_new, b.v_new, b.o, b.rotary_cos, b.rotary_sin};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        clReleaseMemObject(all[i]);
    kv_free(&st);
}

/* ---- one validation path ------------------------------------------------------ */

static void expect_host_status(kv_state *st, fcl_status want);

/* Every descriptor field's invalid values: the plan query, the host form
 * and the cl_mem form return the same status (the query once said FCL_OK
 * for alibi = 7); and a refused host call reads no array it was refused
 * for (poisoned: AddressSanitizer reports a read; it once read descale_q
 * with an fp16 dtype, and the slopes with an invalid ALiBi mode). */
static void test_one_validation_path(void **state)
{
    (void)state;
    const kv_case c = {2, 8, 2, 32, 1, 1, FCL_DTYPE_FP16, 16, 128, lens2, 1, -1, 0, 0, 0, 44};
    enum { F_ALIBI, F_WL, F_WR, F_SOFTCAP, F_SPLITS, F_DTYPE, F_OUT, F_PAGE, F_HEADS, F_SQ,
           F_SCALE, F_CAUSAL, F_STRIDE, F_NEW, F_SINKS };
    static const struct {
        int field;
        double value;
        fcl_status want;
    } cases[] = {
        {F_ALIBI, 7, FCL_ERROR_INVALID_VALUE},       {F_ALIBI, -1, FCL_ERROR_INVALID_VALUE},
        {F_WL, -2, FCL_ERROR_INVALID_VALUE},         {F_WR, -3, FCL_ERROR_INVALID_VALUE},
        {F_SOFTCAP, -1, FCL_ERROR_INVALID_VALUE},    {F_SOFTCAP, NAN, FCL_ERROR_INVALID_VALUE},
        {F_SPLITS, 1025, FCL_ERROR_INVALID_VALUE},   {F_SPLITS, -1, FCL_ERROR_INVALID_VALUE},
        {F_DTYPE, 9, FCL_ERROR_DTYPE_UNSUPPORTED},   {F_OUT, 3, FCL_ERROR_DTYPE_UNSUPPORTED},
        {F_PAGE, 1025, FCL_ERROR_INVALID_VALUE},     {F_HEADS, 3, FCL_ERROR_HEADS_NOT_DIVISIBLE},
        {F_SQ, 0, FCL_ERROR_INVALID_SHAPE},          {F_SCALE, INFINITY, FCL_ERROR_INVALID_VALUE},
        {F_CAUSAL, 2, FCL_ERROR_INVALID_VALUE},      {F_STRIDE, 3, FCL_ERROR_INVALID_SHAPE},
        {F_NEW, 129, FCL_ERROR_INVALID_SHAPE},       {F_SINKS, 2, FCL_ERROR_INVALID_VALUE},
    };
    kv_state st;
    kv_init(&c, &st);
    const fcl_kvcache_desc good = st.desc;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        fcl_kvcache_desc *d = &st.desc;
        *d = good;
        const double x = cases[i].value;
        switch (cases[i].field) {
        case F_ALIBI: d->alibi = (fcl_alibi_mode)(int)x; break;
        case F_WL: d->window_left = (int64_t)x; break;
        case F_WR: d->window_right = (int64_t)x; break;
        case F_SOFTCAP: d->softcap = (float)x; break;
        case F_SPLITS: d->num_splits = (int)x; break;
        case F_DTYPE: d->dtype = (fcl_dtype)(int)x; break;
        case F_OUT: d->dtype = FCL_DTYPE_FP8_E5M2, d->out_dtype = (fcl_dtype)(int)x; break;
        case F_PAGE: d->page_size = (size_t)x; break;
        case F_HEADS: d->heads_kv = (size_t)x; break;
        case F_SQ: d->seqlen_q = (size_t)x; break;
        case F_SCALE: d->softmax_scale = (float)x; break;
        case F_CAUSAL: d->causal = (int)x; break;
        case F_STRIDE: d->page_table_stride = (size_t)x; break;
        case F_NEW: d->seqlen_new = (size_t)x; break;
        case F_SINKS: d->sinks = (int)x; break;
        }
        fcl_plan plan;
        assert_int_equal(fcl_kvcache_plan_query(fa_ctx, d, &plan), cases[i].want);
        expect_host_status(&st, cases[i].want);
        assert_int_equal(run_on_buffers(&st), cases[i].want);
    }
    st.desc = good;
    /* poisoned arrays a refused call must not read */
    const size_t n = c.batch * c.heads_q;
    float *poisoned = malloc(n * sizeof *poisoned);
    for (size_t i = 0; i < n; ++i)
        poisoned[i] = 1.0f;
    FCL_POISON(poisoned, n * sizeof *poisoned);
    fcl_kvcache_host a = kv_host_arrays(&st);
    a.descale_q = poisoned; /* fp16: no descales */
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st.desc, &a), FCL_ERROR_INVALID_VALUE);
    a = kv_host_arrays(&st);
    a.alibi_slopes = poisoned;
    st.desc.alibi = (fcl_alibi_mode)7;
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st.desc, &a), FCL_ERROR_INVALID_VALUE);
    st.desc = good;
    st.desc.alibi = FCL_ALIBI_PER_HEAD; /* slopes wanted, none given */
    a = kv_host_arrays(&st);
    a.alibi_slopes = NULL;
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st.desc, &a), FCL_ERROR_NULL_ARGUMENT);
    FCL_UNPOISON(poisoned, n * sizeof *poisoned);
    free(poisoned);
    kv_free(&st);
}

/* ---- bad inputs ------------------------------------------------------------ */

static void expect_host_status(kv_state *st, fcl_status want)
{
    const size_t cache_bytes = st->ncache * st->es;
    unsigned char *kc0 = malloc(cache_bytes), *o0 = malloc(st->nq * st->es);
    memcpy(kc0, st->kc, cache_bytes);
    memcpy(o0, st->o, st->nq * st->es);
    fcl_kvcache_host a = kv_host_arrays(st);
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st->desc, &a), want);
    assert_memory_equal(st->kc, kc0, cache_bytes);
    assert_memory_equal(st->o, o0, st->nq * st->es);
    free(kc0);
    free(o0);
}

static void test_bad_inputs(void **state)
{
    (void)state;
    int lens[3] = {37, 0, 90};
    const kv_case c = {3, 8, 2, 32, 1, 1, FCL_DTYPE_FP16, 16, 128, lens, 1, -1, 0, 0, 0, 14};
    kv_state st;
    kv_init(&c, &st);
    st.lens[1] = -1; /* negative length */
    expect_host_status(&st, FCL_ERROR_INVALID_CACHE_SEQLENS);
    st.lens[1] = 128; /* full: the append does not fit */
    expect_host_status(&st, FCL_ERROR_INVALID_CACHE_SEQLENS);
    st.lens[1] = 0;
    const int32_t saved = st.pages[2 * st.desc.page_table_stride + 5];
    st.pages[2 * st.desc.page_table_stride + 5] = (int32_t)st.npages; /* outside the cache */
    expect_host_status(&st, FCL_ERROR_INVALID_PAGE_TABLE);
    st.pages[2 * st.desc.page_table_stride + 5] = -1;
    expect_host_status(&st, FCL_ERROR_INVALID_PAGE_TABLE);
    st.pages[2 * st.desc.page_table_stride + 5] = saved;
    /* entries past the pages a sequence uses are never read */
    st.pages[0 * st.desc.page_table_stride + 7] = 1 << 30;

    fcl_kvcache_desc good = st.desc;
    struct {
        size_t *field;
        size_t value;
        fcl_status want;
    } sizes[] = {
        {&st.desc.batch, 0, FCL_ERROR_INVALID_SHAPE},
        {&st.desc.seqlen_q, 0, FCL_ERROR_INVALID_SHAPE},
        {&st.desc.head_dim, 0, FCL_ERROR_INVALID_SHAPE},
        {&st.desc.page_size, 1025, FCL_ERROR_INVALID_VALUE},
        {&st.desc.num_pages, 0, FCL_ERROR_INVALID_SHAPE},
        {&st.desc.max_pages_per_seq, 0, FCL_ERROR_INVALID_SHAPE},
        {&st.desc.page_table_stride, 3, FCL_ERROR_INVALID_SHAPE},
        {&st.desc.seqlen_new, 129, FCL_ERROR_INVALID_SHAPE},
        {&st.desc.heads_kv, 3, FCL_ERROR_HEADS_NOT_DIVISIBLE},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
        *sizes[i].field = sizes[i].value;
        expect_host_status(&st, sizes[i].want);
        st.desc = good;
    }
    st.desc.num_splits = 1025;
    expect_host_status(&st, FCL_ERROR_INVALID_VALUE);
    st.desc.num_splits = -1;
    expect_host_status(&st, FCL_ERROR_INVALID_VALUE);
    st.desc = good;
    st.desc.window_left = -2;
    expect_host_status(&st, FCL_ERROR_INVALID_VALUE);
    st.desc = good;
    st.desc.dtype = (fcl_dtype)7;
    expect_host_status(&st, FCL_ERROR_DTYPE_UNSUPPORTED);
    st.desc = good;
    st.desc.k_cache.stride_seq = 1; /* rows overlap */
    expect_host_status(&st, FCL_ERROR_OVERLAPPING_STRIDES);
    st.desc = good;
    fcl_kvcache_host a = kv_host_arrays(&st);
    a.page_table = NULL;
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st.desc, &a), FCL_ERROR_NULL_ARGUMENT);
    a = kv_host_arrays(&st);
    a.k_new = NULL;
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st.desc, &a), FCL_ERROR_NULL_ARGUMENT);
    assert_int_equal(fcl_attention_kvcache_host(NULL, &st.desc, &a), FCL_ERROR_NULL_ARGUMENT);
    kv_free(&st);
}

/* Attention sinks: contiguous and paged caches, GQA packing, split-KV
 * forced and automatic, causal masks, windows, softcap and ALiBi, appends or
 * none (an empty sequence: O = 0, LSE = its sink), several query rows; the
 * cl_mem form too; and their bad inputs, one status each with nothing
 * changed. */
static void test_sinks(void **state)
{
    (void)state;
    const kv_case cases[] = {
        {3, 8, 2, 32, 1, 1, FCL_DTYPE_FP16, 0, 128, lens3, 1, -1, 0, 0, 0, 60},
        {3, 8, 2, 32, 1, 0, FCL_DTYPE_FP32, 16, 128, lens3, 1, -1, 0, 0, 3, 61},
        {2, 4, 4, 24, 4, 2, FCL_DTYPE_FP32, 48, 144, lens2, 1, 33, 0, 0, 7, 62},
        {2, 8, 1, 64, 16, 3, FCL_DTYPE_BF16, 64, 256, lens2, 1, -1, 5.0f, 1, 0, 63},
        {1, 16, 2, 40, 16, 16, FCL_DTYPE_FP16, 0, 256, lens1, 1, -1, 0, 0, 2, 64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        assert_true(kv_run_sinks(fa_ctx, &cases[i]));
    kv_state st;
    kv_init_sinks(&cases[1], &st);
    assert_int_equal(run_on_buffers(&st), FCL_OK);
    assert_true(kv_check_outputs(&cases[1], &st, "buffers"));
    /* bad inputs */
    sinks_missing = 1;
    assert_int_equal(run_on_buffers(&st), FCL_ERROR_BUFFER_TOO_SMALL);
    sinks_missing = 0;
    float *sinks = st.sinks;
    st.sinks = NULL;
    expect_host_status(&st, FCL_ERROR_NULL_ARGUMENT);
    assert_int_equal(run_on_buffers(&st), FCL_ERROR_NULL_ARGUMENT);
    st.sinks = sinks;
    st.desc.sinks = 0;
    expect_host_status(&st, FCL_ERROR_INVALID_VALUE);
    assert_int_equal(run_on_buffers(&st), FCL_ERROR_INVALID_VALUE);
    st.desc.sinks = 1;
    fcl_kvcache_host a = kv_host_arrays(&st);
    a.sinks = (const float *)st.o; /* O over the sinks */
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st.desc, &a), FCL_ERROR_BUFFER_ALIASING);
    kv_free(&st);
    /* the tensor-core pieces (emulated warp operations) */
    fcl_context *ctx = test_context(NULL);
    assert_non_null(ctx);
    assert_int_equal(fcl_debug_emulate_tensor_cores(ctx, 1), FCL_OK);
    const int ok = kv_run_sinks(ctx, &cases[0]) && kv_run_sinks(ctx, &cases[4]);
    fcl_context_destroy(ctx);
    assert_true(ok);
}

/* Without appended rows the forward alone checks each sequence, chunk by
 * chunk: a negative length, and a bad page in one chunk (not the first). */
static void test_device_checks_no_append(void **state)
{
    (void)state;
    int lens[3] = {37, 50, 120};
    const kv_case c = {3, 8, 2, 32, 1, 0, FCL_DTYPE_FP32, 16, 128, lens, 1, -1, 0, 0, 3, 16};
    kv_state st;
    kv_init(&c, &st);
    cl_context clx = fcl_context_cl_context(fa_ctx);
    cl_command_queue queue = fcl_context_cl_queue(fa_ctx);
    cl_int err = CL_SUCCESS;
    const size_t cache_bytes = st.ncache * st.es;
    const size_t table_bytes = c.batch * st.desc.page_table_stride * sizeof(int32_t);
    int32_t bad_lens[3] = {37, -1, 120};
    st.pages[2 * st.desc.page_table_stride + 6] = -2; /* keys 96..111: not the first chunk */
    cl_mem mem[8];
    const void *src[8] = {st.q, st.kc, st.vc, bad_lens, st.pages, st.o, st.lse, NULL};
    const size_t bytes[8] = {st.nq * st.es, cache_bytes, cache_bytes, sizeof bad_lens,
                             table_bytes, st.nq * st.es, c.batch * c.heads_q * sizeof(float), 0};
    for (int i = 0; i < 7; ++i)
        mem[i] = clCreateBuffer(clx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes[i],
                                (void *)src[i], &err);
    assert_int_equal(err, CL_SUCCESS);
    const fcl_kvcache_buffers b = {.q = mem[0],
                                   .k_cache = mem[1],
                                   .v_cache = mem[2],
                                   .cache_seqlens = mem[3],
                                   .page_table = mem[4],
                                   .o = mem[5],
                                   .lse = mem[6]};
    fcl_plan plan;
    assert_int_equal(fcl_kvcache_plan_query(fa_ctx, &st.desc, &plan), FCL_OK);
    assert_int_equal(plan.num_splits, 3);
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &b, 0, NULL, NULL), FCL_OK);
    assert_int_equal(clEnqueueReadBuffer(queue, b.o, CL_TRUE, 0, bytes[5], st.o, 0, NULL, NULL),
                     CL_SUCCESS);
    assert_int_equal(clEnqueueReadBuffer(queue, b.lse, CL_TRUE, 0, bytes[6], st.lse, 0, NULL,
                                         NULL),
                     CL_SUCCESS);
    const size_t row = c.heads_q * c.head_dim;
    for (size_t x = row; x < 3 * row; ++x) /* sequences 1 and 2 */
        assert_true(isnan(kv_get(st.o + x * st.es, c.dtype)));
    for (size_t h = c.heads_q; h < 3 * c.heads_q; ++h)
        assert_true(isnan(st.lse[h]));
    const kv_case first = {1, 8, 2, 32, 1, 0, FCL_DTYPE_FP32, 16, 128, lens, 1, -1, 0, 0, 3, 16};
    assert_true(kv_check_outputs(&first, &st, "device, good sequence"));
    for (int i = 0; i < 7; ++i)
        clReleaseMemObject(mem[i]);
    kv_free(&st);
}

/* The cl_mem call: buffers too small or aliased are statuses; a bad page
 * or length, which it does not read back, gives NaN for that sequence
 * alone, leaves its cache as it was, and the others right. */
static void test_device_checks(void **state)
{
    (void)state;
    int lens[3] = {37, 0, 90};
    const kv_case c = {3, 8, 2, 32, 1, 1, FCL_DTYPE_FP32, 16, 128, lens, 1, -1, 0, 0, 2, 15};
    kv_state st;
    kv_init(&c, &st);
    cl_context clx = fcl_context_cl_context(fa_ctx);
    cl_command_queue queue = fcl_context_cl_queue(fa_ctx);
    cl_int err = CL_SUCCESS;
#define BUF(ptr, bytes) clCreateBuffer(clx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, (bytes), (ptr), &err)
    const size_t cache_bytes = st.ncache * st.es;
    const size_t table_bytes = c.batch * st.desc.page_table_stride * sizeof(int32_t);
    st.pages[2 * st.desc.page_table_stride + 3] = 1 << 20; /* sequence 2 uses a page outside */
    fcl_kvcache_buffers b = {.q = BUF(st.q, st.nq * st.es),
                             .k_cache = BUF(st.kc, cache_bytes),
                             .v_cache = BUF(st.vc, cache_bytes),
                             .cache_seqlens = BUF(st.lens, c.batch * sizeof(int32_t)),
                             .page_table = BUF(st.pages, table_bytes),
                             .k_new = BUF(st.kn, st.nnew * st.es),
                             .v_new = BUF(st.vn, st.nnew * st.es),
                             .o = BUF(st.o, st.nq * st.es),
                             .lse = BUF(st.lse, c.batch * c.heads_q * sizeof(float))};
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &b, 0, NULL, NULL), FCL_OK);
    assert_int_equal(clFinish(queue), CL_SUCCESS);
    assert_int_equal(clEnqueueReadBuffer(queue, b.o, CL_TRUE, 0, st.nq * st.es, st.o, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(clEnqueueReadBuffer(queue, b.lse, CL_TRUE, 0, c.batch * c.heads_q * sizeof(float), st.lse, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(clEnqueueReadBuffer(queue, b.k_cache, CL_TRUE, 0, cache_bytes, st.kc, 0, NULL, NULL), CL_SUCCESS);
    /* sequence 2: NaN everywhere */
    const size_t row = c.heads_q * c.head_dim;
    for (size_t x = 2 * row; x < 3 * row; ++x)
        assert_true(isnan(kv_get(st.o + x * st.es, c.dtype)));
    for (size_t h = 0; h < c.heads_q; ++h)
        assert_true(isnan(st.lse[2 * c.heads_q + h]));
    /* ... and no append: the slot of its new row holds what it held */
    kv_state fresh;
    kv_init(&c, &fresh);
    for (size_t hk = 0; hk < c.heads_kv; ++hk) {
        const size_t e = kv_cache_at(&fresh, 2, (size_t)lens[2], hk) * st.es;
        assert_memory_equal(st.kc + e, fresh.kc + e, c.head_dim * st.es);
    }
    kv_free(&fresh);
    /* sequences 0 and 1 are right: compare them alone */
    const kv_case first_two = {2, 8, 2, 32, 1, 1, FCL_DTYPE_FP32, 16, 128, lens, 1, -1, 0, 0, 2, 15};
    assert_true(kv_check_outputs(&first_two, &st, "device, good sequences"));

    /* statuses before anything is enqueued */
    fcl_kvcache_buffers bad = b;
    bad.o = b.k_cache; /* output aliasing the cache */
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &bad, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    /* the device reads the table and the lengths again after checking
     * them: with either inside a cache it appends to, an append could
     * change a checked page index before it is used (found by the fuzzer:
     * a write outside the cache) */
    bad = b;
    bad.page_table = b.k_cache;
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &bad, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    bad = b;
    bad.cache_seqlens = b.v_cache;
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &bad, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    bad = b;
    bad.page_table = b.o;
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &bad, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    bad = b;
    bad.page_table = b.cache_seqlens; /* 12 bytes for a 3-row table */
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &bad, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_TOO_SMALL);
    bad = b;
    bad.cache_seqlens = NULL;
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &bad, 0, NULL, NULL),
                     FCL_ERROR_NULL_ARGUMENT);
    bad = b;
    bad.k_cache = b.q; /* too small for the cache */
    assert_int_equal(fcl_attention_kvcache(fa_ctx, &st.desc, &bad, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_TOO_SMALL);
    cl_mem all[] = {b.q, b.k_cache, b.v_cache, b.cache_seqlens, b.page_table, b.k_new, b.v_new, b.o, b.lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        clReleaseMemObject(all[i]);
#undef BUF
    kv_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_shapes), cmocka_unit_test(test_variants),
        cmocka_unit_test(test_tensor_cores),  cmocka_unit_test(test_profiles),
        cmocka_unit_test(test_plan),          cmocka_unit_test(test_forward_splits),
        cmocka_unit_test(test_value_head_dim),
        cmocka_unit_test(test_bad_inputs),    cmocka_unit_test(test_device_checks),
        cmocka_unit_test(test_device_checks_no_append),
        cmocka_unit_test(test_out_of_order_queue), cmocka_unit_test(test_interleaved_pages),
        cmocka_unit_test(test_one_validation_path),
        cmocka_unit_test(test_sinks),
        cmocka_unit_test(test_rotary),
        cmocka_unit_test(test_rotary_bad_inputs),
    };
    return cmocka_run_group_tests(tests, fa_group_setup, fa_group_teardown);
}
