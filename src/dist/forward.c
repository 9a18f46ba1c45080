/* forward.c - the ring attention forward: the queries stay, the K/V shards
 * go round; each step's partial result is widened to fp32 and merged into
 * the running one by combine.cl's log-sum-exp rule, steps in ring order;
 * the last merge rounds to the storage type once. */
#include "dist_internal.h"

#include <math.h>
#include <string.h>

typedef struct forward_buffers {
    cl_mem q, part_o, part_lse, acc, acc_lse[2], out, out_lse, staging;
    void *host_out;
    dist_kv_ring kv;
    int cur;                      /* which acc_lse holds the running result's LSE */
    int on_device;                /* the cl_mem form: no upload of Q, no read-back */
} forward_buffers;

static fcl_status forward_buffers_get(fcl_mpi *m, const dist_shape *s, void *buffers)
{
    forward_buffers *b = buffers;
    const size_t q_bytes = s->q_elems * s->elem;
    const size_t rows = s->d->batch * s->d->heads_q * s->rows; /* LSE rows */
    DIST_TRY(dist_buffer_get(m, SLOT_PART_O, q_bytes, &b->part_o));
    DIST_TRY(dist_buffer_get(m, SLOT_PART_LSE, rows * sizeof(float), &b->part_lse));
    /* two fp32 row arrays (running result, this step's part) and their LSE */
    DIST_TRY(dist_buffer_get(m, SLOT_ACC, 2 * s->q_elems * sizeof(float), &b->acc));
    DIST_TRY(dist_buffer_get(m, SLOT_ACC_LSE0, 2 * rows * sizeof(float), &b->acc_lse[0]));
    DIST_TRY(dist_buffer_get(m, SLOT_ACC_LSE1, 2 * rows * sizeof(float), &b->acc_lse[1]));
    /* LSE's own buffer: the cl_mem form's when its caller wants none */
    DIST_TRY(dist_buffer_get(m, SLOT_OUT_B, rows * sizeof(float), &b->out_lse));
    if (!b->on_device) { /* the host form's Q and O on the device, and O's staging */
        DIST_TRY(dist_buffer_get(m, SLOT_Q, q_bytes, &b->q));
        DIST_TRY(dist_buffer_get(m, SLOT_OUT_A, q_bytes, &b->out));
        DIST_TRY(dist_staging_get(m, SLOT_HOST_OUT, q_bytes + rows * sizeof(float), &b->staging,
                                  &b->host_out));
    }
    return dist_kv_begin(m, s, &b->kv);
}

/* Step t's calls against the shard in hand, widened into part slot `slot`
 * (0 at step 0, which covers every row; 1 after) and merged.  Q is read
 * from q (the caller's buffer, or the host form's upload). */
static fcl_status forward_step(fcl_mpi *m, const dist_shape *s, forward_buffers *b,
                               const fcl_mpi_tensor *q, int t)
{
    const fcl_mpi_desc *d = s->d;
    dist_call calls[DIST_MAX_CALLS];
    size_t n = 0;
    const int source = dist_source(s, t);
    DIST_TRY(dist_step_calls(d, s->ranks, s->rank, source, calls, &n));
    if (n == 0)
        return FCL_OK; /* the causal mask hides this shard from every query here */
    dist_kernels *k32 = NULL, *kd = NULL; /* fp32 rows; the storage type's parts */
    DIST_TRY(dist_kernels_for(m, FCL_DTYPE_FP32, &k32));
    DIST_TRY(dist_kernels_for(m, d->dtype, &kd));
    const size_t rows = d->batch * d->heads_q * s->rows;
    const size_t slot = t == 0 ? 0 : 1;
    size_t covered = 0;
    for (size_t i = 0; i < n; ++i)
        covered += calls[i].nq;
    if (slot == 1 && covered < s->rows) {
        /* rows no call of this step reaches weigh nothing (LSE -inf) and
         * hold zeros, since the merge multiplies them by that weight 0 */
        const float empty = -INFINITY, zero = 0.0f;
        DIST_TRY(dist_fill(m, b->acc_lse[b->cur], &empty, sizeof empty, rows * sizeof(float),
                           rows * sizeof(float)));
        DIST_TRY(dist_fill(m, b->acc, &zero, sizeof zero, s->q_elems * sizeof(float),
                           s->q_elems * sizeof(float)));
    }
    for (size_t i = 0; i < n; ++i) {
        fcl_attention_desc cd;
        dist_call_desc(s, &calls[i], dist_rows_of(s, source), &cd);
        cd.q.offset += q->offset;
        cl_mem kv = b->kv.dev[t % 2];
        DIST_TRY(fcl_attention_forward(m->ctx, &cd, q->mem, kv, kv, b->part_o, b->part_lse, 0, NULL,
                                       NULL));
        DIST_TRY(dist_widen(m, kd, s, d->heads_q, &cd.o, b->part_o, b->part_lse, calls[i].nq,
                            calls[i].q0, s->rows, b->acc, slot * s->q_elems, b->acc_lse[b->cur],
                            slot * rows));
    }
    if (slot == 1) { /* running result (+) part, in place; LSE into the other buffer */
        const fcl_layout rows_layout =
            fcl_layout_contiguous(FCL_LAYOUT_BHSD, d->heads_q, s->rows, d->head_dim);
        DIST_TRY(dist_combine(m, k32, s, b->acc, b->acc_lse[b->cur], 2, b->acc, &rows_layout,
                              b->acc_lse[1 - b->cur], 0, 1));
        b->cur = 1 - b->cur;
    }
    return FCL_OK;
}

