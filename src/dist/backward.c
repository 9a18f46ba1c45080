/* backward.c - the ring attention backward.  Each step calls flashcl's
 * backward with this rank's queries, its global O and LSE (so P is exact)
 * and the K/V shard in hand.  dQ parts are summed here in fp32; the dK/dV
 * parts of a shard are summed in fp32 as they follow it round the ring, one
 * step behind (a shard's sum leaves a rank while that rank computes its
 * next step).  The finished sum is rounded to the storage type by the rank
 * that finished it and comes home after the last step in that type, laid
 * out as the owner's dK and dV: half the bytes of the fp32 sum on the one
 * hop nothing hides, and no upload at home (the same kernel rounds the same
 * sum, so the bits are those of rounding at home). */
#include "dist_internal.h"

#include <string.h>

enum { TAG_DKV = 2 };

typedef struct backward_buffers {
    cl_mem q, o, dout, lse, call_lse, dq_part, dk_part, dv_part, dq_acc, dkv_step[2], dkv_in;
    cl_mem dkv_final;             /* the last step's sum in the storage type, as sent home */
    cl_mem dq_out, acc_in_mem, acc_out_mem, staging;
    void *acc_in, *acc_out, *host_out;
    size_t dkv_elems;             /* of one of dK, dV as a row array: max_rows rows */
    cl_event acc_ready;           /* acc_in's upload into dkv_in */
    cl_event acc_out_ready;       /* the read of a step's sum into acc_out */
    dist_kv_ring kv;
    fcl_mpi_tensor in[DIST_TENSORS]; /* where Q, O, LSE, dO are read: the caller's buffers,
                                        or the host form's uploads */
    int on_device;                /* the cl_mem form: no uploads, no read-back */
} backward_buffers;

/* Bytes of a step's fp32 dK/dV sum (dK then dV, max_rows rows each). */
static size_t sum_bytes(const backward_buffers *b) { return 2 * b->dkv_elems * sizeof(float); }

static fcl_status backward_buffers_get(fcl_mpi *m, const dist_shape *s, void *buffers)
{
    backward_buffers *b = buffers;
    const fcl_mpi_desc *d = s->d;
    const size_t q_bytes = s->q_elems * s->elem;
    const size_t lse_bytes = d->batch * d->heads_q * s->rows * sizeof(float);
    const size_t kv_most = dist_kv_elems(s, s->max_rows);
    b->dkv_elems = kv_most;
    if (!b->on_device) { /* the host form's inputs and outputs on the device */
        DIST_TRY(dist_buffer_get(m, SLOT_Q, q_bytes, &b->q));
        DIST_TRY(dist_buffer_get(m, SLOT_O, q_bytes, &b->o));
        DIST_TRY(dist_buffer_get(m, SLOT_DOUT, q_bytes, &b->dout));
        DIST_TRY(dist_buffer_get(m, SLOT_LSE, lse_bytes, &b->lse));
        DIST_TRY(dist_buffer_get(m, SLOT_OUT_A, q_bytes, &b->dq_out));
        DIST_TRY(dist_staging_get(m, SLOT_HOST_OUT, q_bytes, &b->staging, &b->host_out));
    }
    DIST_TRY(dist_buffer_get(m, SLOT_OUT_C, 2 * kv_most * s->elem, &b->dkv_final));
    DIST_TRY(dist_buffer_get(m, SLOT_CALL_LSE, lse_bytes, &b->call_lse));
    DIST_TRY(dist_buffer_get(m, SLOT_PART_O, q_bytes, &b->dq_part));
    DIST_TRY(dist_buffer_get(m, SLOT_DK_PART, kv_most * s->elem, &b->dk_part));
    DIST_TRY(dist_buffer_get(m, SLOT_DV_PART, kv_most * s->elem, &b->dv_part));
    DIST_TRY(dist_buffer_get(m, SLOT_ACC, s->q_elems * sizeof(float), &b->dq_acc));
    /* a step's sums: two, as one is read back while the next step fills the other */
    DIST_TRY(dist_buffer_get(m, SLOT_DKV_STEP, 2 * kv_most * sizeof(float), &b->dkv_step[0]));
    DIST_TRY(dist_buffer_get(m, SLOT_DKV_STEP1, 2 * kv_most * sizeof(float), &b->dkv_step[1]));
    DIST_TRY(dist_buffer_get(m, SLOT_DKV_IN, 2 * kv_most * sizeof(float), &b->dkv_in));
    DIST_TRY(dist_staging_get(m, SLOT_HOST_ACC_IN, 2 * kv_most * sizeof(float), &b->acc_in_mem,
                              &b->acc_in));
    DIST_TRY(dist_staging_get(m, SLOT_HOST_ACC_OUT, 2 * kv_most * sizeof(float), &b->acc_out_mem,
                              &b->acc_out));
    return dist_kv_begin(m, s, &b->kv);
}

