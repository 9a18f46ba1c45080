/* program_cache.c - build options -> cl_program.
 *
 * Every program is built once per context and kept (the in-memory cache, keyed
 * by program and options), and kept on disk for other processes
 * (disk_cache.c).  Programs that use Hopper-only PTX take one more step
 * (ptx_rewrite.c).  This file sits on top of those two, which both stand on
 * program_build.c (one program's sources, build, log and binary): no file of
 * the three calls back into this one.
 */
#include "device/context.h"
#include "programs/programs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- in-memory cache ------------------------------------------------------- */

static fcl_status remember(fcl_context *ctx, const char *key, cl_program prog)
{
    char *k = fcl_strdup(key);
    fcl_program_entry *grown =
        fcl_host_realloc(ctx->programs, (ctx->num_programs + 1) * sizeof *ctx->programs);
    if (k == NULL || grown == NULL) {
        free(k);
        if (grown != NULL)
            ctx->programs = grown;
        return FCL_ERROR_OUT_OF_HOST_MEMORY;
    }
    ctx->programs = grown;
    ctx->programs[ctx->num_programs].key = k;
    ctx->programs[ctx->num_programs].program = prog;
    ctx->num_programs++;
    return FCL_OK;
}

fcl_status fcl_get_program(fcl_context *ctx, fcl_program_id id, const char *options,
                           cl_program *out)
{
    char key[1024];
    snprintf(key, sizeof key, "%d|%s", (int)id, options);
    for (size_t i = 0; i < ctx->num_programs; ++i) {
        if (strcmp(ctx->programs[i].key, key) == 0) {
            *out = ctx->programs[i].program;
            return FCL_OK;
        }
    }

    /* checked before anything is built: off sm_90 it could never run */
    const int sm90a = fcl_wants_sm90a(options);
    if (sm90a) {
        fcl_status st = fcl_sm90a_device_check(ctx);
        if (st != FCL_OK)
            return st;
    }
    cl_program prog = fcl_disk_cache_load(ctx, id, options);
    if (prog == NULL) {
        const char *srcs[16];
        cl_uint n = (cl_uint)fcl_program_sources(id, srcs, 16);
        cl_int err = CL_SUCCESS;
        prog = clCreateProgramWithSource(ctx->cl_ctx, n, srcs, NULL, &err);
        if (err != CL_SUCCESS)
            return err;
        fcl_status st = fcl_build_or_release(ctx, prog, options);
        if (st != FCL_OK)
            return st;
        if (sm90a) {
            cl_program patched = NULL;
            st = fcl_build_sm90a(ctx, prog, options, &patched);
            clReleaseProgram(prog);
            if (st != FCL_OK)
                return st;
            prog = patched;
        }
        fcl_disk_cache_store(ctx, id, options, prog);
    }
    fcl_status st = remember(ctx, key, prog);
    if (st != FCL_OK) {
        clReleaseProgram(prog);
        return st;
    }
    *out = prog;
    return FCL_OK;
}
