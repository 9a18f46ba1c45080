/* ring.c - the pieces both rings use: local sizes and the flashcl
 * descriptors of one step's calls, the launches of cl/dist.cl and of
 * combine.cl's merge, the messages of a step and the wait for them. */
#define _POSIX_C_SOURCE 200809L
#include "dist_internal.h"

#include <limits.h>
#include <string.h>
#include <time.h>

double dist_now(void) { return MPI_Wtime(); }

fcl_status dist_shape_make(const fcl_mpi_desc *d, int ranks, int rank, dist_shape *s)
{
    fcl_mpi_shard sh;
    DIST_TRY(fcl_mpi_shard_of(d, rank, ranks, &sh));
    s->d = d;
    s->ranks = ranks;
    s->rank = rank;
    s->rows = sh.rows;
    s->max_rows = dist_max_rows(d, ranks);
    /* the ring's sums are written back in the storage type, so it must be
     * one flashcl's calls also write: not an input-only type */
    if (d->dtype != FCL_DTYPE_FP32 && d->dtype != FCL_DTYPE_FP16 && d->dtype != FCL_DTYPE_BF16)
        return FCL_ERROR_DTYPE_UNSUPPORTED;
    s->elem = fcl_dtype_size(d->dtype);
    /* Sizes that the flashcl call for the whole local problem accepts
     * (checked before the ring) fit size_t; these are no larger. */
    s->q_elems = d->batch * s->rows * d->heads_q * d->head_dim;
    s->kv_elems = dist_kv_elems(s, s->rows);
    return FCL_OK;
}

size_t dist_rows_of(const dist_shape *s, int rank)
{
    fcl_mpi_shard sh;
    return fcl_mpi_shard_of(s->d, rank, s->ranks, &sh) == FCL_OK ? sh.rows : 0;
}

size_t dist_kv_elems(const dist_shape *s, size_t rows)
{
    return s->d->batch * rows * s->d->heads_kv * s->d->head_dim;
}

void dist_plain_desc(const dist_shape *s, fcl_attention_desc *out)
{
    const fcl_mpi_desc *d = s->d;
    fcl_attention_desc_init(out, d->batch, d->heads_q, d->heads_kv, s->rows, s->rows, d->head_dim,
                            d->dtype, d->layout);
    out->softmax_scale = d->softmax_scale;
    out->causal = d->causal;
}

void dist_plain_offsets(const fcl_mpi_tensor t[DIST_TENSORS], fcl_attention_desc *out)
{
    fcl_layout *at[DIST_TENSORS] = {&out->q, &out->k,  &out->v,  &out->o, NULL,
                                    &out->dout, &out->dq, &out->dk, &out->dv};
    for (int i = 0; i < DIST_TENSORS; ++i)
        if (at[i] != NULL)
            at[i]->offset = t[i].offset;
    out->lse_offset = t[IO_LSE].offset;
}

static fcl_layout rows_from(fcl_layout l, size_t first)
{
    l.offset += first * l.stride_seq;
    return l;
}

void dist_call_desc(const dist_shape *s, const dist_call *c, size_t kv_rows, fcl_attention_desc *out)
{
    const fcl_mpi_desc *d = s->d;
    fcl_attention_desc_init(out, d->batch, d->heads_q, d->heads_kv, c->nq, c->nk, d->head_dim,
                            d->dtype, d->layout);
    out->softmax_scale = d->softmax_scale;
    out->causal = c->causal;
    const fcl_layout ql = rows_from(fcl_layout_contiguous(d->layout, d->heads_q, s->rows, d->head_dim), c->q0);
    const fcl_layout kl = rows_from(fcl_layout_contiguous(d->layout, d->heads_kv, kv_rows, d->head_dim), c->k0);
    out->q = out->o = out->dout = out->dq = ql;
    out->k = out->dk = out->dv = kl;
    out->v = kl;
    out->v.offset += dist_kv_elems(s, kv_rows); /* V follows K in the shard's buffer */
}

/* ---- launches ------------------------------------------------------------ */

typedef struct arg {
    size_t size;
    const void *value;
} arg;

static fcl_status launch(fcl_mpi *m, cl_kernel k, const arg *args, cl_uint n, size_t g0, size_t g1,
                         const size_t *local)
{
    for (cl_uint i = 0; i < n; ++i) {
        cl_int err = clSetKernelArg(k, i, args[i].size, args[i].value);
        if (err != CL_SUCCESS)
            return err;
    }
    if (g0 == 0 || g1 == 0)
        return FCL_OK;
    const size_t global[2] = {g0, g1};
    return clEnqueueNDRangeKernel(fcl_context_cl_queue(m->ctx), k, 2, NULL, global, local, 0, NULL,
                                  NULL);
}