/* Step t: flashcl's backward for each call, its dQ part added to dQ's sum
 * and its dK/dV parts to this step's sums for the shard in hand. */
static fcl_status backward_step(fcl_mpi *m, const dist_shape *s, backward_buffers *b, int t)
{
    const fcl_mpi_desc *d = s->d;
    dist_call calls[DIST_MAX_CALLS];
    size_t n = 0;
    const int source = dist_source(s, t);
    DIST_TRY(dist_step_calls(d, s->ranks, s->rank, source, calls, &n));
    dist_kernels *kd = NULL;
    DIST_TRY(dist_kernels_for(m, d->dtype, &kd));
    const float zero = 0.0f;
    DIST_TRY(dist_fill(m, b->dkv_step[t % 2], &zero, sizeof zero, 0, sum_bytes(b)));
    for (size_t i = 0; i < n; ++i) {
        const dist_call *c = &calls[i];
        fcl_attention_desc cd;
        dist_call_desc(s, c, dist_rows_of(s, source), &cd);
        const fcl_mpi_tensor *in = b->in;
        cd.q.offset += in[IO_Q].offset;
        cd.o.offset += in[IO_O].offset;
        cd.dout.offset += in[IO_DOUT].offset;
        DIST_TRY(dist_gather_lse(m, in[IO_LSE].mem, in[IO_LSE].offset, d->batch * d->heads_q,
                                 s->rows, c->q0, c->nq, b->call_lse));
        cl_mem kv = b->kv.dev[t % 2];
        DIST_TRY(fcl_attention_backward(m->ctx, &cd, in[IO_Q].mem, kv, kv, in[IO_O].mem,
                                        b->call_lse, in[IO_DOUT].mem, b->dq_part, b->dk_part,
                                        b->dv_part, 0, NULL, NULL));
        DIST_TRY(dist_accumulate(m, kd, s, d->heads_q, b->dq_acc, 0, s->rows, c->q0, b->dq_part,
                                 &cd.dq, c->nq, 0));
        DIST_TRY(dist_accumulate(m, kd, s, d->heads_kv, b->dkv_step[t % 2], 0, s->max_rows, c->k0,
                                 b->dk_part, &cd.dk, c->nk, 0));
        DIST_TRY(dist_accumulate(m, kd, s, d->heads_kv, b->dkv_step[t % 2], b->dkv_elems, s->max_rows,
                                 c->k0, b->dv_part, &cd.dv, c->nk, 0));
    }
    return FCL_OK;
}

/* The rows of the shard in hand at step t (its owner's rows). */
static size_t rows_in_hand(const dist_shape *s, int t)
{
    return dist_rows_of(s, dist_source(s, t));
}

/* Bytes of a finished dK/dV sum of `rows` rows as it travels home. */
static size_t final_bytes(const dist_shape *s, size_t rows)
{
    return 2 * dist_kv_elems(s, rows) * s->elem;
}

