/* validate.c - every argument is checked before anything is enqueued, so an
 * error never leaves a half-written output behind. */
#include "calls/calls.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* The kernels index rows and keys with int and launch one work-group per
 * (block, head, batch) in one dimension. */
#define MAX_SEQLEN ((size_t)INT_MAX / 2)
#define MAX_BATCH_HEADS ((size_t)1 << 24)

fcl_status fcl_validate_desc(const fcl_attention_desc *desc)
{
    return fcl_validate_desc_upto(desc, FCL_MAX_HEAD_DIM);
}

fcl_status fcl_validate_desc_upto(const fcl_attention_desc *desc, size_t max_head_dim)
{
    if (desc == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if (desc->batch == 0 || desc->heads_q == 0 || desc->heads_kv == 0 || desc->seqlen_q == 0 ||
        desc->seqlen_k == 0 || desc->head_dim == 0)
        return FCL_ERROR_INVALID_SHAPE;
    if (desc->seqlen_q > MAX_SEQLEN || desc->seqlen_k > MAX_SEQLEN ||
        desc->heads_q > MAX_BATCH_HEADS || desc->batch > MAX_BATCH_HEADS ||
        desc->batch * desc->heads_q > MAX_BATCH_HEADS)
        return FCL_ERROR_INVALID_SHAPE;
    if (desc->head_dim > max_head_dim || fcl_head_dim_v(desc) > desc->head_dim)
        return FCL_ERROR_HEAD_DIM_UNSUPPORTED;
    if (desc->heads_q % desc->heads_kv != 0)
        return FCL_ERROR_HEADS_NOT_DIVISIBLE;
    if (fcl_dtype_size(desc->dtype) == 0)
        return FCL_ERROR_DTYPE_UNSUPPORTED;
    const fcl_dtype out = fcl_output_dtype(desc);
    if (fcl_dtype_size(out) == 0 || fcl_dtype_is_fp8(out))
        return FCL_ERROR_DTYPE_UNSUPPORTED;
    if (!isfinite(desc->softmax_scale))
        return FCL_ERROR_INVALID_VALUE;
    if (desc->causal != 0 && desc->causal != 1)
        return FCL_ERROR_INVALID_VALUE;
    if (desc->num_splits < 0 || desc->num_splits > FCL_MAX_SPLITS)
        return FCL_ERROR_INVALID_VALUE;
    if (desc->varlen != 0 && desc->varlen != 1)
        return FCL_ERROR_INVALID_VALUE;
    if (desc->varlen && (desc->total_q == 0 || desc->total_k == 0 ||
                         desc->total_q > MAX_SEQLEN || desc->total_k > MAX_SEQLEN))
        return FCL_ERROR_INVALID_SHAPE;
    return FCL_OK;
}

fcl_status fcl_check_forward_desc(const fcl_attention_desc *desc)
{
    return fcl_check_forward_desc_upto(desc, FCL_MAX_HEAD_DIM);
}

fcl_status fcl_check_forward_desc_upto(const fcl_attention_desc *desc, size_t max_head_dim)
{
    FCL_TRY(fcl_validate_desc_upto(desc, max_head_dim));
    return fcl_variants_check_settings(desc);
}

fcl_status fcl_check_backward_desc(const fcl_attention_desc *desc)
{
    FCL_TRY(fcl_validate_desc(desc));
    FCL_TRY(fcl_require_no_fp8(desc->dtype)); /* no FP8 backward, as in FlashAttention-3 */
    return fcl_variants_check_settings(desc);
}

fcl_status fcl_tensor_extent_bytes(const fcl_tensor_ref *t, uint64_t *bytes)
{
    /* index of the last element + 1 */
    uint64_t last = t->layout.offset;
    if (!fcl_add_product(&last, t->batch - 1, t->layout.stride_batch) ||
        !fcl_add_product(&last, t->heads - 1, t->layout.stride_head) ||
        !fcl_add_product(&last, t->seqlen - 1, t->layout.stride_seq) ||
        !fcl_add_product(&last, 1, t->head_dim))
        return FCL_ERROR_INVALID_SHAPE;
    uint64_t b = 0;
    if (!fcl_add_product(&b, last, t->elem_size) || b > (uint64_t)INT64_MAX)
        return FCL_ERROR_INVALID_SHAPE;
    *bytes = b;
    return FCL_OK;
}

/* Strides must nest: taking the axes by increasing stride, each stride is at
 * least the span of the axes before it.  That is exactly "no two elements
 * meet" for the layouts people use, and easy to explain. */
static fcl_status check_no_overlap(const fcl_tensor_ref *t)
{
    struct axis {
        uint64_t size, stride;
    } ax[3] = {{t->batch, t->layout.stride_batch},
               {t->heads, t->layout.stride_head},
               {t->seqlen, t->layout.stride_seq}};
    /* sort the three axes by stride (insertion sort) */
    for (int i = 1; i < 3; ++i)
        for (int j = i; j > 0 && ax[j].stride < ax[j - 1].stride; --j) {
            struct axis tmp = ax[j];
            ax[j] = ax[j - 1];
            ax[j - 1] = tmp;
        }
    uint64_t span = t->head_dim; /* the contiguous head_dim axis */
    for (int i = 0; i < 3; ++i) {
        if (ax[i].size <= 1)
            continue;
        if (ax[i].stride < span)
            return FCL_ERROR_OVERLAPPING_STRIDES;
        span = (ax[i].size - 1) * ax[i].stride + span;
    }
    return FCL_OK;
}

/* A cl_mem as (root buffer, byte offset), so sub-buffers of one buffer compare. */
static fcl_status root_of(cl_mem mem, cl_mem *root, uint64_t *offset)
{
    *root = mem;
    *offset = 0;
    for (int depth = 0; depth < 4; ++depth) {
        cl_mem parent = NULL;
        cl_int err = clGetMemObjectInfo(*root, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent,
                                        NULL);
        if (err != CL_SUCCESS)
            return err;
        if (parent == NULL)
            return FCL_OK;
        size_t off = 0;
        err = clGetMemObjectInfo(*root, CL_MEM_OFFSET, sizeof off, &off, NULL);
        if (err != CL_SUCCESS)
            return err;
        *offset += off;
        *root = parent;
    }
    return FCL_OK;
}

/* Where a tensor's bytes are: the root buffer of its cl_mem (so sub-buffers
 * of one buffer compare), or the host's address space (root NULL) for a
 * host array, and its footprint there. */
typedef struct placed {
    cl_mem root;
    int present;                  /* 0: no buffer or array given */
    fcl_footprint fp;
} placed;

/* Places tensor t (after checking its buffer's context and size); `extent`
 * is its fcl_tensor_extent_bytes. */
static fcl_status place(const fcl_context *ctx, const fcl_tensor_ref *t, uint64_t extent,
                        placed *p)
{
    p->root = NULL;
    p->present = 0;
    uint64_t base = 0;
    if (t->mem != NULL) {
        cl_context owner = NULL;
        size_t size = 0;
        cl_int err = clGetMemObjectInfo(t->mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
        if (err != CL_SUCCESS)
            return err;
        if (owner != ctx->cl_ctx)
            return FCL_ERROR_WRONG_CONTEXT;
        err = clGetMemObjectInfo(t->mem, CL_MEM_SIZE, sizeof size, &size, NULL);
        if (err != CL_SUCCESS)
            return err;
        if ((uint64_t)size < extent)
            return FCL_ERROR_BUFFER_TOO_SMALL;
        FCL_TRY(root_of(t->mem, &p->root, &base));
    } else if (t->host != NULL) {
        base = (uint64_t)(uintptr_t)t->host;
    } else {
        return FCL_OK;
    }
    uint64_t first = 0;
    if (!fcl_add_product(&first, t->layout.offset, t->elem_size))
        return FCL_ERROR_INVALID_SHAPE;
    p->present = 1;
    p->fp = fcl_footprint_of(t, base + first);
    return FCL_OK;
}

/* Whether two placed tensors share a byte: same buffer (or both host
 * arrays) and meeting footprints. */
static bool share_bytes(const placed *a, const placed *b)
{
    return a->present && b->present && a->root == b->root && fcl_footprints_meet(&a->fp, &b->fp);
}

fcl_status fcl_validate_tensors(const fcl_context *ctx, const fcl_tensor_ref *tensors, size_t n)
{
    placed at[16];
    if (n > 16)
        return FCL_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; ++i) {
        const fcl_tensor_ref *t = &tensors[i];
        FCL_TRY(check_no_overlap(t));
        uint64_t extent = 0;
        FCL_TRY(fcl_tensor_extent_bytes(t, &extent));
        FCL_TRY(place(ctx, t, extent, &at[i]));
    }
    /* An output must not share a byte with any other tensor of the call. */
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n && tensors[i].is_output; ++j)
            if (j != i && share_bytes(&at[i], &at[j]))
                return FCL_ERROR_BUFFER_ALIASING;
    return FCL_OK;
}

