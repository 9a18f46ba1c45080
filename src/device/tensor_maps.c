/* tensor_maps.c - the tensor map template of the wgmma forward's bulk
 * tensor copies on an sm_90 device (cl/warpgroup_ptx.cl, FCL_WG_TMA).
 *
 * The tensor memory accelerator copies a box of a 2-D tensor into __local
 * memory as a tensor map (128 opaque bytes) describes it.  Only NVIDIA's
 * CUDA driver writes such a map (cuTensorMapEncodeTiled); OpenCL has no
 * such call.  So once per context, where the driver library is found, one
 * template is encoded here: 16-bit elements, boxes of 64 elements (128
 * bytes, the 128-byte swizzle's row) by some rows, zeros out of bounds,
 * with placeholder address, sizes and stride.  Each work-group of the
 * forward copies it and writes in its own K or V address, sizes, row
 * stride and box rows (tensormap.replace), so no call needs the host to
 * know a device address (NOTES.md, run 36: the probe of this on an H100).
 *
 * The template is kept on the host and written to the start of the
 * workspace that holds the work-groups' maps whenever that workspace is
 * made (fcl_tensor_maps_buffer).  Where the driver library, its entry
 * points, an sm_90 device it lists at the OpenCL device's PCI bus, or the
 * encoding is missing, the context has no template and the forward loads
 * K and V by cp.async: nothing is reported, the plan's reason says which
 * loads it uses. */
#include "device/context.h"
#include "device/device.h"

#include <dlfcn.h>
#include <string.h>

/* The CUDA driver API as far as it is used here: its stable C ABI (ints
 * for CUresult and CUdevice, pointers for CUcontext), so no CUDA header is
 * needed to build. */
typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_device_get_count_fn)(int *count);
typedef int (*cu_device_get_fn)(int *device, int ordinal);
typedef int (*cu_device_get_attribute_fn)(int *value, int attribute, int device);
typedef int (*cu_primary_ctx_retain_fn)(void **ctx, int device);
typedef int (*cu_primary_ctx_release_fn)(int device);
typedef int (*cu_ctx_push_fn)(void *ctx);
typedef int (*cu_ctx_pop_fn)(void **ctx);
typedef int (*cu_encode_tiled_fn)(void *map, int dtype, unsigned rank, void *address,
                                  const uint64_t *dims, const uint64_t *strides,
                                  const unsigned *box, const unsigned *element_strides,
                                  int interleave, int swizzle, int l2_promotion, int oob_fill);

enum {
    CU_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_ATTRIBUTE_CC_MAJOR = 75,
    CU_MAP_UINT16 = 1,          /* fp16 and bf16 alike: a copy moves bits */
    CU_MAP_INTERLEAVE_NONE = 0,
    CU_MAP_SWIZZLE_128B = 3,
    CU_MAP_L2_PROMOTION_256B = 3,
    CU_MAP_OOB_FILL_ZERO = 0
};
/* cl_nv_device_attribute_query */
#define FCL_CL_DEVICE_PCI_BUS_ID_NV 0x4008

typedef struct cuda_api {
    cu_init_fn init;
    cu_device_get_count_fn device_count;
    cu_device_get_fn device_get;
    cu_device_get_attribute_fn attribute;
    cu_primary_ctx_retain_fn retain;
    cu_primary_ctx_release_fn release;
    cu_ctx_push_fn push;
    cu_ctx_pop_fn pop;
    cu_encode_tiled_fn encode;
} cuda_api;

/* dlsym's data pointer into a function pointer of the same size (POSIX's
 * contract for dlsym) */
static bool symbol(void *lib, const char *name, void *fn, size_t size)
{
    void *p = dlsym(lib, name);
    if (p == NULL || size != sizeof p)
        return false;
    memcpy(fn, &p, size);
    return true;
}