/* After the last step: the finished sum of the shard in hand rounded to
 * the storage type into dkv_final, dK then dV, each laid out as its
 * owner's tensor (contiguous in the descriptor's layout, owner's rows). */
static fcl_status backward_finish_sum(fcl_mpi *m, const dist_shape *s, backward_buffers *b,
                                      cl_mem sum, size_t owner_rows)
{
    const fcl_mpi_desc *d = s->d;
    dist_kernels *kd = NULL;
    DIST_TRY(dist_kernels_for(m, d->dtype, &kd));
    fcl_layout kl = fcl_layout_contiguous(d->layout, d->heads_kv, owner_rows, d->head_dim);
    DIST_TRY(dist_store(m, kd, s, d->heads_kv, sum, 0, s->max_rows, b->dkv_final, &kl,
                        owner_rows));
    kl.offset = dist_kv_elems(s, owner_rows);
    return dist_store(m, kd, s, d->heads_kv, sum, b->dkv_elems, s->max_rows, b->dkv_final, &kl,
                      owner_rows);
}

/* After step t: the sum that came with the shard (none at step 0) joins
 * this step's, and the total (after the last step: rounded, as it goes
 * home) is read into the staging memory it leaves from, on the copy queue
 * while the next step computes (the message goes when the read is done:
 * dist_post_after).  The host waits for the sum before it enqueues the
 * read (a few milliseconds: the step's kernels are done, dist_finish_step
 * waited for them) rather than giving the read the compute queue's event
 * to wait for: with that event in its wait list, the sums on two H200s
 * reached the next rank only after its step's kernels had ended, and the
 * ring waited 10.3% of the backward at 512k tokens for them; waited here,
 * none (NOTES.md, run 56). */
static fcl_status backward_pass_on(fcl_mpi *m, const dist_shape *s, backward_buffers *b, int t)
{
    const fcl_mpi_desc *d = s->d;
    cl_command_queue queue = fcl_context_cl_queue(m->ctx);
    const int last = t == s->ranks - 1;
    const size_t owner_rows = rows_in_hand(s, t);
    const size_t bytes = last ? final_bytes(s, owner_rows) : sum_bytes(b);
    if (t > 0) {
        dist_kernels *k32 = NULL;
        DIST_TRY(dist_kernels_for(m, FCL_DTYPE_FP32, &k32));
        DIST_TRY(dist_after_upload(m, &b->acc_ready));
        /* both halves (dK, dV) as one row array of 2 * batch entries */
        fcl_layout all = fcl_layout_contiguous(FCL_LAYOUT_BHSD, d->heads_kv, s->max_rows, d->head_dim);
        dist_shape twice = *s;
        fcl_mpi_desc d2 = *d;
        d2.batch *= 2;
        twice.d = &d2;
        DIST_TRY(dist_accumulate(m, k32, &twice, d->heads_kv, b->dkv_step[t % 2], 0, s->max_rows, 0,
                                 b->dkv_in, &all, s->max_rows, 0));
    }
    if (last)
        DIST_TRY(backward_finish_sum(m, s, b, b->dkv_step[t % 2], owner_rows));
    cl_mem from = last ? b->dkv_final : b->dkv_step[t % 2];
    DIST_TRY(clFinish(queue));
    dist_mark_now(m, "sum added");
    /* acc_in's upload is over before its next message arrives */
    DIST_TRY(clFinish(m->copy_queue));
    dist_mark_now(m, "copy queue idle");
    DIST_TRY(dist_read(m, m->copy_queue, from, CL_FALSE, 0, bytes, b->acc_out, 0, NULL,
                       &b->acc_out_ready));
    return clFlush(m->copy_queue);
}