/* The ring itself, after this rank's own K/V shard was loaded (st: how
 * that went); the running result in b->acc, its LSE in b->acc_lse[b->cur]. */
static fcl_status forward_ring(fcl_mpi *m, const dist_shape *s, forward_buffers *b,
                               const fcl_mpi_tensor *q, fcl_status st)
{
    const double ring_start = dist_now();
    b->cur = 0;
    /* A rank that failed keeps passing messages, so that nobody waits for
     * one that never comes; the status is shared at the end. */
    dist_stamps stamps = {NULL, NULL, 0};
    dist_mark_now(m, "ring start");
    for (int t = 0; t < m->size; ++t) {
        m->trace_step = t;
        dist_messages msg = {.count = 0};
        fcl_status sent = dist_kv_post(m, s, &b->kv, t, &msg);
        dist_mark_now(m, "messages posted");
        if (st == FCL_OK)
            st = dist_after_upload(m, &b->kv.ready); /* this step's shard is in */
        if (st == FCL_OK)
            st = dist_stamp_in(m, &stamps);
        if (st == FCL_OK)
            st = forward_step(m, s, b, q, t);
        if (st == FCL_OK)
            st = dist_stamp_end(m, &stamps);
        dist_mark_now(m, "step enqueued");
        dist_upload up[DIST_MAX_UPLOADS];
        const int n = dist_kv_upload(s, &b->kv, t, &up[0]);
        const fcl_status waited = dist_finish_step(m, &msg, st == FCL_OK, up, n);
        st = st != FCL_OK ? st : sent != FCL_OK ? sent : waited;
        dist_stamps_add(m, &stamps);
    }
    dist_kv_end(m, &b->kv);
    dist_mark_now(m, "copy queue done");
    m->timing.ring_seconds = dist_now() - ring_start;
    m->timing.steps = m->size;
    return st;
}

/* The running result rounded to the storage type into out[IO_O] and its
 * LSE into out[IO_LSE] (the handle's own buffer when that has no mem). */
static fcl_status forward_write(fcl_mpi *m, const dist_shape *s, void *buffers,
                                const fcl_mpi_tensor *out)
{
    forward_buffers *b = buffers;
    const fcl_mpi_desc *d = s->d;
    dist_kernels *kd = NULL;
    DIST_TRY(dist_kernels_for(m, d->dtype, &kd));
    fcl_layout ol = fcl_layout_contiguous(d->layout, d->heads_q, s->rows, d->head_dim);
    ol.offset = out[IO_O].offset;
    const fcl_mpi_tensor lse =
        out[IO_LSE].mem != NULL ? out[IO_LSE] : (fcl_mpi_tensor){b->out_lse, 0};
    return dist_combine(m, kd, s, b->acc, b->acc_lse[b->cur], 1, out[IO_O].mem, &ol, lse.mem,
                        lse.offset, 1);
}

/* The host form's end of the ring: the result into the handle's buffers,
 * read into its staging memory. */
