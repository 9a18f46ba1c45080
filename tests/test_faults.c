/* test_faults.c - injected faults: the n-th OpenCL call the library makes,
 * and the n-th host allocation, fail.
 *
 * The program is linked against the static library with
 * -Wl,--wrap=clCreateBuffer,... and --wrap=fcl_host_malloc,... (see
 * tests/CMakeLists.txt): every such call from the library's objects (and
 * from this file; PoCL's own calls are not redirected) goes through the
 * __wrap_ functions below, which count it and, when it is the one chosen,
 * fail it (CL_OUT_OF_HOST_MEMORY, or NULL) without calling the real one.
 *
 * One scenario: context creation, a forward and a backward through the
 * host-pointer calls (packed sequences, ALiBi and a block mask, so the aux
 * arrays and the cu_seqlens read-back are reached), and a KV-cache decode
 * step (paged, appending, two key chunks, so the append and the merge run).
 * A clean run counts the calls; then for every n the scenario runs again
 * with call n failing.  Each time:
 *   - the call that met the fault returns a status that is not FCL_OK, and
 *     its host outputs are byte-identical to what they were before it;
 *   - every call before it gave the clean run's outputs, and every call
 *     after it (the context stays usable) succeeds with bitwise the clean
 *     run's outputs;
 *   - nothing was printed on stdout or stderr during the scenario;
 *   - every OpenCL object the library made or retained was released once
 *     the context is destroyed (counted here); host memory is checked by
 *     LeakSanitizer in the sanitizer build (tools/sanitize.sh).
 * A crash, an abort or a hang fails the program (ctest's timeout). */
#define _POSIX_C_SOURCE 200809L /* dup, dup2, fileno */
#include "flashcl.h"
#include "kvcache_support.h"
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the fault switch ---------------------------------------------------- */

enum fault_kind { FAULT_OPENCL, FAULT_HOST_ALLOC };
enum { MAX_SITES = 512 };

static struct {
    int counting;                 /* 0 outside the scenario */
    enum fault_kind kind;
    long fail_at;                 /* 1-based call to fail; 0: none */
    long calls[2];                /* calls of each kind since the scenario began */
    int injected;                 /* the chosen call was reached and failed */
    char injected_name[48];
    long live_objects;            /* OpenCL objects made or retained minus released */
    /* distinct call sites (return addresses) of each kind, over all runs */
    const void *sites[2][MAX_SITES];
    int num_sites[2];
} fault;

static void note_site(enum fault_kind kind, const void *site)
{
    for (int i = 0; i < fault.num_sites[kind]; ++i)
        if (fault.sites[kind][i] == site)
            return;
    if (fault.num_sites[kind] < MAX_SITES)
        fault.sites[kind][fault.num_sites[kind]++] = site;
}

/* Counts one call; 1 if it must fail. */
static int should_fail(enum fault_kind kind, const char *name, const void *site)
{
    if (!fault.counting)
        return 0;
    note_site(kind, site);
    const long n = ++fault.calls[kind];
    if (kind != fault.kind || n != fault.fail_at)
        return 0;
    fault.injected = 1;
    snprintf(fault.injected_name, sizeof fault.injected_name, "%s", name);
    return 1;
}

#define SITE __builtin_return_address(0)
#define CL_FAULT(name) should_fail(FAULT_OPENCL, #name, SITE)
#define INJECTED CL_OUT_OF_HOST_MEMORY

/* ---- host allocations ---------------------------------------------------- */

void *__real_fcl_host_malloc(size_t bytes);
void *__real_fcl_host_calloc(size_t count, size_t size);
void *__real_fcl_host_realloc(void *p, size_t bytes);
void *__wrap_fcl_host_malloc(size_t bytes);
void *__wrap_fcl_host_calloc(size_t count, size_t size);
void *__wrap_fcl_host_realloc(void *p, size_t bytes);

void *__wrap_fcl_host_malloc(size_t bytes)
{
    return should_fail(FAULT_HOST_ALLOC, "malloc", SITE) ? NULL : __real_fcl_host_malloc(bytes);
}
void *__wrap_fcl_host_calloc(size_t count, size_t size)
{
    return should_fail(FAULT_HOST_ALLOC, "calloc", SITE) ? NULL
                                                         : __real_fcl_host_calloc(count, size);
}
void *__wrap_fcl_host_realloc(void *p, size_t bytes)
{
    return should_fail(FAULT_HOST_ALLOC, "realloc", SITE) ? NULL : __real_fcl_host_realloc(p, bytes);
}