/* dQ's sum rounded to the storage type into out[IO_DQ]. */
static fcl_status backward_write_dq(fcl_mpi *m, const dist_shape *s, backward_buffers *b,
                                    const fcl_mpi_tensor *out)
{
    const fcl_mpi_desc *d = s->d;
    dist_kernels *kd = NULL;
    DIST_TRY(dist_kernels_for(m, d->dtype, &kd));
    fcl_layout ql = fcl_layout_contiguous(d->layout, d->heads_q, s->rows, d->head_dim);
    ql.offset = out[IO_DQ].offset;
    return dist_store(m, kd, s, d->heads_q, b->dq_acc, 0, s->rows, out[IO_DQ].mem, &ql, s->rows);
}

/* The cl_mem form's outputs: dQ, and this rank's own dK and dV, home in
 * acc_in in their final form (written and waited for: the next call's
 * messages land in acc_in). */
static fcl_status backward_write(fcl_mpi *m, const dist_shape *s, void *buffers,
                                 const fcl_mpi_tensor *out)
{
    backward_buffers *b = buffers;
    DIST_TRY(backward_write_dq(m, s, b, out));
    cl_command_queue queue = fcl_context_cl_queue(m->ctx);
    const size_t kv_bytes = s->kv_elems * s->elem;
    DIST_TRY(dist_write(m, queue, out[IO_DK].mem, CL_TRUE, out[IO_DK].offset * s->elem,
                        kv_bytes, b->acc_in, 0, NULL, NULL));
    return dist_write(m, queue, out[IO_DV].mem, CL_TRUE, out[IO_DV].offset * s->elem, kv_bytes,
                      (char *)b->acc_in + kv_bytes, 0, NULL, NULL);
}

/* The host form's dQ: into the handle's buffer, read into its staging
 * memory (dK and dV are home in acc_in already). */
static fcl_status backward_read(fcl_mpi *m, const dist_shape *s, backward_buffers *b)
{
    fcl_mpi_tensor out[DIST_TENSORS];
    memset(out, 0, sizeof out);
    out[IO_DQ].mem = b->dq_out;
    DIST_TRY(backward_write_dq(m, s, b, out));
    return dist_read(m, fcl_context_cl_queue(m->ctx), b->dq_out, CL_TRUE, 0, s->q_elems * s->elem,
                     b->host_out, 0, NULL, NULL);
}

/* A step's sum to the next rank (once read back, when it was) and the
 * previous rank's into acc_in; the sizes differ on the last hop home
 * (the shard sent is another rank's). */
static fcl_status post_sum(fcl_mpi *m, backward_buffers *b, dist_messages *msg,
                           size_t send_bytes, size_t recv_bytes)
{
    if (b->acc_out_ready == NULL) /* nothing read (a failure here): send what is there */
        return dist_post(m, msg, b->acc_out, b->acc_in, send_bytes, recv_bytes, TAG_DKV);
    const cl_event ready = b->acc_out_ready;
    b->acc_out_ready = NULL;
    return dist_post_after(m, msg, ready, b->acc_out, b->acc_in, send_bytes, recv_bytes,
                           TAG_DKV);
}

/* The host form's inputs to the handle's buffers (b->in says where). */
static fcl_status upload_inputs(fcl_mpi *m, const dist_shape *s, backward_buffers *b,
                                const void *q, const void *o, const float *lse, const void *dout)
{
    cl_command_queue queue = fcl_context_cl_queue(m->ctx);
    const size_t q_bytes = s->q_elems * s->elem;
    b->in[IO_Q].mem = b->q;
    b->in[IO_O].mem = b->o;
    b->in[IO_DOUT].mem = b->dout;
    b->in[IO_LSE].mem = b->lse;
    DIST_TRY(dist_write(m, queue, b->q, CL_FALSE, 0, q_bytes, q, 0, NULL, NULL));
    DIST_TRY(dist_write(m, queue, b->o, CL_FALSE, 0, q_bytes, o, 0, NULL, NULL));
    DIST_TRY(dist_write(m, queue, b->dout, CL_FALSE, 0, q_bytes, dout, 0, NULL, NULL));
    DIST_TRY(dist_write(m, queue, b->lse, CL_FALSE, 0,
                        s->d->batch * s->d->heads_q * s->rows * sizeof(float), lse, 0, NULL,
                        NULL));
    /* the host arrays are the caller's: done with them before returning */
    return clFinish(queue);
}

