/* mpi_context.c - the handle: a private communicator, this rank's device
 * (chosen by its rank among the ranks of its host), the kernels of
 * cl/dist.cl and cl/combine.cl, and device buffers kept between calls. */
#include "dist_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The embedded kernel sources (cmake/embed_kernels.cmake, prefix fcl_dist_cl_). */
extern const char fcl_dist_cl_common[];
extern const char fcl_dist_cl_combine[];
extern const char fcl_dist_cl_dist[];

/* Local rank l takes GPU l % GPUs, unless the caller or FLASHCL_DEVICE
 * named a device. */
static fcl_status create_context(int local_rank, const fcl_context_options *opts,
                                 fcl_context **out)
{
    fcl_context_options o;
    if (opts != NULL)
        o = *opts;
    else
        fcl_context_options_init(&o);
    const char *env = getenv("FLASHCL_DEVICE");
    if (o.platform_index < 0 && o.device_index < 0 && (env == NULL || env[0] == '\0')) {
        size_t count = 0;
        DIST_TRY(fcl_list_devices(NULL, 0, &count));
        fcl_device_ref *list = count > 0 ? calloc(count, sizeof *list) : NULL;
        if (count > 0 && list == NULL)
            return FCL_ERROR_OUT_OF_HOST_MEMORY;
        fcl_status st = count > 0 ? fcl_list_devices(list, count, &count) : FCL_OK;
        size_t gpus = 0;
        for (size_t i = 0; i < count && st == FCL_OK; ++i)
            gpus += (list[i].type & CL_DEVICE_TYPE_GPU) != 0;
        for (size_t i = 0, g = 0; i < count && gpus > 0 && st == FCL_OK; ++i) {
            if ((list[i].type & CL_DEVICE_TYPE_GPU) == 0)
                continue;
            if (g++ == (size_t)local_rank % gpus) {
                o.platform_index = list[i].platform_index;
                o.device_index = list[i].device_index;
            }
        }
        free(list);
        DIST_TRY(st);
    }
    return fcl_context_create(&o, out);
}

fcl_status fcl_mpi_create(MPI_Comm comm, fcl_context *ctx, const fcl_context_options *opts,
                          fcl_mpi **out)
{
    if (out == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    *out = NULL;
    int initialised = 0;
    if (MPI_Initialized(&initialised) != MPI_SUCCESS || !initialised)
        return FCL_ERROR_MPI;
    fcl_mpi *m = calloc(1, sizeof *m);
    if (m != NULL) {
        m->launch_rows = DIST_LAUNCH_ROWS;
        m->command_bytes = DIST_COMMAND_BYTES;
    }
    MPI_Comm dup = MPI_COMM_NULL, local = MPI_COMM_NULL;
    /* The collective steps run on every rank whatever happened before, so
     * that a failure on one rank never leaves another waiting. */
    int ok = MPI_Comm_dup(comm, &dup) == MPI_SUCCESS;
    ok = ok && MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN) == MPI_SUCCESS;
    ok = ok && MPI_Comm_split_type(dup, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) ==
                   MPI_SUCCESS;
    int rank = 0, size = 1, local_rank = 0, local_size = 0;
    ok = ok && MPI_Comm_rank(dup, &rank) == MPI_SUCCESS && MPI_Comm_size(dup, &size) == MPI_SUCCESS &&
         MPI_Comm_rank(local, &local_rank) == MPI_SUCCESS &&
         MPI_Comm_size(local, &local_size) == MPI_SUCCESS;
    if (local != MPI_COMM_NULL)
        MPI_Comm_free(&local);
    fcl_status st = !ok ? FCL_ERROR_MPI : m == NULL ? FCL_ERROR_OUT_OF_HOST_MEMORY : FCL_OK;
    if (st == FCL_OK) {
        m->comm = dup;
        m->rank = rank;
        m->size = size;
        m->local_rank = local_rank;
        m->ctx = ctx;
        if (ctx == NULL) {
            st = create_context(local_rank, opts, &m->ctx);
            m->owns_ctx = st == FCL_OK;
        }
        cl_command_queue_properties props = 0;
        if (st == FCL_OK &&
            clGetCommandQueueInfo(fcl_context_cl_queue(m->ctx), CL_QUEUE_PROPERTIES, sizeof props,
                                  &props, NULL) == CL_SUCCESS)
            m->profiling = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
    }
    /* Everyone learns the lowest rank's failure (a broken communicator
     * cannot tell anyone). */
    if (ok)
        st = dist_first_error(dup, st);
    if (st == FCL_OK) { /* every rank is here: the messages' transport within a host */
        st = dist_node_copy_setup(m, local_size);
        st = dist_first_error(dup, st);
    }
    if (st != FCL_OK) {
        if (m != NULL) {
            if (m->owns_ctx)
                fcl_context_destroy(m->ctx);
            free(m);
        }
        if (dup != MPI_COMM_NULL)
            MPI_Comm_free(&dup);
        return st;
    }
    *out = m;
    return FCL_OK;
}

static void kernels_free(dist_kernels *k)
{
    cl_kernel *all[] = {&k->widen, &k->accumulate, &k->store, &k->combine};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        if (*all[i] != NULL)
            clReleaseKernel(*all[i]);
    if (k->program != NULL)
        clReleaseProgram(k->program);
    memset(k, 0, sizeof *k);
}