/* ---- OpenCL: calls that return a status ---------------------------------- */

/* WRAP_STATUS(name, (params), (args)): fails with INJECTED, else calls the
 * real function. */
#define WRAP_STATUS(name, params, args)              \
    cl_int __real_##name params;                     \
    cl_int __wrap_##name params;                     \
    cl_int __wrap_##name params                      \
    {                                                \
        if (CL_FAULT(name))                          \
            return INJECTED;                         \
        return __real_##name args;                   \
    }

WRAP_STATUS(clGetPlatformIDs, (cl_uint n, cl_platform_id *p, cl_uint *np), (n, p, np))
WRAP_STATUS(clGetPlatformInfo,
            (cl_platform_id p, cl_platform_info w, size_t n, void *v, size_t *r), (p, w, n, v, r))
WRAP_STATUS(clGetDeviceIDs,
            (cl_platform_id p, cl_device_type t, cl_uint n, cl_device_id *d, cl_uint *nd),
            (p, t, n, d, nd))
WRAP_STATUS(clGetDeviceInfo, (cl_device_id d, cl_device_info w, size_t n, void *v, size_t *r),
            (d, w, n, v, r))
WRAP_STATUS(clGetCommandQueueInfo,
            (cl_command_queue q, cl_command_queue_info w, size_t n, void *v, size_t *r),
            (q, w, n, v, r))
WRAP_STATUS(clGetMemObjectInfo, (cl_mem m, cl_mem_info w, size_t n, void *v, size_t *r),
            (m, w, n, v, r))
WRAP_STATUS(clGetKernelInfo, (cl_kernel k, cl_kernel_info w, size_t n, void *v, size_t *r),
            (k, w, n, v, r))
WRAP_STATUS(clGetKernelWorkGroupInfo,
            (cl_kernel k, cl_device_id d, cl_kernel_work_group_info w, size_t n, void *v,
             size_t *r),
            (k, d, w, n, v, r))
WRAP_STATUS(clGetProgramInfo, (cl_program p, cl_program_info w, size_t n, void *v, size_t *r),
            (p, w, n, v, r))
WRAP_STATUS(clGetProgramBuildInfo,
            (cl_program p, cl_device_id d, cl_program_build_info w, size_t n, void *v, size_t *r),
            (p, d, w, n, v, r))
WRAP_STATUS(clBuildProgram,
            (cl_program p, cl_uint nd, const cl_device_id *d, const char *o,
             void(CL_CALLBACK *f)(cl_program, void *), void *u),
            (p, nd, d, o, f, u))
WRAP_STATUS(clSetKernelArg, (cl_kernel k, cl_uint i, size_t n, const void *v), (k, i, n, v))
WRAP_STATUS(clFinish, (cl_command_queue q), (q))

/* ---- OpenCL: calls that make objects, and their releases ----------------- */

/* WRAP_CREATE(type, name, (params), (args)): the last parameter is the
 * cl_int *err of OpenCL's creators. */
#define WRAP_CREATE(type, name, params, args)        \
    type __real_##name params;                       \
    type __wrap_##name params;                       \
    type __wrap_##name params                        \
    {                                                \
        if (CL_FAULT(name)) {                        \
            if (err != NULL)                         \
                *err = INJECTED;                     \
            return NULL;                             \
        }                                            \
        type made = __real_##name args;              \
        if (made != NULL)                            \
            fault.live_objects++;                    \
        return made;                                 \
    }

WRAP_CREATE(cl_context, clCreateContext,
            (const cl_context_properties *p, cl_uint nd, const cl_device_id *d,
             void(CL_CALLBACK *f)(const char *, const void *, size_t, void *), void *u,
             cl_int *err),
            (p, nd, d, f, u, err))
WRAP_CREATE(cl_command_queue, clCreateCommandQueue,
            (cl_context c, cl_device_id d, cl_command_queue_properties p, cl_int *err),
            (c, d, p, err))
WRAP_CREATE(cl_mem, clCreateBuffer, (cl_context c, cl_mem_flags f, size_t n, void *h, cl_int *err),
            (c, f, n, h, err))
WRAP_CREATE(cl_program, clCreateProgramWithSource,
            (cl_context c, cl_uint n, const char **s, const size_t *l, cl_int *err),
            (c, n, s, l, err))
WRAP_CREATE(cl_program, clCreateProgramWithBinary,
            (cl_context c, cl_uint nd, const cl_device_id *d, const size_t *l,
             const unsigned char **b, cl_int *bs, cl_int *err),
            (c, nd, d, l, b, bs, err))