/* dQ's fp32 sum starts at zero. */
static fcl_status clear_dq(fcl_mpi *m, const dist_shape *s, backward_buffers *b)
{
    const float zero = 0.0f;
    return dist_fill(m, b->dq_acc, &zero, sizeof zero, 0, s->q_elems * sizeof(float));
}

/* The ring itself, after this rank's own K/V shard was loaded (st: how
 * that went and what came before); ends with this rank's own dK and dV
 * home in acc_in, in the storage type and the layout of its tensors. */
static fcl_status backward_ring(fcl_mpi *m, const dist_shape *s, backward_buffers *b,
                                fcl_status st)
{
    const double ring_start = dist_now();
    const size_t acc_bytes = sum_bytes(b);
    dist_stamps stamps = {NULL, NULL, 0};
    /* A rank that failed keeps passing messages (see the forward). */
    dist_mark_now(m, "ring start");
    for (int t = 0; t < m->size; ++t) {
        m->trace_step = t;
        dist_messages msg = {.count = 0};
        fcl_status sent = dist_kv_post(m, s, &b->kv, t, &msg);
        if (t > 0 && sent == FCL_OK) /* the previous step's sum on, this one's in */
            sent = post_sum(m, b, &msg, acc_bytes, acc_bytes);
        dist_mark_now(m, "messages posted");
        if (st == FCL_OK)
            st = dist_after_upload(m, &b->kv.ready); /* this step's shard is in */
        if (st == FCL_OK)
            st = dist_stamp_in(m, &stamps);
        if (st == FCL_OK)
            st = backward_step(m, s, b, t);
        if (st == FCL_OK)
            st = dist_stamp_end(m, &stamps);
        dist_mark_now(m, "step enqueued");
        /* while the device computes: the next shard, and the sum that came
         * with this one, to the device */
        dist_upload up[DIST_MAX_UPLOADS];
        int n = dist_kv_upload(s, &b->kv, t, &up[0]);
        if (t > 0)
            up[n++] = (dist_upload){b->dkv_in, b->acc_in, acc_bytes, &b->acc_ready};
        const fcl_status waited = dist_finish_step(m, &msg, st == FCL_OK, up, n);
        st = st != FCL_OK ? st : sent != FCL_OK ? sent : waited;
        dist_stamps_add(m, &stamps);
        if (st == FCL_OK)
            st = backward_pass_on(m, s, b, t);
        dist_mark_now(m, "sum read enqueued");
    }
    m->trace_step = m->size; /* the last hop */
    if (b->acc_ready != NULL)
        clReleaseEvent(b->acc_ready);
    b->acc_ready = NULL;
    /* The last sums go home, rounded: shard rank + 1's to the next rank,
     * ours from the previous.  The copy queue is waited for after it, so
     * that the wait for the last sum's read counts in the last hop. */
    dist_messages msg = {.count = 0};
    const double waited_before = m->timing.wait_seconds;
    const fcl_status sent = post_sum(m, b, &msg, final_bytes(s, rows_in_hand(s, m->size - 1)),
                                     final_bytes(s, s->rows));
    const fcl_status waited = dist_finish_step(m, &msg, 0, NULL, 0);
    m->timing.home_seconds = m->timing.wait_seconds - waited_before;
    dist_mark_now(m, "home");
    dist_kv_end(m, &b->kv);
    dist_mark_now(m, "copy queue done");
    st = st != FCL_OK ? st : sent != FCL_OK ? sent : waited;
    if (b->acc_out_ready != NULL) /* left by a failure */
        clReleaseEvent(b->acc_out_ready);
    b->acc_out_ready = NULL;
    m->timing.ring_seconds = dist_now() - ring_start;
    m->timing.steps = m->size;
    return st;
}

