/* test_api.c - the library around the kernels: versions and status strings,
 * device listing and selection (FLASHCL_DEVICE), wrapping a caller's OpenCL
 * objects, host-pointer calls, plan queries, device memory accounting (no
 * N x N buffer, ever), and the on-disk program cache. */
#define _POSIX_C_SOURCE 200809L /* setenv, mkdtemp, strdup */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "internal.h"
#include "reference.h"
#include "test_support.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_version_and_strings(void **state)
{
    (void)state;
    assert_int_equal(fcl_version_number(), FCL_VERSION_NUMBER);
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", FCL_VERSION_MAJOR, FCL_VERSION_MINOR, FCL_VERSION_PATCH);
    assert_string_equal(fcl_version_string(), v);
    assert_string_equal(fcl_status_string(FCL_OK), "success");
    assert_string_equal(fcl_status_string(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
    assert_string_equal(fcl_status_string(-9999), "unknown OpenCL error");
    assert_string_equal(fcl_status_string(9999), "unknown status");
    for (int s = 1; s < FCL_STATUS_COUNT_; ++s) /* every code has its own text */
        assert_string_not_equal(fcl_status_string(s), "unknown status");
    assert_int_equal(fcl_dtype_size(FCL_DTYPE_BF16), 2);
    assert_string_equal(fcl_dtype_name(FCL_DTYPE_FP16), "fp16");
    fcl_context_destroy(NULL); /* a no-op */
}

static void test_device_listing_and_selection(void **state)
{
    (void)state;
    size_t n = 0;
    assert_int_equal(fcl_list_devices(NULL, 0, &n), FCL_OK);
    assert_true(n >= 1);
    fcl_device_ref *refs = calloc(n, sizeof *refs);
    assert_int_equal(fcl_list_devices(refs, n, &n), FCL_OK);
    assert_true(strlen(refs[0].device_name) > 0);

    /* explicit indices */
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.platform_index = refs[0].platform_index;
    o.device_index = refs[0].device_index;
    fcl_context *ctx = NULL;
    assert_int_equal(fcl_context_create(&o, &ctx), FCL_OK);
    fcl_device_info info;
    assert_int_equal(fcl_context_device_info(ctx, &info), FCL_OK);
    assert_string_equal(info.name, refs[0].device_name);
    assert_true(info.local_mem_reported > 0);
    assert_true(info.local_mem_usable >= info.local_mem_reported);
    assert_true(info.max_work_group_size >= 1);
    assert_non_null(info.extensions);
    fcl_context_destroy(ctx);

    o.device_index = 99;
    assert_int_equal(fcl_context_create(&o, &ctx), FCL_ERROR_DEVICE_NOT_FOUND);
    assert_null(ctx);

    /* the environment variable: a good value, then bad ones; the caller's
     * own choice (tests run with FLASHCL_DEVICE on another device) is put
     * back after, or the later tests would run on the default device */
    const char *callers = getenv("FLASHCL_DEVICE");
    char *saved = callers != NULL ? strdup(callers) : NULL;
    char spec[32];
    snprintf(spec, sizeof spec, "%d:%d", refs[0].platform_index, refs[0].device_index);
    setenv("FLASHCL_DEVICE", spec, 1);
    assert_int_equal(fcl_context_create(NULL, &ctx), FCL_OK);
    fcl_context_destroy(ctx);
    setenv("FLASHCL_DEVICE", "gpu", 1);
    assert_int_equal(fcl_context_create(NULL, &ctx), FCL_ERROR_BAD_DEVICE_SPEC);
    setenv("FLASHCL_DEVICE", "0:", 1);
    assert_int_equal(fcl_context_create(NULL, &ctx), FCL_ERROR_BAD_DEVICE_SPEC);
    setenv("FLASHCL_DEVICE", "31:0", 1);
    assert_int_equal(fcl_context_create(NULL, &ctx), FCL_ERROR_DEVICE_NOT_FOUND);
    if (saved != NULL)
        setenv("FLASHCL_DEVICE", saved, 1);
    else
        unsetenv("FLASHCL_DEVICE");
    assert_true(saved != NULL ? strcmp(getenv("FLASHCL_DEVICE"), saved) == 0
                              : getenv("FLASHCL_DEVICE") == NULL);
    free(saved);
    free(refs);
}

static void test_profiles_listed(void **state)
{
    (void)state;
    assert_true(fcl_profile_count() >= 6);
    for (size_t i = 0; i < fcl_profile_count(); ++i) {
        assert_non_null(fcl_profile_name(i));
        assert_non_null(fcl_profile_description(i));
    }
    assert_null(fcl_profile_name(fcl_profile_count()));
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.profile = "no-such-gpu";
    fcl_context *ctx = NULL;
    assert_int_equal(fcl_context_create(&o, &ctx), FCL_ERROR_UNKNOWN_PROFILE);
    o.profile = "amd-cdna";
    assert_int_equal(fcl_context_create(&o, &ctx), FCL_OK);
    fcl_device_info info;
    fcl_context_device_info(ctx, &info);
    assert_string_equal(info.profile_name, "amd-cdna");
    assert_int_equal(info.local_mem_usable, 65536);
    assert_int_equal(info.simd_width, 64);
    fcl_context_destroy(ctx);
}

/* The caller's own context and queue: our call runs in them, on its buffers. */
static void test_wrap_callers_opencl_objects(void **state)
{
    (void)state;
    fcl_context *owner = test_context(NULL);
    assert_non_null(owner);
    cl_device_id dev = fcl_context_cl_device(owner);
    cl_int err;
    cl_context cctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    cl_command_queue queue = clCreateCommandQueue(cctx, dev, 0, &err);
    assert_int_equal(err, CL_SUCCESS);
    fcl_context *ctx = NULL;
    assert_int_equal(fcl_context_create_from_cl(cctx, queue, dev, NULL, &ctx), FCL_OK);
    assert_ptr_equal(fcl_context_cl_context(ctx), cctx);
    assert_ptr_equal(fcl_context_cl_queue(ctx), queue);
    /* a queue of another context is refused */
    fcl_context *bad = NULL;
    assert_int_equal(fcl_context_create_from_cl(fcl_context_cl_context(owner), queue, dev, NULL, &bad),
                     FCL_ERROR_INVALID_VALUE);
    fa_case c = {1, 2, 1, 40, 50, 32, FCL_DTYPE_FP16, 1, 0, FCL_LAYOUT_BHSD, 0, {0, 0, 0}, 3, NULL};
    fa_result r;
    assert_true(fa_check_forward(ctx, &c, &r));
    /* the caller may release its references first: we hold our own */
    clReleaseCommandQueue(queue);
    clReleaseContext(cctx);
    assert_true(fa_check_backward(ctx, &c, &r));
    fcl_context_destroy(ctx);
    fcl_context_destroy(owner);
}

/* Host calls, checked against the float64 reference. */
static void test_host_calls(void **state)
{
    (void)state;
    fcl_context *ctx = test_context(NULL);
    enum { Bn = 1, Hn = 2, Sq = 45, Sk = 61, Dn = 20 };
    const size_t nq = Bn * Hn * Sq * Dn, nk = Bn * Hn * Sk * Dn;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *o = malloc(nq * 4);
    float *dout = malloc(nq * 4), *dq = malloc(nq * 4), *dk = malloc(nk * 4), *dv = malloc(nk * 4);
    float *lse = malloc(Bn * Hn * Sq * 4);
    double *qd = malloc(nq * 8), *kd = malloc(nk * 8), *vd = malloc(nk * 8), *od = malloc(nq * 8);
    double *dod = malloc(nq * 8), *dqd = malloc(nq * 8), *dkd = malloc(nk * 8), *dvd = malloc(nk * 8);
    double *lsed = malloc(Bn * Hn * Sq * 8);
    rng g = {42};
    for (size_t i = 0; i < nq; ++i) q[i] = (float)rng_normal(&g), qd[i] = q[i];
    for (size_t i = 0; i < nk; ++i) k[i] = (float)rng_normal(&g), kd[i] = k[i];
    for (size_t i = 0; i < nk; ++i) v[i] = (float)rng_normal(&g), vd[i] = v[i];
    for (size_t i = 0; i < nq; ++i) dout[i] = (float)rng_normal(&g), dod[i] = dout[i];
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, Bn, Hn, Hn, Sq, Sk, Dn, FCL_DTYPE_FP32, FCL_LAYOUT_BHSD);
    d.causal = 1;
    assert_int_equal(fcl_attention_forward_host(ctx, &d, q, k, v, o, lse), FCL_OK);
    assert_int_equal(fcl_attention_backward_host(ctx, &d, q, k, v, o, lse, dout, dq, dk, dv), FCL_OK);
    ref_problem p = {Bn, Hn, Hn, Sq, Sk, Dn, 1.0 / sqrt(Dn), 1, FCL_DTYPE_FP32, NULL, 0};
    ref_forward_f64(&p, qd, kd, vd, od, lsed);
    ref_backward_f64(&p, qd, kd, vd, dod, dqd, dkd, dvd);
    double e = 0;
    for (size_t i = 0; i < nq; ++i) e = fmax(e, fabs(o[i] - od[i]) + fabs(dq[i] - dqd[i]));
    for (size_t i = 0; i < nk; ++i) e = fmax(e, fabs(dk[i] - dkd[i]) + fabs(dv[i] - dvd[i]));
    for (size_t i = 0; i < (size_t)Bn * Hn * Sq; ++i) e = fmax(e, fabs(lse[i] - lsed[i]));
    assert_true(e < 1e-4); /* fp32 values of order 1: ~1e-6 expected, 1e-4 is a bug */
    float *all[] = {q, k, v, o, dout, dq, dk, dv, lse};
    for (size_t i = 0; i < 9; ++i) free(all[i]);
    double *alld[] = {qd, kd, vd, od, dod, dqd, dkd, dvd, lsed};
    for (size_t i = 0; i < 9; ++i) free(alld[i]);
    fcl_context_destroy(ctx);
}

static void test_plan_query(void **state)
{
    (void)state;
    fcl_context *ctx = test_context(NULL);
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 1, 1, 4096, 4096, 128, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    fcl_device_info info;
    fcl_context_device_info(ctx, &info);
    const fcl_kernel_kind kinds[3] = {FCL_KERNEL_FORWARD, FCL_KERNEL_BACKWARD_DKDV,
                                      FCL_KERNEL_BACKWARD_DQ};
    for (int i = 0; i < 3; ++i) {
        fcl_plan p;
        /* a device that ends long loops refuses the backward's 4096-long
         * walks (loop_limit.c): its plan is then a shorter call's */
        fcl_attention_desc e = d;
        if (kinds[i] != FCL_KERNEL_FORWARD && ctx->loop_limit != 0) {
            assert_int_equal(fcl_plan_query(ctx, &e, kinds[i], &p), FCL_ERROR_DEVICE_LOOP_LIMIT);
            e.seqlen_q = e.seqlen_k = 64;
        }
        assert_int_equal(fcl_plan_query(ctx, &e, kinds[i], &p), FCL_OK);
        assert_int_equal(p.kernel, kinds[i]);
        assert_int_equal(p.local_mem_reported, info.local_mem_reported);
        /* M counts elements of the on-chip tile type: fp32 on the portable
         * path, 16-bit on the tensor-core ones (mma.sync and wgmma) */
        const uint64_t elem = strstr(p.variant, "mma") != NULL ? 2 : 4;
        assert_int_equal(p.paper_m_elements, p.local_mem_usable / elem);
        if (strncmp(p.variant, "cpu-", 4) == 0) { /* a core's share of the cache */
            assert_true(p.local_mem_usable >= 256 * 1024 && p.local_mem_usable <= 1024 * 1024);
            assert_int_equal(p.work_group_size, 1);
        } else {
            assert_int_equal(p.local_mem_usable, info.local_mem_usable);
        }
        assert_int_equal(p.paper_bc, (p.paper_m_elements + 4 * 128 - 1) / (4 * 128));
        assert_int_equal(p.paper_br, p.paper_bc < 128 ? p.paper_bc : 128);
        assert_true(p.local_bytes <= info.local_mem_usable);
        assert_true(p.work_group_size <= info.max_work_group_size);
        assert_int_equal(p.work_group_size, p.threads_row * p.threads_col);
        assert_true(p.head_dim_padded >= 128);
        assert_true(strlen(p.reason) > 0);
    }
    fcl_plan p;
    assert_int_equal(fcl_plan_query(ctx, &d, (fcl_kernel_kind)5, &p), FCL_ERROR_INVALID_VALUE);
    d.head_dim = 0;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &p), FCL_ERROR_INVALID_SHAPE);
    fcl_context_destroy(ctx);
}

