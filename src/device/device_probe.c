/* device_probe.c - one checked probe of an OpenCL device into fcl_device_info.
 * Every clGetDeviceInfo is checked; vendor extensions are asked only when the
 * device lists them. */
#include "device/device.h"

#include <CL/cl_ext.h>
#include <stdlib.h>
#include <string.h>

#ifndef CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV
#define CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
#define CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV 0x4001
#define CL_DEVICE_WARP_SIZE_NV 0x4003
#endif
#ifndef CL_DEVICE_WAVEFRONT_WIDTH_AMD
#define CL_DEVICE_WAVEFRONT_WIDTH_AMD 0x4043
#endif
#ifndef CL_DEVICE_SUB_GROUP_SIZES_INTEL
#define CL_DEVICE_SUB_GROUP_SIZES_INTEL 0x4108
#endif

/* Reads a string property into a new heap string. */
static fcl_status query_string(cl_device_id dev, cl_device_info what, char **out)
{
    size_t n = 0;
    cl_int err = clGetDeviceInfo(dev, what, 0, NULL, &n);
    if (err != CL_SUCCESS)
        return err;
    char *s = fcl_host_calloc(n + 1, 1);
    if (s == NULL)
        return FCL_ERROR_OUT_OF_HOST_MEMORY;
    err = clGetDeviceInfo(dev, what, n, s, NULL);
    if (err != CL_SUCCESS) {
        free(s);
        return err;
    }
    *out = s;
    return FCL_OK;
}

static fcl_status query_string_into(cl_device_id dev, cl_device_info what, char *dst, size_t size)
{
    char *s = NULL;
    FCL_TRY(query_string(dev, what, &s));
    fcl_copy_string(dst, size, s);
    free(s);
    return FCL_OK;
}

#define QUERY(dev, what, var)                                              \
    do {                                                                   \
        cl_int e_ = clGetDeviceInfo((dev), (what), sizeof(var), &(var), NULL); \
        if (e_ != CL_SUCCESS)                                              \
            return e_;                                                     \
    } while (0)

static bool has_extension(const char *extensions, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = extensions; (p = strstr(p, name)) != NULL; p += n) {
        bool starts = (p == extensions) || p[-1] == ' ';
        bool ends = p[n] == '\0' || p[n] == ' ';
        if (starts && ends)
            return true;
    }
    return false;
}

static fcl_status probe_simd_width(cl_device_id dev, fcl_device_info *info)
{
    const char *ext = info->extensions;
    if (has_extension(ext, "cl_nv_device_attribute_query")) {
        cl_uint warp = 0, major = 0, minor = 0;
        QUERY(dev, CL_DEVICE_WARP_SIZE_NV, warp);
        QUERY(dev, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, major);
        QUERY(dev, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV, minor);
        info->simd_width = warp;
        info->nv_compute_capability = (int)(major * 10 + minor);
    } else if (has_extension(ext, "cl_amd_device_attribute_query")) {
        cl_uint wave = 0;
        QUERY(dev, CL_DEVICE_WAVEFRONT_WIDTH_AMD, wave);
        info->simd_width = wave;
    } else if (has_extension(ext, "cl_intel_required_subgroup_size")) {
        size_t n = 0;
        cl_int err = clGetDeviceInfo(dev, CL_DEVICE_SUB_GROUP_SIZES_INTEL, 0, NULL, &n);
        if (err != CL_SUCCESS)
            return err;
        size_t sizes[16] = {0};
        if (n > sizeof sizes)
            n = sizeof sizes;
        err = clGetDeviceInfo(dev, CL_DEVICE_SUB_GROUP_SIZES_INTEL, n, sizes, NULL);
        if (err != CL_SUCCESS)
            return err;
        /* The largest supported sub-group is what a work-group is made of. */
        for (size_t i = 0; i < n / sizeof(size_t); ++i)
            if (sizes[i] > info->simd_width)
                info->simd_width = (uint32_t)sizes[i];
    }
    return FCL_OK;
}