fcl_status fcl_mpi_attention_backward_host(fcl_mpi *m, const fcl_mpi_desc *desc, const void *q,
                                           const void *k, const void *v, const void *o,
                                           const float *lse, const void *dout, void *dq, void *dk,
                                           void *dv)
{
    if (m == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    dist_shape s;
    backward_buffers b;
    memset(&b, 0, sizeof b);
    const void *const arrays[DIST_TENSORS] = {q, k, v, o, lse, dout, dq, dk, dv};
    const dist_io io = dist_io_host(arrays);
    fcl_status st = dist_begin(m, desc, DIST_BACKWARD, &io, &s, backward_buffers_get, &b);
    if (st != FCL_OK)
        return st;
    if (m->size == 1) { /* one rank: the plain call */
        fcl_attention_desc plain;
        dist_plain_desc(&s, &plain);
        return dist_done(m, fcl_attention_backward_host(m->ctx, &plain, q, k, v, o, lse, dout, dq,
                                                        dk, dv));
    }

    st = upload_inputs(m, &s, &b, q, o, lse, dout);
    if (st == FCL_OK)
        st = clear_dq(m, &s, &b);
    if (st == FCL_OK)
        st = dist_kv_load(m, &s, &b.kv, k, v);
    st = backward_ring(m, &s, &b, st);
    if (st == FCL_OK)
        st = backward_read(m, &s, &b);
    st = dist_first_error(m->comm, st);
    if (st == FCL_OK) {
        const size_t kv_bytes = s.kv_elems * s.elem;
        memcpy(dq, b.host_out, s.q_elems * s.elem);
        memcpy(dk, b.acc_in, kv_bytes);
        memcpy(dv, (char *)b.acc_in + kv_bytes, kv_bytes);
    }
    return dist_done(m, st);
}

fcl_status fcl_mpi_attention_backward(fcl_mpi *m, const fcl_mpi_desc *desc, fcl_mpi_tensor q,
                                      fcl_mpi_tensor k, fcl_mpi_tensor v, fcl_mpi_tensor o,
                                      fcl_mpi_tensor lse, fcl_mpi_tensor dout, fcl_mpi_tensor dq,
                                      fcl_mpi_tensor dk, fcl_mpi_tensor dv, cl_uint num_wait,
                                      const cl_event *wait_list, cl_event *event)
{
    if (event != NULL)
        *event = NULL;
    if (m == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    dist_shape s;
    backward_buffers b;
    memset(&b, 0, sizeof b);
    b.on_device = 1;
    const fcl_mpi_tensor tensors[DIST_TENSORS] = {q, k, v, o, lse, dout, dq, dk, dv};
    const dist_io io = dist_io_device(tensors, num_wait, wait_list);
    fcl_status st = dist_begin(m, desc, DIST_BACKWARD, &io, &s, backward_buffers_get, &b);
    if (st != FCL_OK)
        return st;
    if (m->size == 1) { /* one rank: the plain call */
        fcl_attention_desc plain;
        dist_plain_desc(&s, &plain);
        dist_plain_offsets(tensors, &plain);
        return dist_done(m, fcl_attention_backward(m->ctx, &plain, q.mem, k.mem, v.mem, o.mem,
                                                   lse.mem, dout.mem, dq.mem, dk.mem, dv.mem,
                                                   num_wait, wait_list, event));
    }

    memcpy(b.in, tensors, sizeof b.in);
    st = dist_wait_for(m, &io);
    if (st == FCL_OK)
        st = clear_dq(m, &s, &b);
    if (st == FCL_OK)
        st = dist_kv_load_device(m, &s, &b.kv, &k, &v);
    st = backward_ring(m, &s, &b, st);
    st = dist_end_device(m, dist_first_error(m->comm, st), &s, backward_write, &b, &io, event);
    return dist_done(m, st);
}