#define ARG(x) {sizeof(x), &(x)}

/* dist.cl's launch over `total` rows: head_dim x at most m->launch_rows
 * work-items, each looping over every launch_rows-th row. */
static fcl_status launch_rows(fcl_mpi *m, cl_kernel k, const arg *args, cl_uint n,
                              size_t head_dim, size_t total)
{
    return launch(m, k, args, n, head_dim, total < m->launch_rows ? total : m->launch_rows, NULL);
}

fcl_status dist_fill(fcl_mpi *m, cl_mem mem, const void *pattern, size_t pattern_bytes,
                     size_t offset, size_t bytes)
{
    /* pieces of whole patterns, at most m->command_bytes (at least one pattern) */
    size_t piece = m->command_bytes / pattern_bytes * pattern_bytes;
    if (piece == 0)
        piece = pattern_bytes;
    for (size_t at = 0; at < bytes; at += piece)
        DIST_TRY(clEnqueueFillBuffer(fcl_context_cl_queue(m->ctx), mem, pattern, pattern_bytes,
                                     offset + at, bytes - at < piece ? bytes - at : piece, 0, NULL,
                                     NULL));
    return FCL_OK;
}

/* One command of a transfer: a write from src, or a read into dst. */
static cl_int transfer_one(cl_command_queue queue, cl_mem mem, cl_bool blocking, size_t offset,
                           size_t bytes, const void *src, void *dst, cl_uint num_wait,
                           const cl_event *wait_list, cl_event *event)
{
    return src != NULL ? clEnqueueWriteBuffer(queue, mem, blocking, offset, bytes, src, num_wait,
                                              wait_list, event)
                       : clEnqueueReadBuffer(queue, mem, blocking, offset, bytes, dst, num_wait,
                                             wait_list, event);
}

static fcl_status transfer(fcl_mpi *m, cl_command_queue queue, cl_mem mem, cl_bool blocking,
                           size_t offset, size_t bytes, const void *src, void *dst,
                           cl_uint num_wait, const cl_event *wait_list, cl_event *event)
{
    const size_t most = m->command_bytes;
    if (bytes <= most) /* one command, as it is */
        return transfer_one(queue, mem, blocking, offset, bytes, src, dst, num_wait, wait_list,
                            event);
    for (size_t at = 0; at < bytes; at += most) {
        const size_t n = bytes - at < most ? bytes - at : most;
        DIST_TRY(transfer_one(queue, mem, CL_FALSE, offset + at, n,
                              src != NULL ? (const char *)src + at : NULL,
                              dst != NULL ? (char *)dst + at : NULL, num_wait, wait_list, NULL));
    }
    if (event == NULL && !blocking)
        return FCL_OK;
    cl_event all = NULL; /* after every command before it, on either kind of queue */
    DIST_TRY(clEnqueueMarkerWithWaitList(queue, 0, NULL, &all));
    fcl_status st = blocking ? clWaitForEvents(1, &all) : FCL_OK;
    if (event != NULL && st == FCL_OK)
        *event = all;
    else
        clReleaseEvent(all);
    return st;
}

fcl_status dist_write(fcl_mpi *m, cl_command_queue queue, cl_mem mem, cl_bool blocking,
                      size_t offset, size_t bytes, const void *src, cl_uint num_wait,
                      const cl_event *wait_list, cl_event *event)
{
    return transfer(m, queue, mem, blocking, offset, bytes, src, NULL, num_wait, wait_list, event);
}

fcl_status dist_read(fcl_mpi *m, cl_command_queue queue, cl_mem mem, cl_bool blocking,
                     size_t offset, size_t bytes, void *dst, cl_uint num_wait,
                     const cl_event *wait_list, cl_event *event)
{
    return transfer(m, queue, mem, blocking, offset, bytes, NULL, dst, num_wait, wait_list, event);
}

static fcl_status stamp(fcl_mpi *m, cl_event *ev)
{
    if (!m->profiling)
        return FCL_OK;
    cl_mem word = NULL;
    DIST_TRY(dist_buffer_get(m, SLOT_STAMP, sizeof(cl_uint), &word));
    const cl_uint zero = 0;
    return clEnqueueFillBuffer(fcl_context_cl_queue(m->ctx), word, &zero, sizeof zero, 0,
                               sizeof zero, 0, NULL, ev);
}

fcl_status dist_stamp_in(fcl_mpi *m, dist_stamps *st) { return stamp(m, &st->in); }
fcl_status dist_stamp_end(fcl_mpi *m, dist_stamps *st) { return stamp(m, &st->end); }

