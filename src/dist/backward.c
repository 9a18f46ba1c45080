/* backward.c - the ring attention backward.  Each step calls flashcl's
 * backward with this rank's queries, its global O and LSE (so P is exact)
 * and the K/V shard in hand.  dQ parts are summed here in fp32; the dK/dV
 * parts of a shard are summed in fp32 as they follow it round the ring, one
 * step behind (a shard's sum leaves a rank while that rank computes its
 * next step), and the finished sum comes home after the last step. */
#include "dist_internal.h"

#include <string.h>

enum { TAG_DKV = 2 };

typedef struct backward_buffers {
    cl_mem q, o, dout, lse, call_lse, dq_part, dk_part, dv_part, dq_acc, dkv_step[2], dkv_in;
    cl_mem dq_out, dkv_out, acc_in_mem, acc_out_mem, staging;
    void *acc_in, *acc_out, *host_out;
    size_t dkv_elems;             /* of one of dK, dV as a row array: max_rows rows */
    cl_event acc_ready;           /* acc_in's upload into dkv_in */
    cl_event acc_out_ready;       /* the read of a step's sum into acc_out */
    dist_kv_ring kv;
    fcl_mpi_tensor in[DIST_TENSORS]; /* where Q, O, LSE, dO are read: the caller's buffers,
                                        or the host form's uploads */
    int on_device;                /* the cl_mem form: no uploads, no read-back */
} backward_buffers;

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
        DIST_TRY(dist_buffer_get(m, SLOT_OUT_B, 2 * s->kv_elems * s->elem, &b->dkv_out));
        DIST_TRY(dist_staging_get(m, SLOT_HOST_OUT, q_bytes + 2 * s->kv_elems * s->elem,
                                  &b->staging, &b->host_out));
    }
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
    cl_command_queue queue = fcl_context_cl_queue(m->ctx);
    const float zero = 0.0f;
    DIST_TRY(clEnqueueFillBuffer(queue, b->dkv_step[t % 2], &zero, sizeof zero, 0,
                                 2 * b->dkv_elems * sizeof(float), 0, NULL, NULL));
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

/* After step t: the sum that came with the shard (none at step 0) joins
 * this step's, and the total is read into the staging memory it leaves
 * from, on the copy queue while the next step computes (the message goes
 * when the read is done: dist_post_after). */
static fcl_status backward_pass_on(fcl_mpi *m, const dist_shape *s, backward_buffers *b, int t)
{
    const fcl_mpi_desc *d = s->d;
    cl_command_queue queue = fcl_context_cl_queue(m->ctx);
    const size_t bytes = 2 * b->dkv_elems * sizeof(float);
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
    cl_event summed = NULL;
    DIST_TRY(clEnqueueMarkerWithWaitList(queue, 0, NULL, &summed));
    fcl_status st = clFlush(queue);
    if (st == FCL_OK) /* acc_in's upload is over before its next message arrives */
        st = clFinish(m->copy_queue);
    if (st == FCL_OK)
        st = clEnqueueReadBuffer(m->copy_queue, b->dkv_step[t % 2], CL_FALSE, 0, bytes, b->acc_out,
                                 1, &summed, &b->acc_out_ready);
    if (st == FCL_OK)
        st = clFlush(m->copy_queue);
    clReleaseEvent(summed);
    return st;
}

/* dQ's sum and this rank's own dK/dV sum (home from the ring in acc_in,
 * uploaded to dkv_in first) rounded to the storage type into out[IO_DQ],
 * out[IO_DK], out[IO_DV]. */
static fcl_status backward_write(fcl_mpi *m, const dist_shape *s, void *buffers,
                                 const fcl_mpi_tensor *out)
{
    backward_buffers *b = buffers;
    const fcl_mpi_desc *d = s->d;
    dist_kernels *kd = NULL;
    DIST_TRY(dist_kernels_for(m, d->dtype, &kd));
    fcl_layout ql = fcl_layout_contiguous(d->layout, d->heads_q, s->rows, d->head_dim);
    fcl_layout kl = fcl_layout_contiguous(d->layout, d->heads_kv, s->rows, d->head_dim);
    ql.offset = out[IO_DQ].offset;
    DIST_TRY(dist_store(m, kd, s, d->heads_q, b->dq_acc, 0, s->rows, out[IO_DQ].mem, &ql, s->rows));
    kl.offset = out[IO_DK].offset;
    DIST_TRY(dist_store(m, kd, s, d->heads_kv, b->dkv_in, 0, s->max_rows, out[IO_DK].mem, &kl,
                        s->rows));
    kl.offset = out[IO_DV].offset;
    return dist_store(m, kd, s, d->heads_kv, b->dkv_in, b->dkv_elems, s->max_rows, out[IO_DV].mem,
                      &kl, s->rows);
}

/* After the ring: this rank's own dK/dV sum, home in acc_in, to the device
 * (waited for: the next call's messages land in acc_in). */
static fcl_status backward_sum_home(fcl_mpi *m, backward_buffers *b)
{
    return clEnqueueWriteBuffer(fcl_context_cl_queue(m->ctx), b->dkv_in, CL_TRUE, 0,
                                2 * b->dkv_elems * sizeof(float), b->acc_in, 0, NULL, NULL);
}

/* The host form's end of the ring: the gradients into the handle's buffers
 * (dK then dV in dkv_out), read into its staging memory. */