fcl_tensor_ref fcl_aux_ref(cl_mem mem, uint64_t bytes)
{
    const fcl_layout whole = {0, 0, 0, 0};
    return fcl_tensor_ref_make(mem, whole, 1, 1, 1, (size_t)bytes, 1, 0);
}

fcl_status fcl_validate_apart(const fcl_context *ctx, const fcl_tensor_ref *tensors, size_t n,
                              const fcl_tensor_ref *aux, size_t num_aux)
{
    placed in[10];
    if (num_aux > sizeof in / sizeof in[0])
        return FCL_ERROR_INVALID_VALUE;
    for (size_t j = 0; j < num_aux; ++j)
        FCL_TRY(place(ctx, &aux[j], aux[j].head_dim, &in[j]));
    for (size_t i = 0; i < n; ++i) {
        if (!tensors[i].is_output)
            continue;
        uint64_t extent = 0;
        placed out;
        FCL_TRY(fcl_tensor_extent_bytes(&tensors[i], &extent));
        FCL_TRY(place(ctx, &tensors[i], extent, &out));
        for (size_t j = 0; j < num_aux; ++j)
            if (share_bytes(&in[j], &out))
                return FCL_ERROR_BUFFER_ALIASING;
    }
    return FCL_OK;
}

fcl_tensor_ref fcl_tensor_ref_make(cl_mem mem, fcl_layout layout, size_t batch,
                                   size_t heads, size_t seqlen, size_t head_dim,
                                   size_t elem_size, int is_output)
{
    fcl_tensor_ref t;
    t.mem = mem;
    t.host = NULL;
    t.layout = layout;
    t.batch = batch;
    t.heads = heads;
    t.seqlen = seqlen;
    t.head_dim = head_dim;
    t.elem_size = elem_size;
    t.is_output = is_output;
    return t;
}

