/* probe_tma.c - can an OpenCL kernel on the H100 use the tensor memory
 * accelerator (cp.async.bulk.tensor from a tensor map, 128-byte swizzle),
 * and does it move K/V tiles faster than cp.async?  Scratch probe for
 * issue 27 (NOTES run 36), not part of the library.
 *   1. the device address of a cl_mem (a kernel stores its pointer)
 *   2. a tensor map encoded on the host (libcuda's cuTensorMapEncodeTiled,
 *      dlopen'ed) with that address: one 64 x 64 fp16 box, swizzle 128B,
 *      checked element by element against the swizzle's formula
 *   3. the same with the address put into a template map by the kernel
 *      (tensormap.replace + tensormap.cp_fenceproxy)
 *   4. bandwidth: work-groups stream 64-row x 128-column fp16 tiles
 *      through a 4-stage ring, by TMA (one work-item issues) and by
 *      cp.async (16 bytes a work-item), no math; GB/s of each */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *src =
"#define SM(x) \"// @sm90a@ \" x\n"
"__kernel void addr(__global const ushort *p, __global ulong *out) { out[0] = (ulong)p; }\n"
"inline void bar_init(uint b, uint n) { asm volatile(SM(\"mbarrier.init.shared.b64 [%0], %1;\") :: \"r\"(b), \"r\"(n) : \"memory\"); }\n"
"inline void bar_expect(uint b, uint bytes) { asm volatile(SM(\"mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\") :: \"r\"(b), \"r\"(bytes) : \"memory\"); }\n"
"inline void bar_wait(uint b, uint parity) { uint done = 0; while (!done) asm volatile(\"{ .reg .pred p;\\n\" SM(\"mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\") \"\\nselp.u32 %0, 1, 0, p; }\" : \"=r\"(done) : \"r\"(b), \"r\"(parity) : \"memory\"); }\n"
"inline void tma2d(uint dst, ulong map, int c0, int c1, uint b) {\n"
"  asm volatile(SM(\"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\") :: \"r\"(dst), \"l\"(map), \"r\"(c0), \"r\"(c1), \"r\"(b) : \"memory\"); }\n"
"__kernel __attribute__((reqd_work_group_size(128,1,1)))\n"
"void one_box(__global const ulong *map, int c0, int c1, __global ushort *out, __global uint *base) {\n"
"  __local ushort tile[64 * 64] __attribute__((aligned(1024)));\n"
"  __local ulong bar __attribute__((aligned(8)));\n"
"  const int t = get_local_id(0); const uint sb = (uint)(size_t)&bar, st = (uint)(size_t)tile;\n"
"  if (t == 0) bar_init(sb, 1);\n"
"  barrier(CLK_LOCAL_MEM_FENCE);\n"
"  if (t == 0) { bar_expect(sb, 8192); tma2d(st, (ulong)map, c0, c1, sb); }\n"
"  bar_wait(sb, 0);\n"
"  for (int i = t; i < 64 * 64; i += 128) out[i] = tile[i];\n"
"  if (t == 0) base[0] = st;\n"
"}\n"
"/* the address replaced in a template map, on the device */\n"
"__kernel __attribute__((reqd_work_group_size(128,1,1)))\n"
"void one_box_dev(__global const ulong *tmpl, __global const ushort *K, __global ulong *scratch, int c0, int c1, __global ushort *out) {\n"
"  __local ushort tile[64 * 64] __attribute__((aligned(1024)));\n"
"  __local ulong smap[16] __attribute__((aligned(128)));\n"
"  __local ulong bar __attribute__((aligned(8)));\n"
"  const int t = get_local_id(0); const uint sb = (uint)(size_t)&bar, st = (uint)(size_t)tile, sm = (uint)(size_t)smap;\n"
"  if (t < 16) smap[t] = tmpl[t];\n"
"  if (t == 0) bar_init(sb, 1);\n"
"  barrier(CLK_LOCAL_MEM_FENCE);\n"
"  __global ulong *g = scratch + 16 * get_group_id(0);\n"
"  if (t == 0) asm volatile(SM(\"tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;\") :: \"r\"(sm), \"l\"((ulong)K) : \"memory\");\n"
"  barrier(CLK_LOCAL_MEM_FENCE);\n"
"  if (t < 32) asm volatile(SM(\"tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%0], [%1], 128;\") :: \"l\"((ulong)g), \"r\"(sm) : \"memory\");\n"
"  if (t == 0) { asm volatile(SM(\"fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\") :: \"l\"((ulong)g) : \"memory\");\n"
"               bar_expect(sb, 8192); tma2d(st, (ulong)g, c0, c1, sb); }\n"
"  bar_wait(sb, 0);\n"
"  for (int i = t; i < 64 * 64; i += 128) out[i] = tile[i];\n"
"}\n"
"/* bandwidth: tiles of 64 rows x 128 columns (two 64 x 64 boxes, 16 KiB), 4 stages */\n"
"__kernel __attribute__((reqd_work_group_size(128,1,1)))\n"
"void bw_tma(__global const ulong *map, int tiles, int rows, __global float *sink) {\n"
"  __local ushort ring[4][2 * 64 * 64] __attribute__((aligned(1024)));\n"
"  __local ulong bars[4] __attribute__((aligned(8)));\n"
"  const int t = get_local_id(0);\n"
"  const int r0 = (int)((get_group_id(0) * (long)tiles * 64) % rows);\n"
"  if (t < 4) bar_init((uint)(size_t)&bars[t], 1);\n"
"  barrier(CLK_LOCAL_MEM_FENCE);\n"
"  if (t == 0) for (int s = 0; s < 4 && s < tiles; ++s) { uint b = (uint)(size_t)&bars[s]; bar_expect(b, 16384);\n"
"    int r = (r0 + s * 64) % rows; tma2d((uint)(size_t)ring[s], (ulong)map, 0, r, b); tma2d((uint)(size_t)(ring[s] + 4096), (ulong)map, 64, r, b); }\n"
"  float acc = 0.0f;\n"
"  for (int i = 0; i < tiles; ++i) {\n"
"    const int s = i & 3; bar_wait((uint)(size_t)&bars[s], (i >> 2) & 1);\n"
"    acc += (float)ring[s][t * 64];\n"
"    barrier(CLK_LOCAL_MEM_FENCE);\n"
"    if (t == 0 && i + 4 < tiles) { uint b = (uint)(size_t)&bars[s]; bar_expect(b, 16384);\n"
"      int r = (r0 + (i + 4) * 64) % rows; tma2d((uint)(size_t)ring[s], (ulong)map, 0, r, b); tma2d((uint)(size_t)(ring[s] + 4096), (ulong)map, 64, r, b); }\n"
"  }\n"
"  sink[get_global_id(0)] = acc;\n"
"}\n"
"inline void cp16(uint dst, __global const ushort *src) { asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"(dst), \"l\"(src) : \"memory\"); }\n"
"__kernel __attribute__((reqd_work_group_size(128,1,1)))\n"
"void bw_cpasync(__global const ushort *K, int tiles, int rows, __global float *sink) {\n"
"  __local ushort ring[4][64 * 128] __attribute__((aligned(1024)));\n"
"  const int t = get_local_id(0);\n"
"  const int r0 = (int)((get_group_id(0) * (long)tiles * 64) % rows);\n"
"  for (int s = 0; s < 4; ++s) { int r = (r0 + s * 64) % rows;\n"
"    for (int k = 0; k < 8; ++k) { int e = t + 128 * k, row = e / 16, ch = e % 16;\n"
"      cp16((uint)(size_t)(ring[s] + row * 128 + ((ch ^ (row & 7)) & 15) * 8), K + (long)(r + row) * 128 + ch * 8); }\n"
"    asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n"
"  float acc = 0.0f;\n"
"  for (int i = 0; i < tiles; ++i) {\n"
"    const int s = i & 3;\n"
"    asm volatile(\"cp.async.wait_group 3;\" ::: \"memory\");\n"
"    barrier(CLK_LOCAL_MEM_FENCE);\n"
"    acc += (float)ring[s][t * 64];\n"
"    barrier(CLK_LOCAL_MEM_FENCE);\n"
"    int r = (r0 + (i + 4) * 64) % rows;\n"
"    if (i + 4 < tiles) for (int k = 0; k < 8; ++k) { int e = t + 128 * k, row = e / 16, ch = e % 16;\n"
"      cp16((uint)(size_t)(ring[s] + row * 128 + ((ch ^ (row & 7)) & 15) * 8), K + (long)(r + row) * 128 + ch * 8); }\n"
"    asm volatile(\"cp.async.commit_group;\" ::: \"memory\");\n"
"  }\n"
"  sink[get_global_id(0)] = acc;\n"
"}\n"
"/* attention-like: K as [rows][16 heads][128], work-group g reads head g % 16 from row 0 */\n"
"__kernel __attribute__((reqd_work_group_size(128,1,1)))\n"
"void bw_tma_s(__global const ulong *map, int tiles, int rows, __global float *sink) {\n"
"  __local ushort ring[4][2 * 64 * 64] __attribute__((aligned(1024)));\n"
"  __local ulong bars[4] __attribute__((aligned(8)));\n"
"  const int t = get_local_id(0), col = (get_group_id(0) % 16) * 128;\n"
"  if (t < 4) bar_init((uint)(size_t)&bars[t], 1);\n"
"  barrier(CLK_LOCAL_MEM_FENCE);\n"
"  if (t == 0) for (int s = 0; s < 4 && s < tiles; ++s) { uint b = (uint)(size_t)&bars[s]; bar_expect(b, 16384);\n"
"    int r = (s * 64) % rows; tma2d((uint)(size_t)ring[s], (ulong)map, col, r, b); tma2d((uint)(size_t)(ring[s] + 4096), (ulong)map, col + 64, r, b); }\n"
"  float acc = 0.0f;\n"
"  for (int i = 0; i < tiles; ++i) {\n"
"    const int s = i & 3; bar_wait((uint)(size_t)&bars[s], (i >> 2) & 1);\n"
"    acc += (float)ring[s][t * 64];\n"
"    barrier(CLK_LOCAL_MEM_FENCE);\n"
"    if (t == 0 && i + 4 < tiles) { uint b = (uint)(size_t)&bars[s]; bar_expect(b, 16384);\n"
"      int r = ((i + 4) * 64) % rows; tma2d((uint)(size_t)ring[s], (ulong)map, col, r, b); tma2d((uint)(size_t)(ring[s] + 4096), (ulong)map, col + 64, r, b); }\n"
"  }\n"
"  sink[get_global_id(0)] = acc;\n"
"}\n"
"__kernel __attribute__((reqd_work_group_size(128,1,1)))\n"
"void bw_cpasync_s(__global const ushort *K, int tiles, int rows, __global float *sink) {\n"
"  __local ushort ring[4][64 * 128] __attribute__((aligned(1024)));\n"
"  const int t = get_local_id(0), col = (get_group_id(0) % 16) * 128;\n"
"  for (int s = 0; s < 4; ++s) { int r = (s * 64) % rows;\n"
"    for (int k = 0; k < 8; ++k) { int e = t + 128 * k, row = e / 16, ch = e % 16;\n"
"      cp16((uint)(size_t)(ring[s] + row * 128 + ((ch ^ (row & 7)) & 15) * 8), K + (long)(r + row) * 2048 + col + ch * 8); }\n"
"    asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n"
"  float acc = 0.0f;\n"
"  for (int i = 0; i < tiles; ++i) {\n"
"    const int s = i & 3;\n"
"    asm volatile(\"cp.async.wait_group 3;\" ::: \"memory\");\n"
"    barrier(CLK_LOCAL_MEM_FENCE);\n"
"    acc += (float)ring[s][t * 64];\n"
"    barrier(CLK_LOCAL_MEM_FENCE);\n"
"    int r = ((i + 4) * 64) % rows;\n"
"    if (i + 4 < tiles) for (int k = 0; k < 8; ++k) { int e = t + 128 * k, row = e / 16, ch = e % 16;\n"
"      cp16((uint)(size_t)(ring[s] + row * 128 + ((ch ^ (row & 7)) & 15) * 8), K + (long)(r + row) * 2048 + col + ch * 8); }\n"
"    asm volatile(\"cp.async.commit_group;\" ::: \"memory\");\n"
"  }\n"
"  sink[get_global_id(0)] = acc;\n"
"}\n";