void dist_stamps_add(fcl_mpi *m, dist_stamps *st)
{
    cl_ulong in = 0, end = 0;
    if (st->in != NULL && st->end != NULL && clWaitForEvents(1, &st->end) == CL_SUCCESS &&
        clGetEventProfilingInfo(st->in, CL_PROFILING_COMMAND_END, sizeof in, &in, NULL) ==
            CL_SUCCESS &&
        clGetEventProfilingInfo(st->end, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) ==
            CL_SUCCESS &&
        in > 0 && end >= in) {
        m->timing.device_seconds += 1e-9 * (double)(end - in);
        if (st->prev_end != 0 && in >= st->prev_end)
            m->timing.device_gap_seconds += 1e-9 * (double)(in - st->prev_end);
        st->prev_end = end;
    }
    cl_event *evs[] = {&st->in, &st->end};
    for (int i = 0; i < 2; ++i) {
        if (*evs[i] != NULL)
            clReleaseEvent(*evs[i]);
        *evs[i] = NULL;
    }
}

void dist_mark_now(fcl_mpi *m, const char *what)
{
    /* full: the newest mark replaces the last, so the call's end is kept */
    const int at = m->trace_count < DIST_TRACE_MARKS ? m->trace_count++ : DIST_TRACE_MARKS - 1;
    m->trace[at] = (dist_mark){what, m->trace_step, dist_now() - m->call_start};
}

int dist_debug_trace(const fcl_mpi *m, const dist_mark **marks)
{
    *marks = m->trace;
    return m->trace_count;
}

void dist_debug_set_bounds(fcl_mpi *m, size_t launch_rows, size_t command_bytes)
{
    if (m == NULL)
        return;
    if (launch_rows > 0)
        m->launch_rows = launch_rows;
    if (command_bytes > 0)
        m->command_bytes = command_bytes;
}

fcl_status dist_widen(fcl_mpi *m, const dist_kernels *k, const dist_shape *sh, size_t heads,
                      const fcl_layout *pl, cl_mem part_o, cl_mem part_lse, size_t n, size_t row0,
                      size_t rows, cl_mem dst, size_t dst_base, cl_mem dst_lse, size_t dst_lse_base)
{
    const cl_long off = (cl_long)pl->offset, sb = (cl_long)pl->stride_batch,
                  shd = (cl_long)pl->stride_head, ss = (cl_long)pl->stride_seq;
    const cl_int n_ = (cl_int)n, row0_ = (cl_int)row0, heads_ = (cl_int)heads, rows_ = (cl_int)rows,
                 hd = (cl_int)sh->d->head_dim;
    const cl_long base = (cl_long)dst_base, lbase = (cl_long)dst_lse_base,
                  total = (cl_long)(sh->d->batch * heads * n);
    const arg a[] = {ARG(part_o), ARG(off), ARG(sb), ARG(shd), ARG(ss), ARG(part_lse), ARG(n_),
                     ARG(row0_), ARG(heads_), ARG(rows_), ARG(hd), ARG(dst), ARG(base),
                     ARG(dst_lse), ARG(lbase), ARG(total)};
    return launch_rows(m, k->widen, a, 16, sh->d->head_dim, (size_t)total);
}

fcl_status dist_accumulate(fcl_mpi *m, const dist_kernels *k, const dist_shape *sh, size_t heads,
                           cl_mem acc, size_t acc_base, size_t rows, size_t row0, cl_mem part,
                           const fcl_layout *pl, size_t n, int assign)
{
    const cl_long base = (cl_long)acc_base, off = (cl_long)pl->offset,
                  sb = (cl_long)pl->stride_batch, shd = (cl_long)pl->stride_head,
                  ss = (cl_long)pl->stride_seq;
    const cl_int rows_ = (cl_int)rows, row0_ = (cl_int)row0, heads_ = (cl_int)heads,
                 hd = (cl_int)sh->d->head_dim, n_ = (cl_int)n, assign_ = assign;
    const cl_long total = (cl_long)(sh->d->batch * heads * n);
    const arg a[] = {ARG(acc),  ARG(base), ARG(rows_), ARG(row0_), ARG(heads_),
                     ARG(hd),   ARG(part), ARG(off),   ARG(sb),    ARG(shd),
                     ARG(ss),   ARG(n_),   ARG(assign_), ARG(total)};
    return launch_rows(m, k->accumulate, a, 14, sh->d->head_dim, (size_t)total);
}