void fcl_mpi_destroy(fcl_mpi *m)
{
    if (m == NULL)
        return;
    dist_buffers_free(m);
    if (m->copy_queue != NULL)
        clReleaseCommandQueue(m->copy_queue);
    for (int i = 0; i < 3; ++i)
        kernels_free(&m->kernels[i]);
    if (m->owns_ctx)
        fcl_context_destroy(m->ctx);
    if (m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    free(m);
}

fcl_context *fcl_mpi_context(const fcl_mpi *m) { return m != NULL ? m->ctx : NULL; }
int fcl_mpi_rank(const fcl_mpi *m) { return m != NULL ? m->rank : -1; }
int fcl_mpi_copy_threads(const fcl_mpi *m) { return m != NULL ? m->copy_threads : -1; }
int fcl_mpi_size(const fcl_mpi *m) { return m != NULL ? m->size : -1; }
int fcl_mpi_local_rank(const fcl_mpi *m) { return m != NULL ? m->local_rank : -1; }

fcl_status fcl_mpi_last_timing(const fcl_mpi *m, fcl_mpi_timing *timing)
{
    if (m == NULL || timing == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    *timing = m->timing;
    return FCL_OK;
}

static fcl_status build_kernels(fcl_mpi *m, fcl_dtype dt, dist_kernels *k)
{
    cl_context cl_ctx = fcl_context_cl_context(m->ctx);
    cl_device_id dev = fcl_context_cl_device(m->ctx);
    const char *sources[] = {fcl_dist_cl_common, fcl_dist_cl_combine, fcl_dist_cl_dist};
    cl_int err = CL_SUCCESS;
    k->program = clCreateProgramWithSource(cl_ctx, 3, sources, NULL, &err);
    if (err != CL_SUCCESS)
        return err;
    char options[128];
    snprintf(options, sizeof options,
             "-cl-std=CL1.2 -DFCL_DTYPE=%d -DFCL_COMBINE_COLS=%d -DFCL_COMBINE_SLICES=%d", (int)dt,
             DIST_COMBINE_COLS, DIST_COMBINE_SLICES);
    err = clBuildProgram(k->program, 1, &dev, options, NULL, NULL);
    if (err == CL_BUILD_PROGRAM_FAILURE)
        return FCL_ERROR_BUILD_FAILED;
    if (err != CL_SUCCESS)
        return err;
    struct {
        cl_kernel *kernel;
        const char *name;
    } list[] = {{&k->widen, "fcl_dist_widen"}, {&k->accumulate, "fcl_dist_accumulate"},
                {&k->store, "fcl_dist_store"}, {&k->combine, "fcl_combine"}};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; ++i) {
        *list[i].kernel = clCreateKernel(k->program, list[i].name, &err);
        if (err != CL_SUCCESS)
            return err;
    }
    return FCL_OK;
}

fcl_status dist_kernels_for(fcl_mpi *m, fcl_dtype dt, dist_kernels **out)
{
    if ((int)dt < 0 || (int)dt > 2)
        return FCL_ERROR_DTYPE_UNSUPPORTED;
    dist_kernels *k = &m->kernels[dt];
    if (k->combine == NULL) {
        fcl_status st = build_kernels(m, dt, k);
        if (st != FCL_OK) {
            kernels_free(k);
            return st;
        }
    }
    *out = k;
    return FCL_OK;
}

/* ---- buffers kept between calls ---------------------------------------- */

static void buffer_free(fcl_mpi *m, dist_buffer *b)
{
    if (b->host != NULL)
        clEnqueueUnmapMemObject(fcl_context_cl_queue(m->ctx), b->mem, b->host, 0, NULL, NULL);
    if (b->mem != NULL)
        clReleaseMemObject(b->mem);
    if (b->host != NULL)
        clFinish(fcl_context_cl_queue(m->ctx));
    memset(b, 0, sizeof *b);
}

void dist_buffers_free(fcl_mpi *m)
{
    for (int s = 0; s < DIST_SLOTS; ++s)
        buffer_free(m, &m->buffers[s]);
}

static fcl_status grow(fcl_mpi *m, dist_slot s, size_t bytes, int staging)
{
    dist_buffer *b = &m->buffers[s];
    if (b->mem != NULL && b->bytes >= bytes)
        return FCL_OK;
    buffer_free(m, b);
    if (bytes == 0)
        bytes = 4;
    cl_int err = CL_SUCCESS;
    cl_mem_flags flags = CL_MEM_READ_WRITE | (staging ? CL_MEM_ALLOC_HOST_PTR : 0);
    b->mem = clCreateBuffer(fcl_context_cl_context(m->ctx), flags, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        b->mem = NULL;
        return err;
    }
    b->bytes = bytes;
    if (staging) {
        b->host = clEnqueueMapBuffer(fcl_context_cl_queue(m->ctx), b->mem, CL_TRUE,
                                     CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, NULL, NULL, &err);
        if (err != CL_SUCCESS) {
            b->host = NULL;
            buffer_free(m, b);
            return err;
        }
    }
    return FCL_OK;
}

fcl_status dist_buffer_get(fcl_mpi *m, dist_slot s, size_t bytes, cl_mem *mem)
{
    DIST_TRY(grow(m, s, bytes, 0));
    *mem = m->buffers[s].mem;
    return FCL_OK;
}

fcl_status dist_staging_get(fcl_mpi *m, dist_slot s, size_t bytes, cl_mem *mem, void **host)
{
    DIST_TRY(grow(m, s, bytes, 1));
    *mem = m->buffers[s].mem;
    *host = m->buffers[s].host;
    return FCL_OK;
}