WRAP_CREATE(cl_kernel, clCreateKernel, (cl_program p, const char *n, cl_int *err), (p, n, err))

/* Retains may fail (the object is then not retained); releases are counted
 * but never failed: the library cannot do anything about a failed release. */
#define WRAP_RETAIN(name, type)                      \
    cl_int __real_##name(type x);                    \
    cl_int __wrap_##name(type x);                    \
    cl_int __wrap_##name(type x)                     \
    {                                                \
        if (CL_FAULT(name))                          \
            return INJECTED;                         \
        const cl_int e = __real_##name(x);           \
        if (e == CL_SUCCESS)                         \
            fault.live_objects++;                    \
        return e;                                    \
    }
#define WRAP_RELEASE(name, type)                     \
    cl_int __real_##name(type x);                    \
    cl_int __wrap_##name(type x);                    \
    cl_int __wrap_##name(type x)                     \
    {                                                \
        const cl_int e = __real_##name(x);           \
        if (e == CL_SUCCESS)                         \
            fault.live_objects--;                    \
        return e;                                    \
    }

WRAP_RETAIN(clRetainContext, cl_context)
WRAP_RETAIN(clRetainCommandQueue, cl_command_queue)
WRAP_RETAIN(clRetainEvent, cl_event)
WRAP_RELEASE(clReleaseContext, cl_context)
WRAP_RELEASE(clReleaseCommandQueue, cl_command_queue)
WRAP_RELEASE(clReleaseMemObject, cl_mem)
WRAP_RELEASE(clReleaseProgram, cl_program)
WRAP_RELEASE(clReleaseKernel, cl_kernel)
WRAP_RELEASE(clReleaseEvent, cl_event)

/* ---- OpenCL: enqueues, which may return an event ------------------------- */

static cl_int made_event(cl_int e, cl_event *ev)
{
    if (e == CL_SUCCESS && ev != NULL && *ev != NULL)
        fault.live_objects++;
    return e;
}

cl_int __real_clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dims,
                                     const size_t *off, const size_t *global, const size_t *local,
                                     cl_uint nw, const cl_event *w, cl_event *ev);
cl_int __wrap_clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dims,
                                     const size_t *off, const size_t *global, const size_t *local,
                                     cl_uint nw, const cl_event *w, cl_event *ev);
cl_int __wrap_clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dims,
                                     const size_t *off, const size_t *global, const size_t *local,
                                     cl_uint nw, const cl_event *w, cl_event *ev)
{
    if (CL_FAULT(clEnqueueNDRangeKernel))
        return INJECTED;
    return made_event(__real_clEnqueueNDRangeKernel(q, k, dims, off, global, local, nw, w, ev),
                      ev);
}

cl_int __real_clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off,
                                  size_t n, void *p, cl_uint nw, const cl_event *w, cl_event *ev);
cl_int __wrap_clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off,
                                  size_t n, void *p, cl_uint nw, const cl_event *w, cl_event *ev);
cl_int __wrap_clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off,
                                  size_t n, void *p, cl_uint nw, const cl_event *w, cl_event *ev)
{
    if (CL_FAULT(clEnqueueReadBuffer))
        return INJECTED;
    return made_event(__real_clEnqueueReadBuffer(q, m, blocking, off, n, p, nw, w, ev), ev);
}

cl_int __real_clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint nw, const cl_event *w,
                                          cl_event *ev);
cl_int __wrap_clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint nw, const cl_event *w,
                                          cl_event *ev);
cl_int __wrap_clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint nw, const cl_event *w,
                                          cl_event *ev)
{
    if (CL_FAULT(clEnqueueMarkerWithWaitList))
        return INJECTED;
    return made_event(__real_clEnqueueMarkerWithWaitList(q, nw, w, ev), ev);
}

/* ---- the scenario ---------------------------------------------------------- */

enum { STEP_CREATE, STEP_FORWARD, STEP_BACKWARD, STEP_KVCACHE, STEPS };
static const char *const step_names[STEPS] = {"context creation", "forward", "backward",
                                              "KV-cache decode"};

/* One host array: its bytes, and its size. */
typedef struct array {
    unsigned char *p;
    size_t n;
} array;

