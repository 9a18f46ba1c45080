/* footprint.c - the bytes a strided tensor really touches, and whether two
 * tensors touch a common byte.
 *
 * A tensor's elements lie in rows of head_dim contiguous elements at
 * offset + b * stride_batch + h * stride_head + s * stride_seq.  Two tensors
 * whose address ranges interleave (K and V pages of one allocation,
 * [page][2][page_size][heads][d], as FlashInfer and vLLM keep them; Q, K and
 * V of one packed QKV tensor) share no byte although their ranges meet, so
 * aliasing is decided on these footprints, not on ranges.  The cl_mem calls
 * compare footprints within one OpenCL buffer, the host-pointer calls in the
 * process's address space, by the same test.
 *
 * A footprint is kept as nested levels (validate.c has checked that a
 * tensor's strides nest: taken by increasing stride, each stride is at least
 * the span of the axes below it): level 0 is one run of `row` bytes; level k
 * is count[k] copies of level k-1, stride[k] bytes apart.  Axes of one
 * element are dropped, and an axis whose stride equals the span of a single
 * run below it joins that run, so a contiguous tensor is one run. */
#include "calls/calls.h"

#include <string.h>

/* Sorts (count, stride) pairs by stride, then joins adjacent runs. */
fcl_footprint fcl_footprint_of(const fcl_tensor_ref *t, uint64_t first_byte)
{
    fcl_footprint f;
    memset(&f, 0, sizeof f);
    f.first = first_byte;
    f.row = (uint64_t)t->head_dim * t->elem_size;
    const uint64_t es = t->elem_size;
    uint64_t count[3] = {t->batch, t->heads, t->seqlen};
    uint64_t stride[3] = {t->layout.stride_batch * es, t->layout.stride_head * es,
                          t->layout.stride_seq * es};
    for (int i = 1; i < 3; ++i) /* insertion sort by stride */
        for (int j = i; j > 0 && stride[j] < stride[j - 1]; --j) {
            const uint64_t c = count[j], s = stride[j];
            count[j] = count[j - 1];
            stride[j] = stride[j - 1];
            count[j - 1] = c;
            stride[j - 1] = s;
        }
    for (int i = 0; i < 3; ++i) {
        if (count[i] <= 1)
            continue;
        if (f.levels == 0 && stride[i] == f.row) {
            f.row *= count[i]; /* the copies abut: one longer run */
            continue;
        }
        f.count[f.levels] = count[i];
        f.stride[f.levels] = stride[i];
        ++f.levels;
    }
    return f;
}

/* Bytes from the first to one past the last byte of levels 0..l-1. */
static uint64_t span(const fcl_footprint *f, int l)
{
    uint64_t s = f->row;
    for (int k = 0; k < l; ++k)
        s += (f->count[k] - 1) * f->stride[k];
    return s;
}

/* floor(a / b) and ceil(a / b) for b > 0 */
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/* Decisions left before the test gives up (and answers "they meet"). */
enum { MEET_BUDGET = 1 << 20 };

/* Whether levels 0..la-1 of a, placed at 0, and levels 0..lb-1 of b, placed
 * at byte `delta`, share a byte.  Each step expands the top level of the
 * footprint with the larger top stride, visiting only the copies that meet
 * the other's span; equal top strides (the usual case: K and V pages, a
 * packed QKV tensor) are expanded together, through the few differences of
 * copy index that can meet, so the work does not grow with the counts. */
static bool meet(const fcl_footprint *a, int la, const fcl_footprint *b, int lb, int64_t delta,
                 long *budget)
{
    const int64_t sa = (int64_t)span(a, la), sb = (int64_t)span(b, lb);
    if (delta >= sa || delta + sb <= 0)
        return false;
    if (la == 0 && lb == 0)
        return true;
    if (--*budget < 0)
        return true;
    const int64_t ta = la > 0 ? (int64_t)a->stride[la - 1] : 0;
    const int64_t tb = lb > 0 ? (int64_t)b->stride[lb - 1] : 0;
    if (ta == tb) {
        /* copy i of a at i * t, copy j of b at delta + j * t: they can meet
         * only where k = j - i puts delta + k t within (-sub_b, sub_a) */
        const int64_t t = ta, suba = (int64_t)span(a, la - 1), subb = (int64_t)span(b, lb - 1);
        int64_t k0 = floor_div(-subb - delta, t) + 1, k1 = ceil_div(suba - delta, t) - 1;
        k0 = k0 > -(int64_t)(a->count[la - 1] - 1) ? k0 : -(int64_t)(a->count[la - 1] - 1);
        k1 = k1 < (int64_t)(b->count[lb - 1] - 1) ? k1 : (int64_t)(b->count[lb - 1] - 1);
        for (int64_t k = k0; k <= k1; ++k)
            if (meet(a, la - 1, b, lb - 1, delta + k * t, budget))
                return true;
        return false;
    }
    if (ta > tb) { /* copies i of a whose sub-span meets [delta, delta + sb) */
        const int64_t suba = (int64_t)span(a, la - 1);
        int64_t i0 = ceil_div(delta - suba + 1, ta), i1 = floor_div(delta + sb - 1, ta);
        i0 = i0 > 0 ? i0 : 0;
        i1 = i1 < (int64_t)(a->count[la - 1] - 1) ? i1 : (int64_t)(a->count[la - 1] - 1);
        for (int64_t i = i0; i <= i1; ++i)
            if (meet(a, la - 1, b, lb, delta - i * ta, budget))
                return true;
        return false;
    }
    /* copies j of b (at delta + j tb) that meet [0, sa) */
    const int64_t subb = (int64_t)span(b, lb - 1);
    int64_t j0 = ceil_div(-subb - delta + 1, tb), j1 = floor_div(sa - 1 - delta, tb);
    j0 = j0 > 0 ? j0 : 0;
    j1 = j1 < (int64_t)(b->count[lb - 1] - 1) ? j1 : (int64_t)(b->count[lb - 1] - 1);
    for (int64_t j = j0; j <= j1; ++j)
        if (meet(a, la, b, lb - 1, delta + j * tb, budget))
            return true;
    return false;
}

bool fcl_footprints_meet(const fcl_footprint *a, const fcl_footprint *b)
{
    long budget = MEET_BUDGET;
    /* the footprints start within INT64_MAX bytes of each other: buffer
     * offsets are checked against that, and host addresses are user space */
    const int64_t delta = (int64_t)(b->first - a->first);
    return meet(a, a->levels, b, b->levels, delta, &budget);
}

void fcl_footprint_copy(const fcl_footprint *f, unsigned char *dst, const unsigned char *src)
{
    const uint64_t n1 = f->levels > 0 ? f->count[0] : 1, n2 = f->levels > 1 ? f->count[1] : 1;
    const uint64_t n3 = f->levels > 2 ? f->count[2] : 1;
    const uint64_t s1 = f->levels > 0 ? f->stride[0] : 0, s2 = f->levels > 1 ? f->stride[1] : 0;
    const uint64_t s3 = f->levels > 2 ? f->stride[2] : 0;
    for (uint64_t i3 = 0; i3 < n3; ++i3)
        for (uint64_t i2 = 0; i2 < n2; ++i2)
            for (uint64_t i1 = 0; i1 < n1; ++i1) {
                const uint64_t at = i3 * s3 + i2 * s2 + i1 * s1;
                memcpy(dst + at, src + at, f->row);
            }
}
