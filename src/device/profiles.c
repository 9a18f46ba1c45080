/* profiles.c - emulated devices: the limits of other vendors' GPUs as data.
 *
 * A context created with a profile plans as if it ran on that device (its
 * local memory, work-group limit, SIMD width, vendor) while executing on the
 * real one, so every vendor's tiling is built and checked for correctness on
 * any machine, a CPU included.  Numbers are from the vendors' documentation
 * and, for the H100, from our own probe (see NOTES.md).
 */
#include "device/device.h"

#include <string.h>

static const fcl_profile profiles[] = {
    {"nvidia-h100",
     "NVIDIA H100 (sm_90): reports 48 KiB local, 227 KiB usable by static __local arrays",
     {FCL_VENDOR_ID_NVIDIA, 1, 0, 49152, 232448 - 256, 1024, 32, 90, 132, 0, 0}},
    {"nvidia-a100",
     "NVIDIA A100 (sm_80): reports 48 KiB local, 163 KiB usable (CUDA's per-block limit; not measured)",
     {FCL_VENDOR_ID_NVIDIA, 1, 0, 49152, 166912, 1024, 32, 80, 108, 0, 0}},
    {"amd-cdna",
     "AMD CDNA (MI200/MI300 class): 64 KiB LDS, wave64, work-groups of at most 256",
     {FCL_VENDOR_ID_AMD, 1, 0, 65536, 65536, 256, 64, 0, 104, 0, 0}},
    {"amd-rdna",
     "AMD RDNA (RX 6000/7000 class): 64 KiB LDS per work-group, wave32, work-groups of 1024",
     {FCL_VENDOR_ID_AMD, 1, 0, 65536, 65536, 1024, 32, 0, 48, 0, 0}},
    {"intel-xe",
     "Intel Xe (Arc / Data Center GPU class): 64 KiB SLM, sub-group 16, work-groups of 1024",
     {FCL_VENDOR_ID_INTEL, 1, 0, 65536, 65536, 1024, 16, 0, 512, 0, 0}},
    {"small-32k",
     "A small GPU: 32 KiB local memory, work-groups of 256, SIMD 32 (mobile/embedded class)",
     {0, 1, 0, 32768, 32768, 256, 32, 0, 8, 0, 0}},
    {"cpu-avx2",
     "A CPU with AVX2 (8 floats a vector): 8 cores, 32 MiB last-level cache, work-groups of 1024 (runs on any device)",
     {FCL_VENDOR_ID_INTEL, 0, 1, 2097152, 2097152, 1024, 0, 0, 8, 8, 33554432}},
};

#define NUM_PROFILES (sizeof profiles / sizeof profiles[0])

size_t fcl_profile_count(void) { return NUM_PROFILES; }

const char *fcl_profile_name(size_t index)
{
    return index < NUM_PROFILES ? profiles[index].name : NULL;
}

const char *fcl_profile_description(size_t index)
{
    return index < NUM_PROFILES ? profiles[index].description : NULL;
}

const fcl_profile *fcl_profile_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < NUM_PROFILES; ++i)
        if (strcmp(profiles[i].name, name) == 0)
            return &profiles[i];
    return NULL;
}