fcl_status fcl_probe_device(cl_device_id dev, fcl_device_info *info, char **extensions)
{
    memset(info, 0, sizeof *info);
    *extensions = NULL;

    FCL_TRY(query_string_into(dev, CL_DEVICE_NAME, info->name, sizeof info->name));
    FCL_TRY(query_string_into(dev, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor));
    FCL_TRY(query_string_into(dev, CL_DRIVER_VERSION, info->driver_version,
                              sizeof info->driver_version));
    FCL_TRY(query_string_into(dev, CL_DEVICE_VERSION, info->device_version,
                              sizeof info->device_version));
    cl_platform_id platform = NULL;
    QUERY(dev, CL_DEVICE_PLATFORM, platform);
    cl_int err = clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof info->platform_name,
                                   info->platform_name, NULL);
    if (err == CL_INVALID_VALUE) {
        /* A name longer than the field: fetch it whole, then truncate. */
        size_t n = 0;
        err = clGetPlatformInfo(platform, CL_PLATFORM_NAME, 0, NULL, &n);
        if (err != CL_SUCCESS)
            return err;
        char *s = fcl_host_calloc(n + 1, 1);
        if (s == NULL)
            return FCL_ERROR_OUT_OF_HOST_MEMORY;
        err = clGetPlatformInfo(platform, CL_PLATFORM_NAME, n, s, NULL);
        if (err == CL_SUCCESS)
            fcl_copy_string(info->platform_name, sizeof info->platform_name, s);
        free(s);
        if (err != CL_SUCCESS)
            return err;
    } else if (err != CL_SUCCESS) {
        return err;
    }
    info->platform_name[sizeof info->platform_name - 1] = '\0';

    cl_device_type type = 0;
    cl_uint vendor_id = 0, units = 0;
    size_t max_wg = 0;
    size_t item_sizes[3] = {0, 0, 0};
    cl_ulong global_mem = 0, max_alloc = 0, local_mem = 0;
    cl_device_local_mem_type local_type = CL_GLOBAL;
    cl_uint dims = 0;
    QUERY(dev, CL_DEVICE_TYPE, type);
    QUERY(dev, CL_DEVICE_VENDOR_ID, vendor_id);
    QUERY(dev, CL_DEVICE_MAX_COMPUTE_UNITS, units);
    QUERY(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, max_wg);
    QUERY(dev, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, dims);
    if (dims >= 1) {
        size_t n = dims < 3 ? dims : 3;
        size_t all[16] = {0};
        if (dims > 16)
            return FCL_ERROR_INVALID_VALUE;
        err = clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof(size_t), all, NULL);
        if (err != CL_SUCCESS)
            return err;
        memcpy(item_sizes, all, n * sizeof(size_t));
    }
    QUERY(dev, CL_DEVICE_GLOBAL_MEM_SIZE, global_mem);
    QUERY(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, max_alloc);
    QUERY(dev, CL_DEVICE_LOCAL_MEM_SIZE, local_mem);
    QUERY(dev, CL_DEVICE_LOCAL_MEM_TYPE, local_type);
    cl_uint float_width = 0;
    cl_ulong cache = 0;
    QUERY(dev, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, float_width);
    QUERY(dev, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, cache);
    info->native_float_width = float_width;
    info->cache_bytes = cache;

    info->type = type;
    info->vendor_id = vendor_id;
    info->compute_units = units;
    info->max_work_group_size = max_wg;
    memcpy(info->max_work_item_sizes, item_sizes, sizeof item_sizes);
    info->global_mem_bytes = global_mem;
    info->max_alloc_bytes = max_alloc;
    info->local_mem_reported = local_mem;
    info->local_mem_usable = local_mem;
    info->local_mem_is_dedicated = local_type == CL_LOCAL;

    char *ext = NULL;
    FCL_TRY(query_string(dev, CL_DEVICE_EXTENSIONS, &ext));
    info->extensions = ext;
    info->has_fp64 = has_extension(ext, "cl_khr_fp64");
    info->has_fp16_arith = has_extension(ext, "cl_khr_fp16");
    info->has_subgroups = has_extension(ext, "cl_khr_subgroups") ||
                          has_extension(ext, "cl_intel_subgroups");
    fcl_status st = probe_simd_width(dev, info);
    if (st != FCL_OK) {
        free(ext);
        info->extensions = NULL;
        return st;
    }
    *extensions = ext;
    return FCL_OK;
}

fcl_caps fcl_caps_from_info(const fcl_device_info *info)
{
    fcl_caps c;
    memset(&c, 0, sizeof c);
    c.vendor_id = info->vendor_id;
    c.is_gpu = (info->type & CL_DEVICE_TYPE_GPU) != 0;
    c.is_cpu = (info->type & CL_DEVICE_TYPE_CPU) != 0;
    c.local_mem_reported = info->local_mem_reported;
    c.local_mem_usable = info->local_mem_usable;
    c.max_work_group_size = info->max_work_group_size;
    if (info->max_work_item_sizes[0] != 0 && info->max_work_item_sizes[0] < c.max_work_group_size)
        c.max_work_group_size = info->max_work_item_sizes[0];
    c.simd_width = info->simd_width;
    c.native_float_width = info->native_float_width;
    c.cache_bytes = info->cache_bytes;
    c.nv_compute_capability = info->nv_compute_capability;
    c.compute_units = info->compute_units;
    return c;
}
