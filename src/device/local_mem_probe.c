/* local_mem_probe.c - how much on-chip memory can one work-group really use?
 *
 * CL_DEVICE_LOCAL_MEM_SIZE is the limit for __local memory passed as a kernel
 * argument.  Some drivers allow more for __local arrays whose size is fixed at
 * compile time (NVIDIA reports 48 KiB but an H100 runs 227 KiB arrays), which is
 * how flashcl's kernels declare their tiles.  So we ask the device: build a
 * kernel with a static __local array of the candidate size, check what the
 * driver says it uses, run it and verify every word.  The search doubles until
 * a size fails, then bisects.  It runs in a context of its own, so that a
 * failed launch cannot disturb the caller's context.
 */
#include "device/device.h"

#include <stdio.h>
#include <stdlib.h>

static const char *probe_source =
    "__kernel void fcl_probe_local(__global uint *wrong_out)\n"
    "{\n"
    "    __local uint buf[PROBE_WORDS];\n"
    "    const uint lid = get_local_id(0), n = get_local_size(0);\n"
    "    for (uint i = lid; i < PROBE_WORDS; i += n) buf[i] = i * 2654435761u + 12345u;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    uint wrong = 0;\n"
    "    for (uint i = lid; i < PROBE_WORDS; i += n) {\n"
    "        uint j = PROBE_WORDS - 1u - i;\n"
    "        if (buf[j] != j * 2654435761u + 12345u) ++wrong;\n"
    "    }\n"
    "    wrong_out[lid] = wrong;\n"
    "}\n";

enum { PROBE_THREADS = 64, PROBE_GRANULE = 256 };
#define PROBE_MAX_BYTES (4ull << 20)

/* 1 if `bytes` of static __local memory build, are accounted and run right. */
static int try_size(cl_device_id dev, uint64_t bytes)
{
    int ok = 0;
    cl_int err = CL_SUCCESS;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return 0;
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    cl_program prog = NULL;
    cl_kernel kern = NULL;
    cl_mem out = NULL;
    if (err != CL_SUCCESS)
        goto done;
    prog = clCreateProgramWithSource(ctx, 1, &probe_source, NULL, &err);
    if (err != CL_SUCCESS)
        goto done;
    char opts[64];
    snprintf(opts, sizeof opts, "-DPROBE_WORDS=%lluu", (unsigned long long)(bytes / 4));
    if (clBuildProgram(prog, 1, &dev, opts, NULL, NULL) != CL_SUCCESS)
        goto done;
    kern = clCreateKernel(prog, "fcl_probe_local", &err);
    if (err != CL_SUCCESS)
        goto done;
    cl_ulong used = 0;
    size_t max_wg = 0;
    if (clGetKernelWorkGroupInfo(kern, dev, CL_KERNEL_LOCAL_MEM_SIZE, sizeof used, &used, NULL) !=
            CL_SUCCESS ||
        used < bytes)
        goto done;
    if (clGetKernelWorkGroupInfo(kern, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof max_wg, &max_wg,
                                 NULL) != CL_SUCCESS ||
        max_wg == 0)
        goto done;
    size_t threads = max_wg < PROBE_THREADS ? max_wg : PROBE_THREADS;
    out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, threads * sizeof(cl_uint), NULL, &err);
    if (err != CL_SUCCESS)
        goto done;
    if (clSetKernelArg(kern, 0, sizeof out, &out) != CL_SUCCESS)
        goto done;
    if (clEnqueueNDRangeKernel(q, kern, 1, NULL, &threads, &threads, 0, NULL, NULL) != CL_SUCCESS)
        goto done;
    cl_uint wrong[PROBE_THREADS];
    if (clEnqueueReadBuffer(q, out, CL_TRUE, 0, threads * sizeof(cl_uint), wrong, 0, NULL, NULL) !=
        CL_SUCCESS)
        goto done;
    ok = 1;
    for (size_t i = 0; i < threads; ++i)
        if (wrong[i] != 0)
            ok = 0;
done:
    if (out)
        clReleaseMemObject(out);
    if (kern)
        clReleaseKernel(kern);
    if (prog)
        clReleaseProgram(prog);
    if (q)
        clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return ok;
}

fcl_status fcl_probe_local_mem(cl_device_id device, uint64_t reported, uint64_t *usable)
{
    *usable = reported;
    if (reported == 0)
        return FCL_OK;
    uint64_t good = reported, bad = 0;
    /* Grow until a size fails (or the cap is reached)... */
    for (uint64_t size = reported * 2; size <= PROBE_MAX_BYTES; size *= 2) {
        if (!try_size(device, size)) {
            bad = size;
            break;
        }
        good = size;
    }
    if (bad == 0) {
        *usable = good;
        return FCL_OK;
    }
    /* ...then bisect between the last good and the first bad size. */
    while (bad - good > PROBE_GRANULE) {
        uint64_t mid = good + (bad - good) / 2;
        mid -= mid % PROBE_GRANULE;
        if (mid <= good)
            break;
        if (try_size(device, mid))
            good = mid;
        else
            bad = mid;
    }
    *usable = good;
    return FCL_OK;
}