/* Shapes as the kernels see them: packed sequences are one batch entry of
 * total_q (or total_k) rows, and their LSE is (heads_q, total_q). */
typedef struct tensor_shape {
    size_t batch, rows_q, rows_k;
} tensor_shape;

static tensor_shape shape_of(const fcl_attention_desc *d)
{
    tensor_shape s = {d->batch, d->seqlen_q, d->seqlen_k};
    if (d->varlen) {
        s.batch = 1;
        s.rows_q = d->total_q;
        s.rows_k = d->total_k;
    }
    return s;
}

static fcl_tensor_ref lse_ref(const fcl_attention_desc *d, cl_mem mem, int is_output)
{
    const tensor_shape sh = shape_of(d);
    fcl_layout l;
    l.offset = d->lse_offset;
    l.stride_seq = 1;
    l.stride_head = sh.rows_q;
    l.stride_batch = d->heads_q * sh.rows_q;
    return fcl_tensor_ref_make(mem, l, sh.batch, d->heads_q, sh.rows_q, 1, sizeof(float),
                               is_output);
}

void fcl_forward_tensors(const fcl_attention_desc *d, const cl_mem mem[FCL_FORWARD_TENSORS],
                         fcl_tensor_ref t[FCL_FORWARD_TENSORS])
{
    const tensor_shape sh = shape_of(d);
    const size_t es = fcl_dtype_size(d->dtype), D = d->head_dim, Dv = fcl_head_dim_v(d);
    const size_t out_es = fcl_dtype_size(fcl_output_dtype(d));
    t[0] = fcl_tensor_ref_make(mem[0], d->q, sh.batch, d->heads_q, sh.rows_q, D, es, 0);
    t[1] = fcl_tensor_ref_make(mem[1], d->k, sh.batch, d->heads_kv, sh.rows_k, D, es, 0);
    t[2] = fcl_tensor_ref_make(mem[2], d->v, sh.batch, d->heads_kv, sh.rows_k, Dv, es, 0);
    t[3] = fcl_tensor_ref_make(mem[3], d->o, sh.batch, d->heads_q, sh.rows_q, Dv, out_es, 1);
    t[4] = lse_ref(d, mem[4], 1);
}

void fcl_backward_tensors(const fcl_attention_desc *d, const cl_mem mem[FCL_BACKWARD_TENSORS],
                          fcl_tensor_ref t[FCL_BACKWARD_TENSORS])
{
    fcl_forward_tensors(d, mem, t);
    t[3].is_output = 0; /* O and LSE are inputs of the backward */
    t[4].is_output = 0;
    const tensor_shape sh = shape_of(d);
    const size_t es = fcl_dtype_size(d->dtype), D = d->head_dim, Dv = fcl_head_dim_v(d);
    t[5] = fcl_tensor_ref_make(mem[5], d->dout, sh.batch, d->heads_q, sh.rows_q, Dv, es, 0);
    t[6] = fcl_tensor_ref_make(mem[6], d->dq, sh.batch, d->heads_q, sh.rows_q, D, es, 1);
    t[7] = fcl_tensor_ref_make(mem[7], d->dk, sh.batch, d->heads_kv, sh.rows_k, D, es, 1);
    t[8] = fcl_tensor_ref_make(mem[8], d->dv, sh.batch, d->heads_kv, sh.rows_k, Dv, es, 1);
    const fcl_layout whole = {0, 0, 0, 0};
    t[9] = fcl_tensor_ref_make(mem[9], whole, 1, 1, 1, d->heads_q, sizeof(float), 1);
}