fcl_status dist_store(fcl_mpi *m, const dist_kernels *k, const dist_shape *sh, size_t heads,
                      cl_mem acc, size_t acc_base, size_t rows, cl_mem out, const fcl_layout *ol,
                      size_t n)
{
    const cl_long base = (cl_long)acc_base, off = (cl_long)ol->offset,
                  sb = (cl_long)ol->stride_batch, shd = (cl_long)ol->stride_head,
                  ss = (cl_long)ol->stride_seq;
    const cl_int rows_ = (cl_int)rows, heads_ = (cl_int)heads, hd = (cl_int)sh->d->head_dim,
                 n_ = (cl_int)n;
    const cl_long total = (cl_long)(sh->d->batch * heads * n);
    const arg a[] = {ARG(acc), ARG(base), ARG(rows_), ARG(heads_), ARG(hd), ARG(out),
                     ARG(off), ARG(sb), ARG(shd), ARG(ss), ARG(n_), ARG(total)};
    return launch_rows(m, k->store, a, 12, sh->d->head_dim, (size_t)total);
}

enum { COMBINE_COLS = DIST_COMBINE_COLS, COMBINE_WG = DIST_COMBINE_COLS * DIST_COMBINE_SLICES };

fcl_status dist_combine(fcl_mpi *m, const dist_kernels *k, const dist_shape *sh, cl_mem parts,
                        cl_mem parts_lse, int num_parts, cl_mem out, const fcl_layout *ol,
                        cl_mem lse, size_t lse_offset, int write_lse)
{
    const fcl_mpi_desc *d = sh->d;
    const cl_long part_rows = (cl_long)(d->batch * d->heads_q * sh->rows);
    const cl_int np = num_parts, hd = (cl_int)d->head_dim, sq = (cl_int)sh->rows,
                 hq = (cl_int)d->heads_q, wl = write_lse;
    const cl_long off = (cl_long)ol->offset, sb = (cl_long)ol->stride_batch,
                  shd = (cl_long)ol->stride_head, ss = (cl_long)ol->stride_seq,
                  lse_off = (cl_long)lse_offset;
    /* The ring attention has no sinks: the `arrays` bits say so, and the
     * kernel's one read of that argument (element 0, cl/common.cl's
     * "optional arrays") goes to parts_lse, never to NULL. */
    const cl_int no_arrays = 0;
    const arg a[] = {ARG(parts), ARG(parts_lse), ARG(np), ARG(part_rows), ARG(hd), ARG(sq),
                     ARG(hq), ARG(out), ARG(off), ARG(sb), ARG(shd), ARG(ss), ARG(lse),
                     ARG(lse_off), ARG(wl), ARG(parts_lse), ARG(no_arrays)};
    const size_t col_blocks = (d->head_dim + COMBINE_COLS - 1) / COMBINE_COLS;
    const size_t local[2] = {COMBINE_WG, 1};
    return launch(m, k->combine, a, 17, (size_t)part_rows * col_blocks * COMBINE_WG, 1, local);
}

fcl_status dist_gather_lse(fcl_mpi *m, cl_mem lse, size_t lse_offset, size_t bh, size_t rows,
                           size_t q0, size_t n, cl_mem out)
{
    const size_t src_origin[3] = {(lse_offset + q0) * sizeof(float), 0, 0},
                 dst_origin[3] = {0, 0, 0};
    const size_t region[3] = {n * sizeof(float), bh, 1};
    return clEnqueueCopyBufferRect(fcl_context_cl_queue(m->ctx), lse, out, src_origin, dst_origin,
                                   region, rows * sizeof(float), 0, n * sizeof(float), 0, 0,
                                   NULL, NULL);
}

/* ---- messages ------------------------------------------------------------ */

/* MPI counts are int: a message travels in pieces of at most 1 GiB, sent
 * and received in the same order (MPI keeps the order of one sender's
 * messages with one tag). */
enum { PIECE_BYTES = 1 << 30 };

/* A message's receipt travels under its tag plus this. */
enum { TAG_RECEIPT = 16 };

/* With copy_threads: a send is a notice of where the bytes are (the next
 * rank reads them) and a wait for its receipt; a receive is a wait for the
 * previous rank's notice, then the copy (dist_finish_step). */