/* Issue requirement: extra device memory is O(B*H*N) and no N x N buffer is
 * ever allocated; every allocation goes through the counted path. */
static void test_no_quadratic_buffers(void **state)
{
    (void)state;
    fcl_context *ctx = test_context(NULL);
    enum { Bn = 1, Hn = 2, N = 1500, Dn = 16 };
    fa_case c = {Bn, Hn, Hn, N, N, Dn, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 9, NULL};
    fcl_context_reset_memory_stats(ctx);
    fcl_memory_stats m;
    assert_int_equal(fcl_context_memory_stats(ctx, &m), FCL_OK);
    const uint64_t kept = m.current_bytes; /* from creation: a one-float placeholder */
    assert_true(kept <= 16);
    fa_result r;
    assert_true(fa_check_backward(ctx, &c, &r)); /* runs our forward and backward */
    /* Where the device is big enough for these few row blocks to leave it
     * half idle (a GPU), the forward splits the keys: its fp32 partial O
     * and LSE stay with the context for the next call. */
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, Bn, Hn, Hn, N, N, Dn, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    d.causal = 1;
    fcl_plan p;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &p), FCL_OK);
    const uint64_t scratch =
        p.num_splits > 1 ? (uint64_t)Bn * Hn * N * p.num_splits * (Dn + 1) * 4 : 0;
    /* delta, unless a device that ends long loops refused the backward
     * (as its plan query says, checked by fa_check_backward) */
    fcl_plan pb;
    const uint64_t delta = fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DQ, &pb) == FCL_OK &&
                                   fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &pb) == FCL_OK
                               ? (uint64_t)Bn * Hn * N * 4
                               : 0;
    assert_int_equal(fcl_context_memory_stats(ctx, &m), FCL_OK);
    assert_true(m.allocations >= (delta > 0 ? 1u : 0u));                 /* delta was counted */
    assert_true(m.largest_bytes < (uint64_t)N * N);                      /* not even one byte per score */
    assert_int_equal(m.peak_bytes, kept + delta + scratch);              /* delta, split scratch */
    assert_int_equal(m.current_bytes, kept + delta + scratch);           /* both kept */
    /* the same call again: the workspaces are reused, nothing new is made */
    fcl_context_reset_memory_stats(ctx);
    assert_true(fa_check_backward(ctx, &c, &r));
    assert_int_equal(fcl_context_memory_stats(ctx, &m), FCL_OK);
    assert_int_equal(m.allocations, 0);
    assert_int_equal(m.current_bytes, kept + delta + scratch);
    fcl_context_destroy(ctx);
}

