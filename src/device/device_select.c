/* device_select.c - listing OpenCL devices and picking one.
 * Default: the FLASHCL_DEVICE variable ("P:D") if set, else the first GPU of
 * any platform, else the first device of any platform.  Platforms are not
 * trusted to list GPUs first (PoCL often comes before a GPU driver). */
#include "device/device.h"

#include <CL/cl_ext.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PLATFORMS = 32, MAX_DEVICES = 64 };

static fcl_status get_platforms(cl_platform_id *platforms, cl_uint *count)
{
    cl_uint n = 0;
    cl_int err = clGetPlatformIDs(MAX_PLATFORMS, platforms, &n);
    /* no platform is not an error; a failed query is (n stays 0 then too) */
    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && n == 0)) {
        *count = 0;
        return FCL_OK;
    }
    if (err != CL_SUCCESS)
        return err;
    *count = n < MAX_PLATFORMS ? n : MAX_PLATFORMS;
    return FCL_OK;
}

static fcl_status get_devices(cl_platform_id p, cl_device_type type, cl_device_id *devs,
                              cl_uint *count)
{
    cl_uint n = 0;
    cl_int err = clGetDeviceIDs(p, type, MAX_DEVICES, devs, &n);
    if (err == CL_DEVICE_NOT_FOUND) {
        *count = 0;
        return FCL_OK;
    }
    if (err != CL_SUCCESS)
        return err;
    *count = n < MAX_DEVICES ? n : MAX_DEVICES;
    return FCL_OK;
}

fcl_status fcl_list_devices(fcl_device_ref *out, size_t capacity, size_t *count)
{
    if (count == NULL || (out == NULL && capacity > 0))
        return FCL_ERROR_NULL_ARGUMENT;
    *count = 0;
    cl_platform_id platforms[MAX_PLATFORMS];
    cl_uint np = 0;
    FCL_TRY(get_platforms(platforms, &np));
    size_t total = 0;
    for (cl_uint p = 0; p < np; ++p) {
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = 0;
        FCL_TRY(get_devices(platforms[p], CL_DEVICE_TYPE_ALL, devs, &nd));
        for (cl_uint d = 0; d < nd; ++d, ++total) {
            if (total >= capacity)
                continue;
            fcl_device_ref *r = &out[total];
            memset(r, 0, sizeof *r);
            r->platform_index = (int)p;
            r->device_index = (int)d;
            cl_int err = clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof r->type, &r->type, NULL);
            if (err != CL_SUCCESS)
                return err;
            fcl_device_info info;
            char *ext = NULL;
            FCL_TRY(fcl_probe_device(devs[d], &info, &ext));
            free(ext);
            fcl_copy_string(r->platform_name, sizeof r->platform_name, info.platform_name);
            fcl_copy_string(r->device_name, sizeof r->device_name, info.name);
        }
    }
    *count = total;
    return FCL_OK;
}

/* Parses "P:D" with decimal indices. */
static fcl_status parse_device_spec(const char *s, int *platform, int *device)
{
    char *end = NULL;
    if (!isdigit((unsigned char)s[0]))
        return FCL_ERROR_BAD_DEVICE_SPEC;
    long p = strtol(s, &end, 10);
    if (*end != ':' || !isdigit((unsigned char)end[1]))
        return FCL_ERROR_BAD_DEVICE_SPEC;
    long d = strtol(end + 1, &end, 10);
    if (*end != '\0' || p > MAX_PLATFORMS || d > MAX_DEVICES)
        return FCL_ERROR_BAD_DEVICE_SPEC;
    *platform = (int)p;
    *device = (int)d;
    return FCL_OK;
}

static fcl_status device_at(int platform_index, int device_index, cl_device_id *device)
{
    cl_platform_id platforms[MAX_PLATFORMS];
    cl_uint np = 0;
    FCL_TRY(get_platforms(platforms, &np));
    if (np == 0)
        return FCL_ERROR_NO_DEVICE;
    if (platform_index < 0 || (cl_uint)platform_index >= np)
        return FCL_ERROR_DEVICE_NOT_FOUND;
    cl_device_id devs[MAX_DEVICES];
    cl_uint nd = 0;
    FCL_TRY(get_devices(platforms[platform_index], CL_DEVICE_TYPE_ALL, devs, &nd));
    if (device_index < 0 || (cl_uint)device_index >= nd)
        return FCL_ERROR_DEVICE_NOT_FOUND;
    *device = devs[device_index];
    return FCL_OK;
}

static fcl_status first_of_type(cl_device_type type, cl_device_id *device, bool *found)
{
    cl_platform_id platforms[MAX_PLATFORMS];
    cl_uint np = 0;
    *found = false;
    FCL_TRY(get_platforms(platforms, &np));
    for (cl_uint p = 0; p < np; ++p) {
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = 0;
        FCL_TRY(get_devices(platforms[p], type, devs, &nd));
        if (nd > 0) {
            *device = devs[0];
            *found = true;
            return FCL_OK;
        }
    }
    return FCL_OK;
}

fcl_status fcl_select_device(int platform_index, int device_index, cl_device_id *device)
{
    if (platform_index >= 0 || device_index >= 0)
        return device_at(platform_index, device_index, device);
    const char *spec = getenv("FLASHCL_DEVICE");
    if (spec != NULL && spec[0] != '\0') {
        int p = 0, d = 0;
        FCL_TRY(parse_device_spec(spec, &p, &d));
        return device_at(p, d, device);
    }
    bool found = false;
    FCL_TRY(first_of_type(CL_DEVICE_TYPE_GPU, device, &found));
    if (!found)
        FCL_TRY(first_of_type(CL_DEVICE_TYPE_ALL, device, &found));
    return found ? FCL_OK : FCL_ERROR_NO_DEVICE;
}