static fcl_status forward_read(fcl_mpi *m, const dist_shape *s, forward_buffers *b)
{
    fcl_mpi_tensor out[DIST_TENSORS];
    memset(out, 0, sizeof out);
    out[IO_O].mem = b->out;
    out[IO_LSE].mem = b->out_lse;
    DIST_TRY(forward_write(m, s, b, out));
    cl_command_queue queue = fcl_context_cl_queue(m->ctx);
    const size_t q_bytes = s->q_elems * s->elem;
    DIST_TRY(dist_read(m, queue, b->out, CL_FALSE, 0, q_bytes, b->host_out, 0, NULL, NULL));
    return dist_read(m, queue, b->out_lse, CL_TRUE, 0,
                     s->d->batch * s->d->heads_q * s->rows * sizeof(float),
                     (char *)b->host_out + q_bytes, 0, NULL, NULL);
}

fcl_status fcl_mpi_attention_forward_host(fcl_mpi *m, const fcl_mpi_desc *desc, const void *q,
                                          const void *k, const void *v, void *o, float *lse)
{
    if (m == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    dist_shape s;
    forward_buffers b;
    memset(&b, 0, sizeof b);
    const void *const arrays[DIST_TENSORS] = {q, k, v, o, lse};
    const dist_io io = dist_io_host(arrays);
    fcl_status st = dist_begin(m, desc, DIST_FORWARD, &io, &s, forward_buffers_get, &b);
    if (st != FCL_OK)
        return st;
    const fcl_mpi_desc *d = desc;
    if (m->size == 1) { /* one rank: the plain call */
        fcl_attention_desc plain;
        dist_plain_desc(&s, &plain);
        return dist_done(m, fcl_attention_forward_host(m->ctx, &plain, q, k, v, o, lse));
    }

    st = dist_write(m, fcl_context_cl_queue(m->ctx), b.q, CL_TRUE, 0, s.q_elems * s.elem, q, 0,
                    NULL, NULL);
    if (st == FCL_OK)
        st = dist_kv_load(m, &s, &b.kv, k, v);
    const fcl_mpi_tensor dq = {b.q, 0};
    st = forward_ring(m, &s, &b, &dq, st);
    if (st == FCL_OK)
        st = forward_read(m, &s, &b);
    st = dist_first_error(m->comm, st);
    if (st == FCL_OK) {
        memcpy(o, b.host_out, s.q_elems * s.elem);
        if (lse != NULL)
            memcpy(lse, (char *)b.host_out + s.q_elems * s.elem,
                   d->batch * d->heads_q * s.rows * sizeof(float));
    }
    return dist_done(m, st);
}

fcl_status fcl_mpi_attention_forward(fcl_mpi *m, const fcl_mpi_desc *desc, fcl_mpi_tensor q,
                                     fcl_mpi_tensor k, fcl_mpi_tensor v, fcl_mpi_tensor o,
                                     fcl_mpi_tensor lse, cl_uint num_wait,
                                     const cl_event *wait_list, cl_event *event)
{
    if (event != NULL)
        *event = NULL;
    if (m == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    dist_shape s;
    forward_buffers b;
    memset(&b, 0, sizeof b);
    b.on_device = 1;
    const fcl_mpi_tensor tensors[DIST_TENSORS] = {q, k, v, o, lse};
    const dist_io io = dist_io_device(tensors, num_wait, wait_list);
    fcl_status st = dist_begin(m, desc, DIST_FORWARD, &io, &s, forward_buffers_get, &b);
    if (st != FCL_OK)
        return st;
    if (m->size == 1) { /* one rank: the plain call */
        fcl_attention_desc plain;
        dist_plain_desc(&s, &plain);
        dist_plain_offsets(tensors, &plain);
        return dist_done(m, fcl_attention_forward(m->ctx, &plain, q.mem, k.mem, v.mem, o.mem,
                                                  lse.mem, num_wait, wait_list, event));
    }

    st = dist_wait_for(m, &io);
    if (st == FCL_OK)
        st = dist_kv_load_device(m, &s, &b.kv, &k, &v);
    st = forward_ring(m, &s, &b, &q, st);
    st = dist_end_device(m, dist_first_error(m->comm, st), &s, forward_write, &b, &io, event);
    return dist_done(m, st);
}