static array array_new(size_t n)
{
    array a = {malloc(n), n};
    if (a.p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return a;
}

static void fill_pattern(array *a)
{
    for (size_t i = 0; i < a->n; ++i)
        a->p[i] = (unsigned char)(0xA5 ^ (i * 131));
}

static array array_copy(const array *a)
{
    array c = array_new(a->n);
    memcpy(c.p, a->p, a->n);
    return c;
}

static int same(const array *a, const array *b) { return a->n == b->n && memcmp(a->p, b->p, a->n) == 0; }

/* Inputs of the scenario, made once. */
enum { IN_Q, IN_K, IN_V, IN_DOUT, INPUTS };
enum { OUT_O, OUT_LSE, OUT_DQ, OUT_DK, OUT_DV, OUT_KV_O, OUT_KV_LSE, OUT_KV_KC, OUT_KV_VC, OUTPUTS };
static const int output_step[OUTPUTS] = {STEP_FORWARD,  STEP_FORWARD,  STEP_BACKWARD,
                                         STEP_BACKWARD, STEP_BACKWARD, STEP_KVCACHE,
                                         STEP_KVCACHE,  STEP_KVCACHE,  STEP_KVCACHE};

static fcl_attention_desc g_desc;
static array g_in[INPUTS];
static array g_o_clean, g_lse_clean;       /* the backward's O and LSE inputs */
static const int32_t g_cu_q[3] = {0, 15, 40}, g_cu_k[3] = {0, 22, 40};
static float g_slopes[4];
static uint8_t g_blocks[4 * 3];
static const int g_kv_lens[2] = {13, 5};
static const kv_case g_kv = {2, 4, 2, 24, 1, 2, FCL_DTYPE_FP16, 8, 32, g_kv_lens, 1, -1, 0.0f, 1,
                             2, 7};
static kv_state g_kv_state;              /* inputs of the decode; its outputs are copied per run */

static void make_inputs(void)
{
    /* two packed sequences of 15 and 25 query rows, 22 and 18 keys */
    fcl_attention_desc_init(&g_desc, 2, 4, 2, 25, 22, 24, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    g_desc.causal = 1;
    g_desc.varlen = 1;
    g_desc.total_q = 40;
    g_desc.total_k = 40;
    g_desc.q = g_desc.o = g_desc.dout = g_desc.dq = fcl_layout_contiguous(FCL_LAYOUT_BSHD, 4, 40, 24);
    g_desc.k = g_desc.v = g_desc.dk = g_desc.dv = fcl_layout_contiguous(FCL_LAYOUT_BSHD, 2, 40, 24);
    g_desc.alibi = FCL_ALIBI_PER_HEAD;
    g_desc.block_m = 8;
    g_desc.block_n = 8;
    for (int h = 0; h < 4; ++h)
        g_slopes[h] = 1.0f / (float)(2 << h);
    for (int i = 0; i < 12; ++i)
        g_blocks[i] = i != 5;
    rng r = {20261123};
    const size_t nq = 40 * 4 * 24, nk = 40 * 2 * 24;
    const size_t n[INPUTS] = {nq, nk, nk, nq};
    for (int i = 0; i < INPUTS; ++i) {
        g_in[i] = array_new(n[i] * 2);
        for (size_t e = 0; e < n[i]; ++e)
            fa_put_value(g_in[i].p + 2 * e, FCL_DTYPE_FP16, rng_normal(&r));
    }
    kv_init(&g_kv, &g_kv_state);
}

typedef struct run {
    fcl_status st[STEPS];
    int ran[STEPS];
    array out[OUTPUTS];
    array before[OUTPUTS];        /* each output as it was before its call */
} run;

static const fcl_attention_aux_host g_aux = {.alibi_slopes = g_slopes, .cu_seqlens_q = g_cu_q,
                                             .cu_seqlens_k = g_cu_k, .block_mask = g_blocks};

static void run_scenario(run *rr)
{
    memset(rr, 0, sizeof *rr);
    const size_t nq = 40 * 4 * 24 * 2, nk = 40 * 2 * 24 * 2, nlse = 4 * 40 * sizeof(float);
    const kv_state *kv = &g_kv_state;
    const size_t sizes[OUTPUTS] = {nq, nlse, nq, nk, nk, kv->nq * kv->es,
                                   2 * 4 * sizeof(float), kv->ncache * kv->es,
                                   kv->ncache * kv->es};
    for (int i = 0; i < OUTPUTS; ++i) {
        rr->out[i] = array_new(sizes[i]);
        fill_pattern(&rr->out[i]);
    }
    memcpy(rr->out[OUT_KV_KC].p, kv->kc, sizes[OUT_KV_KC]);
    memcpy(rr->out[OUT_KV_VC].p, kv->vc, sizes[OUT_KV_VC]);
    for (int i = 0; i < OUTPUTS; ++i)
        rr->before[i] = array_copy(&rr->out[i]);

    fcl_context_options opts;
    fcl_context_options_init(&opts);
    opts.disk_cache = 0;
    fcl_context *ctx = NULL;
    rr->ran[STEP_CREATE] = 1;
    rr->st[STEP_CREATE] = fcl_context_create(&opts, &ctx);
    if (rr->st[STEP_CREATE] != FCL_OK)
        return;
    rr->ran[STEP_FORWARD] = 1;
    rr->st[STEP_FORWARD] = fcl_attention_forward_host_ex(
        ctx, &g_desc, &g_aux, g_in[IN_Q].p, g_in[IN_K].p, g_in[IN_V].p, rr->out[OUT_O].p,
        (float *)rr->out[OUT_LSE].p);
    rr->ran[STEP_BACKWARD] = 1;
    rr->st[STEP_BACKWARD] = fcl_attention_backward_host_ex(
        ctx, &g_desc, &g_aux, g_in[IN_Q].p, g_in[IN_K].p, g_in[IN_V].p, g_o_clean.p,
        (const float *)g_lse_clean.p, g_in[IN_DOUT].p, rr->out[OUT_DQ].p, rr->out[OUT_DK].p,
        rr->out[OUT_DV].p);
    kv_state s = *kv;
    s.o = rr->out[OUT_KV_O].p;
    s.lse = (float *)rr->out[OUT_KV_LSE].p;
    s.kc = rr->out[OUT_KV_KC].p;
    s.vc = rr->out[OUT_KV_VC].p;
    const fcl_kvcache_host a = kv_host_arrays(&s);
    rr->ran[STEP_KVCACHE] = 1;
    rr->st[STEP_KVCACHE] = fcl_attention_kvcache_host(ctx, &s.desc, &a);
    fcl_context_destroy(ctx);
}

static void run_free(run *rr)
{
    for (int i = 0; i < OUTPUTS; ++i) {
        free(rr->out[i].p);
        free(rr->before[i].p);
    }
}

/* Runs the scenario with stdout and stderr going to a file; 1 if nothing
 * was printed. */
static int run_silently(run *rr)
{
    fflush(stdout);
    fflush(stderr);
    FILE *sink = tmpfile();
    if (sink == NULL) {
        fprintf(stderr, "tmpfile failed\n");
        exit(1);
    }
    const int saved_out = dup(1), saved_err = dup(2);
    dup2(fileno(sink), 1);
    dup2(fileno(sink), 2);
    run_scenario(rr);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    const long printed = ftell(sink) >= 0 && fseek(sink, 0, SEEK_END) == 0 ? ftell(sink) : -1;
    fclose(sink);
    return printed == 0;
}

/* Checks one faulty run against the clean one; 1 on pass, prints why not. */
static int check_run(const run *clean, const run *rr, long n)
{
    const char *kind = fault.kind == FAULT_OPENCL ? "OpenCL call" : "host allocation";
    int failed_step = -1;
    for (int s = 0; s < STEPS; ++s) {
        if (!rr->ran[s])
            continue;
        if (rr->st[s] != FCL_OK && failed_step < 0) {
            failed_step = s;
            continue;
        }
        if (rr->st[s] != FCL_OK) {
            printf("%s %ld (%s): %s failed again after the fault (%s)\n", kind, n,
                   fault.injected_name, step_names[s], fcl_status_string(rr->st[s]));
            return 0;
        }
    }
    if (failed_step < 0) {
        printf("%s %ld (%s) failed, yet every call returned FCL_OK\n", kind, n,
               fault.injected_name);
        return 0;
    }
    for (int i = 0; i < OUTPUTS; ++i) {
        const int s = output_step[i];
        if (!rr->ran[s])
            continue;
        if (s == failed_step && !same(&rr->out[i], &rr->before[i])) {
            printf("%s %ld (%s): %s returned %s but changed output %d\n", kind, n,
                   fault.injected_name, step_names[s], fcl_status_string(rr->st[s]), i);
            return 0;
        }
        if (s != failed_step && !same(&rr->out[i], &clean->out[i])) {
            printf("%s %ld (%s): output %d of %s differs from the clean run\n", kind, n,
                   fault.injected_name, i, step_names[s]);
            return 0;
        }
    }
    return 1;
}

static int sweep(enum fault_kind kind, const run *clean, long total, long *injected)
{
    int failures = 0;
    for (long n = 1; n <= total; ++n) {
        int ok = 1;
        run rr;
        fault.kind = kind;
        fault.fail_at = n;
        fault.injected = 0;
        fault.calls[0] = fault.calls[1] = 0;
        fault.live_objects = 0;
        fault.counting = 1;
        const int silent = run_silently(&rr);
        fault.counting = 0;
        if (!fault.injected) {
            printf("call %ld of kind %d was not reached (the clean run made %ld)\n", n, (int)kind,
                   total);
            ok = 0;
        } else {
            ++*injected;
            if (!silent) {
                printf("something was printed when call %ld (%s) failed\n", n, fault.injected_name);
                ok = 0;
            }
            if (fault.live_objects != 0) {
                printf("%ld OpenCL objects left after call %ld (%s) failed\n", fault.live_objects,
                       n, fault.injected_name);
                ok = 0;
            }
            ok &= check_run(clean, &rr, n);
        }
        run_free(&rr);
        if (!ok && ++failures == 20) {
            printf("(stopping after 20 failures)\n");
            break;
        }
    }
    return failures == 0;
}

int main(void)
{
    make_inputs();
    /* the backward's inputs: a clean forward on a context of its own */
    g_o_clean = array_new(40 * 4 * 24 * 2);
    g_lse_clean = array_new(4 * 40 * sizeof(float));
    {
        fcl_context *ctx = test_context(NULL);
        if (ctx == NULL)
            return 1;
        const fcl_status st = fcl_attention_forward_host_ex(ctx, &g_desc, &g_aux, g_in[IN_Q].p,
                                                            g_in[IN_K].p, g_in[IN_V].p,
                                                            g_o_clean.p, (float *)g_lse_clean.p);
        fcl_context_destroy(ctx);
        if (st != FCL_OK) {
            printf("clean forward: %s\n", fcl_status_string(st));
            return 1;
        }
    }

    /* the clean run: every call succeeds; count them */
    run clean;
    fault.fail_at = 0;
    fault.counting = 1;
    const int silent = run_silently(&clean);
    fault.counting = 0;
    const long total_cl = fault.calls[FAULT_OPENCL], total_host = fault.calls[FAULT_HOST_ALLOC];
    int ok = silent && fault.live_objects == 0;
    for (int s = 0; s < STEPS; ++s)
        if (clean.st[s] != FCL_OK) {
            printf("clean run: %s returned %s\n", step_names[s], fcl_status_string(clean.st[s]));
            ok = 0;
        }
    if (ok && (!same(&clean.out[OUT_O], &g_o_clean) || !same(&clean.out[OUT_LSE], &g_lse_clean))) {
        printf("clean run: the forward differs from the first one\n");
        ok = 0;
    }
    if (ok) {
        /* the decode's outputs are right (the other calls are checked by
         * test_variants; here they are only compared with themselves) */
        kv_state s = g_kv_state;
        s.o = clean.out[OUT_KV_O].p;
        s.lse = (float *)clean.out[OUT_KV_LSE].p;
        ok = kv_check_outputs(&g_kv, &s, "clean decode") &&
             memcmp(clean.out[OUT_KV_KC].p, s.kc_expect, clean.out[OUT_KV_KC].n) == 0 &&
             memcmp(clean.out[OUT_KV_VC].p, s.vc_expect, clean.out[OUT_KV_VC].n) == 0;
    }
    if (!ok) {
        printf("the clean run failed\n");
        return 1;
    }
    printf("clean run: %ld OpenCL calls, %ld host allocations\n", total_cl, total_host);

    long injected[2] = {0, 0};
    ok = sweep(FAULT_OPENCL, &clean, total_cl, &injected[0]);
    ok &= sweep(FAULT_HOST_ALLOC, &clean, total_host, &injected[1]);
    printf("OpenCL calls: %ld reached at %d call sites, %ld failures injected\n", total_cl,
           fault.num_sites[FAULT_OPENCL], injected[0]);
    printf("host allocations: %ld reached at %d call sites, %ld failures injected\n", total_host,
           fault.num_sites[FAULT_HOST_ALLOC], injected[1]);
    run_free(&clean);
    for (int i = 0; i < INPUTS; ++i)
        free(g_in[i].p);
    free(g_o_clean.p);
    free(g_lse_clean.p);
    kv_free(&g_kv_state);
    printf(ok ? "PASS\n" : "FAIL\n");
    return ok ? 0 : 1;
}