static fcl_status post_notice(fcl_mpi *m, dist_messages *msg, void *buf, size_t bytes, int peer,
                              int tag, int send)
{
    if (send) {
        if (msg->sends == DIST_MAX_COPIES || msg->count + 2 > DIST_MAX_REQUESTS)
            return FCL_ERROR_INVALID_SHAPE;
        uint64_t *n = msg->sent[msg->sends];
        n[0] = (uint64_t)(uintptr_t)buf;
        n[1] = (uint64_t)bytes;
        if (MPI_Isend(n, 2, MPI_UINT64_T, peer, tag, m->comm, &msg->req[msg->count]) !=
            MPI_SUCCESS)
            return FCL_ERROR_MPI;
        msg->count++;
        if (MPI_Irecv(&msg->receipt[msg->sends], 1, MPI_BYTE, peer, tag + TAG_RECEIPT, m->comm,
                      &msg->req[msg->count]) != MPI_SUCCESS)
            return FCL_ERROR_MPI;
        msg->count++;
        msg->sends++;
        return FCL_OK;
    }
    if (msg->copies == DIST_MAX_COPIES)
        return FCL_ERROR_INVALID_SHAPE;
    dist_copy *c = &msg->copy[msg->copies];
    *c = (dist_copy){.dst = buf, .bytes = bytes, .tag = tag};
    if (MPI_Irecv(c->notice, 2, MPI_UINT64_T, peer, tag, m->comm, &c->notice_req) != MPI_SUCCESS)
        return FCL_ERROR_MPI;
    msg->copies++;
    return FCL_OK;
}

/* The bytes of a copy: read whole, or, where the step uploads that very
 * buffer (up) and m->upload_piece is set, read in pieces, each written to
 * the device on the copy queue as soon as it is in, so that the upload
 * runs beside the rest of the read; *up->done then marks the last piece. */
static fcl_status read_message(fcl_mpi *m, const dist_copy *c, const dist_upload *up)
{
    const size_t piece = up != NULL ? m->upload_piece : c->bytes;
    fcl_status st = FCL_OK;
    for (size_t at = 0; at < c->bytes && st == FCL_OK; at += piece) {
        const size_t n = c->bytes - at < piece ? c->bytes - at : piece;
        const double start = dist_now();
        st = dist_node_read(m, (char *)c->dst + at, c->notice[0] + at, n);
        m->timing.copy_seconds += dist_now() - start;
        if (st == FCL_OK && up != NULL)
            st = dist_write(m, m->copy_queue, up->dst, CL_FALSE, at, n, (const char *)up->src + at,
                            0, NULL, NULL);
        if (st == FCL_OK && up != NULL)
            st = clFlush(m->copy_queue);
    }
    if (up == NULL)
        return st;
    /* after every piece enqueued, also when one failed: the buffer's next
     * reader waits for what was started */
    const fcl_status marked = clEnqueueMarkerWithWaitList(m->copy_queue, 0, NULL, up->done);
    if (marked != FCL_OK)
        *up->done = NULL;
    dist_mark_now(m, "upload streamed");
    return st != FCL_OK ? st : marked;
}

/* A notice is in: the bytes read from the previous rank (and, with up, sent
 * on to the device), then its receipt sent (also after a failed read: the
 * sender waits for it). */
static fcl_status copy_in(fcl_mpi *m, dist_messages *msg, dist_copy *c, const dist_upload *up)
{
    static const unsigned char receipt = 1;
    fcl_status st = c->notice[1] == (uint64_t)c->bytes ? FCL_OK : FCL_ERROR_MPI;
    if (st == FCL_OK && c->bytes > 0) {
        st = read_message(m, c, up);
        if (st == FCL_OK)
            m->timing.copy_bytes += c->bytes;
    }
    c->done = 1;
    if (msg->count == DIST_MAX_REQUESTS)
        return FCL_ERROR_INVALID_SHAPE;
    if (MPI_Isend(&receipt, 1, MPI_BYTE, dist_prev(m), c->tag + TAG_RECEIPT, m->comm,
                  &msg->req[msg->count]) != MPI_SUCCESS)
        return FCL_ERROR_MPI;
    msg->count++;
    return st;
}

static fcl_status post_pieces(fcl_mpi *m, dist_messages *msg, void *buf, size_t bytes, int peer,
                              int tag, int send)
{
    if (m->copy_threads > 0)
        return post_notice(m, msg, buf, bytes, peer, tag, send);
    for (size_t at = 0; at < bytes || (bytes == 0 && at == 0); at += PIECE_BYTES) {
        const size_t n = bytes - at < PIECE_BYTES ? bytes - at : PIECE_BYTES;
        if (msg->count == DIST_MAX_REQUESTS)
            return FCL_ERROR_INVALID_SHAPE;
        MPI_Request *r = &msg->req[msg->count];
        char *p = (char *)buf + at;
        const int rc = send ? MPI_Isend(p, (int)n, MPI_BYTE, peer, tag, m->comm, r)
                            : MPI_Irecv(p, (int)n, MPI_BYTE, peer, tag, m->comm, r);
        if (rc != MPI_SUCCESS)
            return FCL_ERROR_MPI;
        msg->count++;
        if (bytes == 0)
            break;
    }
    return FCL_OK;
}