static bool load_api(void *lib, cuda_api *api)
{
#define FCL_CU_SYM(field, name) symbol(lib, name, &api->field, sizeof api->field)
    return FCL_CU_SYM(init, "cuInit") && FCL_CU_SYM(device_count, "cuDeviceGetCount") &&
           FCL_CU_SYM(device_get, "cuDeviceGet") &&
           FCL_CU_SYM(attribute, "cuDeviceGetAttribute") &&
           FCL_CU_SYM(retain, "cuDevicePrimaryCtxRetain") &&
           FCL_CU_SYM(release, "cuDevicePrimaryCtxRelease_v2") &&
           FCL_CU_SYM(push, "cuCtxPushCurrent_v2") && FCL_CU_SYM(pop, "cuCtxPopCurrent_v2") &&
           FCL_CU_SYM(encode, "cuTensorMapEncodeTiled");
#undef FCL_CU_SYM
}

/* The CUDA device of compute capability 9 at the OpenCL device's PCI bus
 * (any such device where OpenCL does not tell its bus), or -1. */
static int matching_device(const cuda_api *api, cl_device_id device)
{
    cl_uint bus = 0;
    const bool bus_known = clGetDeviceInfo(device, FCL_CL_DEVICE_PCI_BUS_ID_NV, sizeof bus, &bus,
                                           NULL) == CL_SUCCESS;
    int count = 0;
    if (api->device_count(&count) != 0)
        return -1;
    for (int i = 0; i < count; ++i) {
        int dev = -1, major = 0, dev_bus = -1;
        if (api->device_get(&dev, i) != 0 ||
            api->attribute(&major, CU_ATTRIBUTE_CC_MAJOR, dev) != 0 || major != 9 ||
            api->attribute(&dev_bus, CU_ATTRIBUTE_PCI_BUS_ID, dev) != 0)
            continue;
        if (!bus_known || (cl_uint)dev_bus == bus)
            return dev;
    }
    return -1;
}

/* The template's 128 bytes, encoded in the device's primary CUDA context
 * (the encoder needs a current one; it is made current for the call and
 * then given back). */
static bool encode_template(cl_device_id device, uint64_t map[FCL_MAP_TEMPLATE_BYTES / 8])
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return false;
    cuda_api api;
    bool ok = load_api(lib, &api) && api.init(0) == 0;
    const int dev = ok ? matching_device(&api, device) : -1;
    void *cu_ctx = NULL;
    ok = dev >= 0 && api.retain(&cu_ctx, dev) == 0;
    if (ok) {
        if (api.push(cu_ctx) == 0) {
            /* placeholders, all replaced by the kernel but box column 0
             * (64 elements: 128 bytes) and the element strides */
            const uint64_t dims[2] = {128, 1u << 20}, strides[1] = {256};
            const unsigned box[2] = {64, 64}, element_strides[2] = {1, 1};
            ok = api.encode(map, CU_MAP_UINT16, 2, (void *)(uintptr_t)0x100000, dims, strides,
                            box, element_strides, CU_MAP_INTERLEAVE_NONE, CU_MAP_SWIZZLE_128B,
                            CU_MAP_L2_PROMOTION_256B, CU_MAP_OOB_FILL_ZERO) == 0;
            void *popped = NULL;
            ok = api.pop(&popped) == 0 && ok;
        } else {
            ok = false;
        }
        api.release(dev);
    }
    dlclose(lib);
    return ok;
}

void fcl_tensor_maps_setup(fcl_context *ctx)
{
    ctx->has_map_template = 0;
    if (ctx->profile != NULL || ctx->info.vendor_id != FCL_VENDOR_ID_NVIDIA ||
        ctx->info.nv_compute_capability != 90)
        return;
    memset(ctx->map_template, 0, sizeof ctx->map_template);
    ctx->has_map_template = encode_template(ctx->device, ctx->map_template);
}

fcl_status fcl_tensor_maps_buffer(fcl_context *ctx, fcl_scratch_slot slot, size_t groups,
                                  cl_mem *out)
{
    const cl_mem before = ctx->scratch[slot].mem;
    FCL_TRY(fcl_scratch_get(ctx, slot,
                            FCL_MAP_TEMPLATE_BYTES + groups * 2 * FCL_MAP_TEMPLATE_BYTES, out));
    /* a new buffer (made before the old one is released: never the same
     * handle), which no command uses yet: the template goes in once */
    if (*out != before && ctx->has_map_template)
        return clEnqueueWriteBuffer(ctx->queue, *out, CL_TRUE, 0, FCL_MAP_TEMPLATE_BYTES,
                                    ctx->map_template, 0, NULL, NULL);
    return FCL_OK;
}