/* Programs a context builds for the forward of `d`: one, and one more for
 * each plan whose built kernel its own numbers turned down (the re-plans at
 * resolve: on rusticl, which counts twice the declared local bytes, the
 * first plan is built, refused and kept on disk too), as the plan's reason
 * lists them. */
static int forward_programs(fcl_context *ctx, const fcl_attention_desc *d)
{
    fcl_plan p;
    assert_int_equal(fcl_plan_query(ctx, d, FCL_KERNEL_FORWARD, &p), FCL_OK);
    int n = 1;
    for (const char *at = p.reason; (at = strstr(at, "kernel needs local bytes")) != NULL; ++at)
        ++n;
    for (const char *at = p.reason; (at = strstr(at, "kernel allows only work-items")) != NULL; ++at)
        ++n;
    return n;
}

/* The kernel binaries and probe files in a cache folder; no temporaries. */
static void count_cache_files(const char *dir, int remove_them, int *files, int *probes)
{
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    *files = *probes = 0;
    for (struct dirent *e; (e = readdir(dp)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        assert_null(strstr(e->d_name, ".tmp")); /* no leftover temporaries */
        if (strncmp(e->d_name, "flashcl-probe-", 14) == 0)
            ++*probes;
        else
            ++*files;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (remove_them)
            remove(path);
        else
            print_message("cache folder entry: %s\n", e->d_name);
    }
    closedir(dp);
}

/* With a cache folder, a second context loads the built kernels from disk:
 * the folder holds the kernel binaries the first built (one, and one for
 * each plan re-made at resolve) and the second adds none, and the probed
 * on-chip memory where the device was probed (GPUs with dedicated local
 * memory). */
static void test_disk_cache(void **state)
{
    (void)state;
    char dir[] = "/tmp/flashcl-cache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.cache_dir = dir;
    fa_case c = {1, 1, 1, 30, 30, 16, FCL_DTYPE_BF16, 0, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 4, NULL};
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 1, 1, 30, 30, 16, FCL_DTYPE_BF16, FCL_LAYOUT_BSHD);
    fa_result r;
    int built = 0;
    for (int round = 0; round < 2; ++round) {
        fcl_context *ctx = NULL;
        assert_int_equal(fcl_context_create(&o, &ctx), FCL_OK);
        fcl_device_info info;
        assert_int_equal(fcl_context_device_info(ctx, &info), FCL_OK);
        assert_true(fa_check_forward(ctx, &c, &r));
        if (round == 0)
            built = forward_programs(ctx, &d);
        fcl_context_destroy(ctx);
        int files = 0, probes = 0;
        count_cache_files(dir, 0, &files, &probes);
        assert_int_equal(files, built);
        assert_int_equal(probes, info.local_mem_probed);
    }
    int files = 0, probes = 0;
    count_cache_files(dir, 1, &files, &probes);
    remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_and_strings),
        cmocka_unit_test(test_device_listing_and_selection),
        cmocka_unit_test(test_profiles_listed),
        cmocka_unit_test(test_wrap_callers_opencl_objects),
        cmocka_unit_test(test_host_calls),
        cmocka_unit_test(test_plan_query),
        cmocka_unit_test(test_no_quadratic_buffers),
        cmocka_unit_test(test_disk_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