fcl_status dist_post(fcl_mpi *m, dist_messages *msg, void *send, void *recv, size_t send_bytes,
                     size_t recv_bytes, int tag)
{
    DIST_TRY(post_pieces(m, msg, recv, recv_bytes, dist_prev(m), tag, 0));
    return post_pieces(m, msg, send, send_bytes, dist_next(m), tag, 1);
}

/* The uploads not already streamed by read_message (started[i]). */
static fcl_status start_uploads(fcl_mpi *m, const dist_upload *up, int n, const int *started)
{
    for (int i = 0; i < n; ++i)
        if (!started[i])
            DIST_TRY(dist_write(m, m->copy_queue, up[i].dst, CL_FALSE, 0, up[i].bytes, up[i].src,
                                0, NULL, up[i].done));
    return n > 0 ? clFlush(m->copy_queue) : FCL_OK;
}

/* The upload that sends copy c's buffer on as it stands, where the step has
 * one, pieces are asked for, and the step's device work was enqueued (no
 * uploads otherwise); it is then marked started. */
static const dist_upload *streamed_upload(const fcl_mpi *m, const dist_copy *c, int device_ok,
                                          const dist_upload *up, int n, int *started)
{
    if (m->upload_piece == 0 || !device_ok)
        return NULL;
    for (int i = 0; i < n; ++i)
        if (!started[i] && up[i].src == c->dst && up[i].bytes == c->bytes) {
            started[i] = 1;
            return &up[i];
        }
    return NULL;
}

fcl_status dist_after_upload(fcl_mpi *m, cl_event *done)
{
    if (*done == NULL)
        return FCL_OK;
    const fcl_status st =
        clEnqueueMarkerWithWaitList(fcl_context_cl_queue(m->ctx), 1, done, NULL);
    clReleaseEvent(*done);
    *done = NULL;
    return st;
}

fcl_status dist_wait_for(fcl_mpi *m, const dist_io *io)
{
    if (io->num_wait == 0)
        return FCL_OK;
    /* a barrier, not a marker: on an out-of-order queue a marker holds back
     * nothing enqueued after it, and the copies and steps that follow read
     * the caller's tensors (flashcl_mpi.h: nothing of yours is read before
     * the wait list completes) */
    return clEnqueueBarrierWithWaitList(fcl_context_cl_queue(m->ctx), io->num_wait,
                                        io->wait_list, NULL);
}

fcl_status dist_end_device(fcl_mpi *m, fcl_status st, const dist_shape *s, dist_write_fn write,
                           void *buffers, const dist_io *io, cl_event *event)
{
    if (event != NULL)
        *event = NULL;
    if (st != FCL_OK)
        return st; /* agreed: nothing is written anywhere */
    cl_command_queue queue = fcl_context_cl_queue(m->ctx);
    cl_event done = NULL;
    st = write(m, s, buffers, io->dev);
    if (st == FCL_OK && event != NULL)
        st = clEnqueueMarkerWithWaitList(queue, 0, NULL, &done);
    if (st == FCL_OK)
        st = clFlush(queue);
    st = dist_first_error(m->comm, st);
    if (st != FCL_OK && done != NULL) {
        clReleaseEvent(done);
        done = NULL;
    }
    if (event != NULL)
        *event = done;
    return st;
}

fcl_status dist_post_after(fcl_mpi *m, dist_messages *msg, cl_event ready, void *send,
                           void *recv, size_t send_bytes, size_t recv_bytes, int tag)
{
    msg->send_ready = ready;
    msg->send_buf = send;
    msg->send_bytes = send_bytes;
    msg->send_tag = tag;
    return post_pieces(m, msg, recv, recv_bytes, dist_prev(m), tag, 0);
}

/* The deferred send, once its read is done (wait: block for it). */
static fcl_status post_deferred(fcl_mpi *m, dist_messages *msg, int wait)
{
    cl_int status = CL_QUEUED;
    cl_int err = wait ? clWaitForEvents(1, &msg->send_ready)
                      : clGetEventInfo(msg->send_ready, CL_EVENT_COMMAND_EXECUTION_STATUS,
                                       sizeof status, &status, NULL);
    if (err == CL_SUCCESS && !wait && status > CL_COMPLETE)
        return FCL_OK; /* not yet */
    clReleaseEvent(msg->send_ready);
    msg->send_ready = NULL;
    /* sent even after a failed read: the next rank waits for it */
    const fcl_status sent = post_pieces(m, msg, msg->send_buf, msg->send_bytes,
                                        dist_next(m), msg->send_tag, 1);
    return err != CL_SUCCESS ? err : status < 0 ? status : sent;
}

/* The copies of msg not yet made. */
static int copies_pending(const dist_messages *msg)
{
    int n = 0;
    for (int i = 0; i < msg->copies; ++i)
        n += !msg->copy[i].done;
    return n;
}