#define CK(e)                                                                      \
    do {                                                                           \
        cl_int e_ = (e);                                                           \
        if (e_ != CL_SUCCESS) {                                                    \
            fprintf(stderr, "%s:%d OpenCL error %d\n", __FILE__, __LINE__, e_);    \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

typedef int (*encode_fn)(void *map, int dtype, unsigned rank, void *addr, const uint64_t *dims,
                         const uint64_t *strides, const unsigned *box, const unsigned *estr,
                         int interleave, int swizzle, int l2, int oob);
typedef int (*init_fn)(unsigned);

static cl_context ctx;
static cl_command_queue q;
static cl_device_id dev;

static cl_program build(void)
{
    cl_int e;
    char log[65536];
    size_t ls;
    cl_program pr = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
    CK(e);
    e = clBuildProgram(pr, 1, &dev, "", NULL, NULL);
    clGetProgramBuildInfo(pr, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, &ls);
    printf("stage 1 rc=%d %.300s\n", e, log);
    CK(e);
    size_t bs;
    CK(clGetProgramInfo(pr, CL_PROGRAM_BINARY_SIZES, sizeof bs, &bs, NULL));
    char *b = malloc(bs + 1);
    CK(clGetProgramInfo(pr, CL_PROGRAM_BINARIES, sizeof b, &b, NULL));
    b[bs] = 0;
    char *nb = malloc(bs + 4096), *w = nb;
    const char *r = b;
    while (*r) {
        if (!strncmp(r, ".target sm_90", 13) && r[13] != 'a') {
            w += sprintf(w, ".target sm_90a");
            r += 13;
            continue;
        }
        if (!strncmp(r, ".version ", 9)) {
            int maj = 0, mn = 0;
            sscanf(r + 9, "%d.%d", &maj, &mn);
            printf("PTX .version %d.%d\n", maj, mn);
            if (maj * 10 + mn < 83) {
                w += sprintf(w, ".version 8.3");
                r += 9;
                while (*r && *r != '\n') ++r;
                continue;
            }
        }
        if (!strncmp(r, "// @sm90a@ ", 11)) {
            r += 11;
            continue;
        }
        *w++ = *r++;
    }
    *w = 0;
    size_t nbs = strlen(nb);
    const unsigned char *bins[1] = {(const unsigned char *)nb};
    cl_int bst;
    cl_program p2 = clCreateProgramWithBinary(ctx, 1, &dev, &nbs, bins, &bst, &e);
    CK(e);
    e = clBuildProgram(p2, 1, &dev, "-cl-nv-verbose", NULL, NULL);
    clGetProgramBuildInfo(p2, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, &ls);
    printf("stage 2 rc=%d log: %.3000s\n", e, log);
    CK(e);
    return p2;
}

static double run_ms(cl_kernel k, size_t groups)
{
    cl_event ev;
    size_t gs = groups * 128, l = 128;
    CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &gs, &l, 0, NULL, &ev));
    CK(clWaitForEvents(1, &ev));
    cl_ulong a, b;
    CK(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL));
    CK(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL));
    clReleaseEvent(ev);
    return (double)(b - a) * 1e-6;
}