static fcl_status backward_read(fcl_mpi *m, const dist_shape *s, backward_buffers *b)
{
    fcl_mpi_tensor out[DIST_TENSORS];
    memset(out, 0, sizeof out);
    out[IO_DQ].mem = b->dq_out;
    out[IO_DK].mem = out[IO_DV].mem = b->dkv_out;
    out[IO_DV].offset = s->kv_elems;
    DIST_TRY(backward_write(m, s, b, out));
    cl_command_queue queue = fcl_context_cl_queue(m->ctx);
    const size_t q_bytes = s->q_elems * s->elem;
    DIST_TRY(clEnqueueReadBuffer(queue, b->dq_out, CL_FALSE, 0, q_bytes, b->host_out, 0, NULL, NULL));
    return clEnqueueReadBuffer(queue, b->dkv_out, CL_TRUE, 0, 2 * s->kv_elems * s->elem,
                               (char *)b->host_out + q_bytes, 0, NULL, NULL);
}

/* The last step's sum to the next rank (once read back, when it was) and
 * the previous rank's into acc_in. */
static fcl_status post_sum(fcl_mpi *m, backward_buffers *b, dist_messages *msg, size_t bytes)
{
    if (b->acc_out_ready == NULL) /* nothing read (a failure here): send what is there */
        return dist_post(m, msg, b->acc_out, b->acc_in, bytes, bytes, TAG_DKV);
    const cl_event ready = b->acc_out_ready;
    b->acc_out_ready = NULL;
    return dist_post_after(m, msg, ready, b->acc_out, b->acc_in, bytes, bytes, TAG_DKV);
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
    DIST_TRY(clEnqueueWriteBuffer(queue, b->q, CL_FALSE, 0, q_bytes, q, 0, NULL, NULL));
    DIST_TRY(clEnqueueWriteBuffer(queue, b->o, CL_FALSE, 0, q_bytes, o, 0, NULL, NULL));
    DIST_TRY(clEnqueueWriteBuffer(queue, b->dout, CL_FALSE, 0, q_bytes, dout, 0, NULL, NULL));
    DIST_TRY(clEnqueueWriteBuffer(queue, b->lse, CL_FALSE, 0,
                                  s->d->batch * s->d->heads_q * s->rows * sizeof(float), lse, 0,
                                  NULL, NULL));
    /* the host arrays are the caller's: done with them before returning */
    return clFinish(queue);
}

/* dQ's fp32 sum starts at zero. */
static fcl_status clear_dq(fcl_mpi *m, const dist_shape *s, backward_buffers *b)
{
    const float zero = 0.0f;
    return clEnqueueFillBuffer(fcl_context_cl_queue(m->ctx), b->dq_acc, &zero, sizeof zero, 0,
                               s->q_elems * sizeof(float), 0, NULL, NULL);
}

/* The ring itself, after this rank's own K/V shard was loaded (st: how
 * that went and what came before); ends with this rank's own dK/dV sum
 * home in acc_in. */
static fcl_status backward_ring(fcl_mpi *m, const dist_shape *s, backward_buffers *b,
                                fcl_status st)
{
    const double ring_start = dist_now();
    const size_t acc_bytes = 2 * b->dkv_elems * sizeof(float);
    /* A rank that failed keeps passing messages (see the forward). */
    for (int t = 0; t < m->size; ++t) {
        dist_messages msg = {.count = 0};
        fcl_status sent = dist_kv_post(m, s, &b->kv, t, &msg);
        if (t > 0 && sent == FCL_OK) /* the previous step's sum on, this one's in */
            sent = post_sum(m, b, &msg, acc_bytes);
        if (st == FCL_OK)
            st = dist_after_upload(m, &b->kv.ready); /* this step's shard is in */
        if (st == FCL_OK)
            st = backward_step(m, s, b, t);
        /* while the device computes: the next shard, and the sum that came
         * with this one, to the device */
        dist_upload up[DIST_MAX_UPLOADS];
        int n = dist_kv_upload(s, &b->kv, t, &up[0]);
        if (t > 0)
            up[n++] = (dist_upload){b->dkv_in, b->acc_in, acc_bytes, &b->acc_ready};
        const fcl_status waited = dist_finish_step(m, &msg, st == FCL_OK, up, n);
        st = st != FCL_OK ? st : sent != FCL_OK ? sent : waited;
        if (st == FCL_OK)
            st = backward_pass_on(m, s, b, t);
    }
    dist_kv_end(m, &b->kv);
    if (b->acc_ready != NULL)
        clReleaseEvent(b->acc_ready);
    b->acc_ready = NULL;
    /* The last sums go home: shard rank + 1's to the next rank, ours from the previous. */
    dist_messages msg = {.count = 0};
    const fcl_status sent = post_sum(m, b, &msg, acc_bytes);
    const fcl_status waited = dist_finish_step(m, &msg, 0, NULL, 0);
    st = st != FCL_OK ? st : sent != FCL_OK ? sent : waited;
    if (b->acc_out_ready != NULL) /* left by a failure */
        clReleaseEvent(b->acc_out_ready);
    b->acc_out_ready = NULL;
    if (st == FCL_OK)
        st = backward_sum_home(m, b);
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
        const size_t q_bytes = s.q_elems * s.elem, kv_bytes = s.kv_elems * s.elem;
        memcpy(dq, b.host_out, q_bytes);
        memcpy(dk, (char *)b.host_out + q_bytes, kv_bytes);
        memcpy(dv, (char *)b.host_out + q_bytes + kv_bytes, kv_bytes);
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