/* Polls the messages (MPI progresses them only inside its calls) and the
 * device's marker until both are done, starting the uploads as soon as the
 * messages are in (or, with m->upload_piece, a copied message's upload
 * piece by piece as it is read); the time between the device's end and the
 * messages' is the step's wait. */
fcl_status dist_finish_step(fcl_mpi *m, dist_messages *msg, int device_ok,
                            const dist_upload *uploads, int n)
{
    cl_event marker = NULL;
    fcl_status st = FCL_OK;
    if (device_ok)
        st = clEnqueueMarkerWithWaitList(fcl_context_cl_queue(m->ctx), 0, NULL, &marker);
    if (st == FCL_OK && marker != NULL)
        st = clFlush(fcl_context_cl_queue(m->ctx));
    int device_done = marker == NULL, messages_done = msg->count == 0;
    int started[DIST_MAX_UPLOADS] = {0};
    double device_end = dist_now();
    while (!messages_done || msg->send_ready != NULL || copies_pending(msg) > 0) {
        if (msg->send_ready != NULL) { /* blocks only when nothing else is left */
            const fcl_status posted = post_deferred(m, msg, device_done);
            if (posted != FCL_OK && st == FCL_OK)
                st = posted;
            if (msg->send_ready == NULL) {
                messages_done = 0; /* its requests are new */
                continue;
            }
        }
        /* copies first: the previous rank's notice needs nothing of this
         * rank, and the next rank's receipt waits for its copy */
        int copied = 0;
        for (int i = 0; i < msg->copies; ++i) {
            dist_copy *c = &msg->copy[i];
            int flag = 0;
            if (c->done)
                continue;
            const int rc = device_done ? MPI_Wait(&c->notice_req, MPI_STATUS_IGNORE)
                                       : MPI_Test(&c->notice_req, &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) {
                c->notice[1] = UINT64_MAX; /* read nothing; the receipt still goes */
                flag = 1;
            }
            if (device_done || flag) {
                const dist_upload *up =
                    rc == MPI_SUCCESS ? streamed_upload(m, c, device_ok, uploads, n, started)
                                      : NULL;
                const fcl_status in = copy_in(m, msg, c, up);
                if (in != FCL_OK && st == FCL_OK)
                    st = rc != MPI_SUCCESS ? FCL_ERROR_MPI : in;
                copied = 1;
            }
        }
        if (copied) {
            messages_done = 0; /* the receipts are new */
            continue;
        }
        if (!messages_done) {
            if (device_done && copies_pending(msg) == 0) { /* nothing else to watch: block in MPI */
                if (MPI_Waitall(msg->count, msg->req, MPI_STATUSES_IGNORE) != MPI_SUCCESS &&
                    st == FCL_OK)
                    st = FCL_ERROR_MPI;
                messages_done = 1;
                continue;
            }
            int flag = 0;
            if (MPI_Testall(msg->count, msg->req, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
                st = st != FCL_OK ? st : FCL_ERROR_MPI;
                flag = 1;
            }
            if (flag) {
                messages_done = 1;
                continue;
            }
        }
        if (!device_done) {
            cl_int status = CL_QUEUED;
            cl_int err = clGetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status,
                                        &status, NULL);
            if (err != CL_SUCCESS || status <= CL_COMPLETE) {
                if (st == FCL_OK)
                    st = err != CL_SUCCESS ? err : status < 0 ? status : FCL_OK;
                device_done = 1;
                device_end = dist_now();
                dist_mark_now(m, "device seen done, messages not");
                continue;
            }
        }
        const struct timespec pause = {0, 20000}; /* 20 us: leave the cores to the device */
        nanosleep(&pause, NULL);
    }
    const double messages_end = dist_now();
    dist_mark_now(m, "messages in");
    if (msg->count > 0 && messages_end > device_end && device_done)
        m->timing.wait_seconds += messages_end - device_end;
    msg->count = 0;
    msg->sends = 0;
    msg->copies = 0;
    if (st == FCL_OK && device_ok)
        st = start_uploads(m, uploads, n, started);
    if (marker != NULL) {
        cl_int err = clWaitForEvents(1, &marker);
        if (err != CL_SUCCESS && st == FCL_OK)
            st = err;
        clReleaseEvent(marker);
        dist_mark_now(m, "device done");
    }
    return st;
}

/* ---- K/V shards around the ring ------------------------------------------ */

enum { TAG_KV = 1 };

/* The source of step t: rank - t (mod R). */
int dist_source(const dist_shape *s, int t) { return (s->rank - t % s->ranks + s->ranks) % s->ranks; }