/* element (r, c) of a 64 x 64 fp16 box, swizzle 128B: 16-byte chunk c / 8 of
 * row r at chunk (c / 8) ^ (r % 8) of its 128-byte row (base 1024-aligned) */
static int check_box(const uint16_t *got, int c0, int c1, int cols)
{
    int bad = 0;
    for (int r = 0; r < 64; ++r)
        for (int c = 0; c < 64; ++c) {
            const int at = r * 64 + (((c >> 3) ^ (r & 7)) << 3) + (c & 7);
            const uint16_t want = (uint16_t)(((c1 + r) * cols + c0 + c) & 0xFFFF);
            if (got[at] != want && bad++ < 5)
                printf("  (%d,%d): got %u want %u\n", r, c, got[at], want);
        }
    return bad;
}

int main(void)
{
    cl_uint np;
    cl_platform_id ps[8];
    CK(clGetPlatformIDs(8, ps, &np));
    dev = NULL;
    for (cl_uint i = 0; i < np && !dev; i++)
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_GPU, 1, &dev, NULL) != CL_SUCCESS) dev = NULL;
    if (!dev) {
        printf("no GPU\n");
        return 1;
    }
    cl_int e;
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
    CK(e);
    q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &e);
    CK(e);
    cl_program pr = build();

    void *cu = dlopen("libcuda.so.1", RTLD_NOW);
    printf("libcuda.so.1: %s\n", cu ? "loaded" : dlerror());
    if (!cu) return 1;
    init_fn cuinit = (init_fn)dlsym(cu, "cuInit");
    encode_fn enc = (encode_fn)dlsym(cu, "cuTensorMapEncodeTiled");
    printf("cuInit %p cuTensorMapEncodeTiled %p\n", (void *)cuinit, (void *)enc);
    if (!enc) return 1;

    /* K: rows x 128 fp16, value (row * 128 + col) mod 2^16 */
    const int cols = 128, rows = 1 << 17; /* 32 MiB */
    uint16_t *h = malloc((size_t)rows * cols * 2);
    for (size_t i = 0; i < (size_t)rows * cols; ++i) h[i] = (uint16_t)(i & 0xFFFF);
    cl_mem K = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)rows * cols * 2, h, &e);
    CK(e);
    cl_mem A = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 8, NULL, &e);
    CK(e);
    cl_kernel ka = clCreateKernel(pr, "addr", &e);
    CK(e);
    CK(clSetKernelArg(ka, 0, sizeof K, &K));
    CK(clSetKernelArg(ka, 1, sizeof A, &A));
    size_t one = 1;
    CK(clEnqueueNDRangeKernel(q, ka, 1, NULL, &one, &one, 0, NULL, NULL));
    uint64_t kaddr;
    CK(clEnqueueReadBuffer(q, A, CL_TRUE, 0, 8, &kaddr, 0, NULL, NULL));
    printf("K's device address 0x%llx\n", (unsigned long long)kaddr);

    uint64_t map[16] __attribute__((aligned(64)));
    const uint64_t dims[2] = {(uint64_t)cols, (uint64_t)rows}, strides[1] = {(uint64_t)cols * 2};
    const unsigned box[2] = {64, 64}, estr[2] = {1, 1};
    int rc0 = cuinit ? cuinit(0) : -1;
    {
        /* the encoder wants a current CUDA context: the device's primary one */
        int (*devget)(int *, int) = (int (*)(int *, int))dlsym(cu, "cuDeviceGet");
        int (*retain)(void **, int) = (int (*)(void **, int))dlsym(cu, "cuDevicePrimaryCtxRetain");
        int (*setcur)(void *) = (int (*)(void *))dlsym(cu, "cuCtxSetCurrent");
        int cd = -1;
        void *cc = NULL;
        int r1 = devget ? devget(&cd, 0) : -1;
        int r2 = retain ? retain(&cc, cd) : -1;
        int r3 = setcur ? setcur(cc) : -1;
        printf("cuDeviceGet %d, primary context %d, set current %d\n", r1, r2, r3);
    }
    int rc = enc(map, 6 /* FLOAT16 */, 2, (void *)(uintptr_t)kaddr, dims, strides, box, estr, 0,
                 3 /* SWIZZLE_128B */, 2 /* L2 128B */, 0);
    printf("cuInit rc=%d encode rc=%d\n", rc0, rc);
    if (rc) return 1;
    cl_mem M = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, 128, map, &e);
    CK(e);
    cl_mem O = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * 64 * 2, NULL, &e);
    CK(e);
    cl_mem Bs = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4, NULL, &e);
    CK(e);
    uint16_t got[64 * 64];
    {
        cl_kernel k = clCreateKernel(pr, "one_box", &e);
        CK(e);
        int c0 = 64, c1 = 1000;
        CK(clSetKernelArg(k, 0, sizeof M, &M));
        CK(clSetKernelArg(k, 1, sizeof c0, &c0));
        CK(clSetKernelArg(k, 2, sizeof c1, &c1));
        CK(clSetKernelArg(k, 3, sizeof O, &O));
        CK(clSetKernelArg(k, 4, sizeof Bs, &Bs));
        run_ms(k, 1);
        uint32_t base;
        CK(clEnqueueReadBuffer(q, O, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
        CK(clEnqueueReadBuffer(q, Bs, CL_TRUE, 0, 4, &base, 0, NULL, NULL));
        printf("host-encoded map: tile at shared 0x%x, %d of 4096 elements differ from the swizzle formula\n",
               base, check_box(got, c0, c1, cols));
    }
    {
        /* template: the same map encoded at another (aligned) address */
        uint64_t tmpl[16] __attribute__((aligned(64)));
        rc = enc(tmpl, 6, 2, (void *)(uintptr_t)0x100000, dims, strides, box, estr, 0, 3, 2, 0);
        printf("template encode rc=%d\n", rc);
        cl_mem T = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, 128, tmpl, &e);
        CK(e);
        cl_mem S = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 128 * 4, NULL, &e);
        CK(e);
        cl_kernel k = clCreateKernel(pr, "one_box_dev", &e);
        CK(e);
        int c0 = 0, c1 = 77;
        CK(clSetKernelArg(k, 0, sizeof T, &T));
        CK(clSetKernelArg(k, 1, sizeof K, &K));
        CK(clSetKernelArg(k, 2, sizeof S, &S));
        CK(clSetKernelArg(k, 3, sizeof c0, &c0));
        CK(clSetKernelArg(k, 4, sizeof c1, &c1));
        CK(clSetKernelArg(k, 5, sizeof O, &O));
        memset(got, 0, sizeof got);
        CK(clEnqueueWriteBuffer(q, O, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
        run_ms(k, 1);
        CK(clEnqueueReadBuffer(q, O, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
        printf("device-replaced address: %d of 4096 elements differ\n", check_box(got, c0, c1, cols));
    }
    /* bandwidth, 4 stages of 16 KiB; K 32 MiB (L2-resident in part), many work-groups */
    cl_mem sink = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096 * 128 * 4, NULL, &e);
    CK(e);
    cl_kernel kt = clCreateKernel(pr, "bw_tma", &e);
    CK(e);
    cl_kernel kc = clCreateKernel(pr, "bw_cpasync", &e);
    CK(e);
    const int tiles = 256;
    for (int pass = 0; pass < 2; ++pass)
        for (size_t groups = 132; groups <= 1056; groups *= 2) {
            CK(clSetKernelArg(kt, 0, sizeof M, &M));
            CK(clSetKernelArg(kt, 1, sizeof tiles, &tiles));
            CK(clSetKernelArg(kt, 2, sizeof rows, &rows));
            CK(clSetKernelArg(kt, 3, sizeof sink, &sink));
            CK(clSetKernelArg(kc, 0, sizeof K, &K));
            CK(clSetKernelArg(kc, 1, sizeof tiles, &tiles));
            CK(clSetKernelArg(kc, 2, sizeof rows, &rows));
            CK(clSetKernelArg(kc, 3, sizeof sink, &sink));
            run_ms(kt, groups);
            run_ms(kc, groups);
            double bt = 1e9, bc = 1e9;
            for (int i = 0; i < 5; ++i) {
                double a = run_ms(kt, groups), b = run_ms(kc, groups);
                if (a < bt) bt = a;
                if (b < bc) bc = b;
            }
            const double gb = (double)groups * tiles * 16384 / 1e9;
            printf("pass %d groups %4zu: TMA %.3f ms %.0f GB/s | cp.async %.3f ms %.0f GB/s | TMA/cp.async %.2fx\n",
                   pass, groups, bt, gb / bt * 1e3, bc, gb / bc * 1e3, bc / bt);
        }
    {
        /* attention-like strides: 16 heads of 128 columns a row, 8192 rows (4096-byte rows) */
        const uint64_t sd[2] = {2048, 8192}, ss[1] = {4096};
        uint64_t smap[16] __attribute__((aligned(64)));
        rc = enc(smap, 6, 2, (void *)(uintptr_t)kaddr, sd, ss, box, estr, 0, 3, 2, 0);
        printf("strided map encode rc=%d\n", rc);
        cl_mem SM_ = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, 128, smap, &e);
        CK(e);
        cl_kernel k1 = clCreateKernel(pr, "bw_tma_s", &e);
        CK(e);
        cl_kernel k2 = clCreateKernel(pr, "bw_cpasync_s", &e);
        CK(e);
        const int st = 128, sr = 8192;
        for (int pass = 0; pass < 2; ++pass)
            for (size_t groups = 132; groups <= 528; groups *= 2) {
                CK(clSetKernelArg(k1, 0, sizeof SM_, &SM_));
                CK(clSetKernelArg(k1, 1, sizeof st, &st));
                CK(clSetKernelArg(k1, 2, sizeof sr, &sr));
                CK(clSetKernelArg(k1, 3, sizeof sink, &sink));
                CK(clSetKernelArg(k2, 0, sizeof K, &K));
                CK(clSetKernelArg(k2, 1, sizeof st, &st));
                CK(clSetKernelArg(k2, 2, sizeof sr, &sr));
                CK(clSetKernelArg(k2, 3, sizeof sink, &sink));
                run_ms(k1, groups);
                run_ms(k2, groups);
                double bt = 1e9, bc = 1e9;
                for (int i = 0; i < 5; ++i) {
                    double a = run_ms(k1, groups), b = run_ms(k2, groups);
                    if (a < bt) bt = a;
                    if (b < bc) bc = b;
                }
                const double gb = (double)groups * st * 16384 / 1e9;
                printf("strided pass %d groups %4zu: TMA %.3f ms %.0f GB/s | cp.async %.3f ms %.0f GB/s | TMA/cp.async %.2fx\n",
                       pass, groups, bt, gb / bt * 1e3, bc, gb / bc * 1e3, bc / bt);
            }
    }
    return 0;
}