static size_t kv_bytes(const dist_shape *s, int source)
{
    return 2 * dist_kv_elems(s, dist_rows_of(s, source)) * s->elem;
}

fcl_status dist_kv_begin(fcl_mpi *m, const dist_shape *s, dist_kv_ring *kv)
{
    if (m->copy_queue == NULL) {
        cl_int err = CL_SUCCESS;
        m->copy_queue = clCreateCommandQueue(fcl_context_cl_context(m->ctx),
                                             fcl_context_cl_device(m->ctx), 0, &err);
        if (err != CL_SUCCESS) {
            m->copy_queue = NULL;
            return err;
        }
    }
    const size_t most = 2 * dist_kv_elems(s, s->max_rows) * s->elem;
    DIST_TRY(dist_buffer_get(m, SLOT_KV0, most, &kv->dev[0]));
    DIST_TRY(dist_buffer_get(m, SLOT_KV1, most, &kv->dev[1]));
    DIST_TRY(dist_staging_get(m, SLOT_HOST_KV0, most, &kv->staging[0], &kv->host[0]));
    DIST_TRY(dist_staging_get(m, SLOT_HOST_KV1, most, &kv->staging[1], &kv->host[1]));
    return FCL_OK;
}

fcl_status dist_kv_load(fcl_mpi *m, const dist_shape *s, dist_kv_ring *kv, const void *k,
                        const void *v)
{
    const size_t half = s->kv_elems * s->elem;
    memcpy(kv->host[0], k, half);
    memcpy((char *)kv->host[0] + half, v, half);
    return dist_write(m, fcl_context_cl_queue(m->ctx), kv->dev[0], CL_FALSE, 0, 2 * half,
                      kv->host[0], 0, NULL, NULL);
}

fcl_status dist_kv_load_device(fcl_mpi *m, const dist_shape *s, dist_kv_ring *kv,
                               const fcl_mpi_tensor *k, const fcl_mpi_tensor *v)
{
    cl_command_queue queue = fcl_context_cl_queue(m->ctx);
    const size_t half = s->kv_elems * s->elem;
    DIST_TRY(clEnqueueCopyBuffer(queue, k->mem, kv->dev[0], k->offset * s->elem, 0, half, 0, NULL,
                                 NULL));
    DIST_TRY(clEnqueueCopyBuffer(queue, v->mem, kv->dev[0], v->offset * s->elem, half, half, 0,
                                 NULL, NULL));
    cl_event copied = NULL;
    DIST_TRY(clEnqueueMarkerWithWaitList(queue, 0, NULL, &copied));
    /* read on the copy queue, while step 0 computes on the context's */
    fcl_status st = clFlush(queue);
    if (st == FCL_OK)
        st = dist_read(m, m->copy_queue, kv->dev[0], CL_FALSE, 0, 2 * half, kv->host[0], 1,
                       &copied, &kv->host_ready);
    if (st == FCL_OK)
        st = clFlush(m->copy_queue);
    clReleaseEvent(copied);
    return st;
}

fcl_status dist_kv_post(fcl_mpi *m, const dist_shape *s, dist_kv_ring *kv, int t,
                        dist_messages *msg)
{
    if (t + 1 >= s->ranks)
        return FCL_OK;
    void *send = kv->host[t % 2], *recv = kv->host[(t + 1) % 2];
    const size_t send_bytes = kv_bytes(s, dist_source(s, t)),
                 recv_bytes = kv_bytes(s, dist_source(s, t + 1));
    if (kv->host_ready != NULL) { /* the own shard, once read to host memory */
        const cl_event ready = kv->host_ready;
        kv->host_ready = NULL;
        return dist_post_after(m, msg, ready, send, recv, send_bytes, recv_bytes, TAG_KV);
    }
    return dist_post(m, msg, send, recv, send_bytes, recv_bytes, TAG_KV);
}

void dist_kv_end(fcl_mpi *m, dist_kv_ring *kv)
{
    if (m->copy_queue != NULL)
        clFinish(m->copy_queue);
    cl_event *left[] = {&kv->ready, &kv->host_ready};
    for (size_t i = 0; i < sizeof left / sizeof left[0]; ++i) {
        if (*left[i] != NULL)
            clReleaseEvent(*left[i]);
        *left[i] = NULL;
    }
}

int dist_kv_upload(const dist_shape *s, dist_kv_ring *kv, int t, dist_upload *up)
{
    if (t + 1 >= s->ranks)
        return 0;
    const int n = (t + 1) % 2; /* its last reader, step t - 1, has finished */
    *up = (dist_upload){kv->dev[n], kv->host[n], kv_bytes(s, dist_source(s, t + 1)), &kv->ready};
    return 1;
}
