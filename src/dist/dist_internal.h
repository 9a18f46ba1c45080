/* dist_internal.h - what flashcl_mpi's source files share: the handle, the
 * step plan of the ring, device buffers kept between calls, the kernels of
 * cl/dist.cl and cl/combine.cl, and the collective checks.  flashcl_mpi
 * reaches flashcl only through flashcl.h. */
#ifndef FCL_DIST_INTERNAL_H
#define FCL_DIST_INTERNAL_H

#include "flashcl_mpi.h"

#include <stddef.h>
#include <stdint.h>

/* Evaluate, and return the status if it is not FCL_OK. */
#define DIST_TRY(expr)                      \
    do {                                    \
        fcl_status dist_try_st_ = (expr);   \
        if (dist_try_st_ != FCL_OK)         \
            return dist_try_st_;            \
    } while (0)

/* ---- the step plan (shards.c) -------------------------------------------- */

/* One flashcl call of a ring step: local query rows q0 .. q0+nq-1 against
 * rows k0 .. k0+nk-1 of the K/V shard in hand, causal (bottom-right) or
 * all-visible. */
typedef struct dist_call {
    size_t q0, nq, k0, nk;
    int causal;
} dist_call;

enum { DIST_MAX_CALLS = 4 };

/* The calls of the step where rank `rank` holds the K/V shard of rank
 * `source`: 0 calls when the causal mask hides the whole shard. */
fcl_status dist_step_calls(const fcl_mpi_desc *d, int ranks, int rank, int source,
                           dist_call calls[DIST_MAX_CALLS], size_t *count);

/* The most rows any rank holds. */
size_t dist_max_rows(const fcl_mpi_desc *d, int ranks);

/* ---- the handle (mpi_context.c) ------------------------------------------ */

/* combine.cl's work-group as this part builds it: 64 columns of a row, one
 * work-item each, summing its column over the (two) parts alone: the
 * default, 8 work-items a column for many split-KV parts, wastes 6 of 8 on
 * two parts (and costs 0.25 s a merge of 4096 rows under PoCL, whose
 * work-groups run their work-items in loops cut at each barrier). */
enum { DIST_COMBINE_COLS = 64, DIST_COMBINE_SLICES = 1 };

/* Kernels of one program: common.cl + combine.cl + dist.cl for one dtype. */
typedef struct dist_kernels {
    cl_program program;
    cl_kernel widen, accumulate, store, combine;
} dist_kernels;

/* Device buffers kept between calls (grown when too small); the staging
 * ones are allocated host memory the device reads (CL_MEM_ALLOC_HOST_PTR),
 * mapped once, so MPI sends and receives from `host`. */
typedef enum dist_slot {
    SLOT_Q, SLOT_O, SLOT_DOUT, SLOT_LSE, SLOT_KV0, SLOT_KV1, SLOT_PART_O, SLOT_PART_LSE,
    SLOT_ACC, SLOT_ACC_LSE0, SLOT_ACC_LSE1, SLOT_DK_PART, SLOT_DV_PART, SLOT_DKV_STEP,
    SLOT_DKV_STEP1,
    SLOT_DKV_IN, SLOT_OUT_A, SLOT_OUT_B, SLOT_OUT_C, SLOT_CALL_LSE,
    SLOT_HOST_KV0, SLOT_HOST_KV1, SLOT_HOST_ACC_IN, SLOT_HOST_ACC_OUT, SLOT_HOST_OUT,
    SLOT_STAMP,                   /* a word the timeline's stamps fill (dist_stamp_in) */
    DIST_SLOTS
} dist_slot;

typedef struct dist_buffer {
    cl_mem mem;
    size_t bytes;
    void *host;                   /* staging slots: the mapped pointer */
} dist_buffer;

/* One point of the host's timeline of the last call (dist_mark_now): what
 * the host had just done, at which ring step (the number of ranks: the
 * backward's last hop; -1 outside the ring), and when, in seconds from
 * the call's start. */
typedef struct dist_mark {
    const char *what;
    int step;
    double at;
} dist_mark;
enum { DIST_TRACE_MARKS = 128 };

struct fcl_mpi {
    MPI_Comm comm;
    int rank, size, local_rank;
    fcl_context *ctx;
    int owns_ctx;
    cl_command_queue copy_queue;  /* uploads that overlap the context queue's work */
    dist_kernels kernels[3];      /* by dtype; fp32 also sums partials */
    dist_buffer buffers[DIST_SLOTS];
    fcl_mpi_timing timing;
    double call_start;            /* dist_now() when the call began (dist_begin) */
    int copy_threads;             /* > 0: messages read from the previous rank's memory by
                                     this many threads (node_copy.c); 0: MPI moves them */
    int prev_pid;                 /* the previous rank's process, where copy_threads > 0 */
    size_t upload_piece;          /* > 0: a copied message that a step uploads goes to the
                                     device in pieces of this many bytes as they are read
                                     (FLASHCL_MPI_UPLOAD_PIECE, read by dist_begin); 0: the
                                     uploads start once every message is in */
    int profiling;                /* the context's queue records profiling (the
                                     timing's device fields) */
    size_t launch_rows;           /* the most rows one launch of dist.cl covers (its
                                     work-items loop over the rest) */
    size_t command_bytes;         /* the most bytes one fill or transfer moves */
    dist_mark trace[DIST_TRACE_MARKS]; /* the last call's host timeline (dist_begin empties
                                          it; once full, each mark replaces the last) */
    int trace_count;
    int trace_step;               /* the ring step the next marks belong to */
};

/* Bounds on one command, whatever the shard's size (fcl_mpi_create sets
 * them): a 4M-token backward on four H200s never returned (NOTES.md, run
 * 55), and it was the first to fill and to move 8 GiB in one command
 * (NVIDIA's OpenCL has been reported to hang on fills of 2^31 bytes and
 * more) and to launch 2^31 work-items.  65536 rows of head_dim work-items
 * still fill any GPU, and 1 GiB pieces cost a few microseconds each. */
enum { DIST_LAUNCH_ROWS = 1 << 16 };
#define DIST_COMMAND_BYTES ((size_t)1 << 30)

/* Test hook: smaller bounds (0 keeps one), so that the loops they cause
 * run at the tests' sizes. */
void dist_debug_set_bounds(fcl_mpi *m, size_t launch_rows, size_t command_bytes);

/* The host's timeline of the last call, for benchmarks that link the
 * library's objects (flashcl-bench-mpi --trace): dist_mark_now records
 * that the host has just done `what` in step m->trace_step;
 * dist_debug_trace points *marks at the last call's marks and returns
 * their count.  Where fcl_mpi_timing's shares leave time unexplained, this
 * says which of the host's waits holds it. */
void dist_mark_now(fcl_mpi *m, const char *what);
int dist_debug_trace(const fcl_mpi *m, const dist_mark **marks);

/* The ring's neighbours: this rank sends to the next and receives from the
 * previous. */
static inline int dist_next(const fcl_mpi *m) { return (m->rank + 1) % m->size; }
static inline int dist_prev(const fcl_mpi *m) { return (m->rank + m->size - 1) % m->size; }

/* ---- messages within one host (node_copy.c) ------------------------------ */

/* The copy threads when FLASHCL_MPI_COPY_THREADS does not say (the count
 * measured on four H200s, NOTES.md run 55). */
enum { DIST_COPY_THREADS = 8 };

/* Collective, once at fcl_mpi_create (host_ranks: the ranks on this host):
 * copy_threads from FLASHCL_MPI_COPY_THREADS (default DIST_COPY_THREADS;
 * the fewest any rank asks for) where every rank asks for some,
 * all ranks are on one host and each reads its previous rank's memory;
 * else 0.  FCL_ERROR_MPI only when an MPI call fails. */
fcl_status dist_node_copy_setup(fcl_mpi *m, int host_ranks);
/* bytes of the previous rank's memory at address src into dst, by
 * m->copy_threads threads; FCL_ERROR_MPI when a read fails. */
fcl_status dist_node_read(const fcl_mpi *m, void *dst, uint64_t src, size_t bytes);
/* FLASHCL_MPI_UPLOAD_PIECE in this rank's environment: bytes (a whole
 * number, at least 1); unset, empty, 0 or anything else, 0. */
size_t dist_upload_piece_asked(void);

/* The kernels for storage type dt (built once per handle). */
fcl_status dist_kernels_for(fcl_mpi *m, fcl_dtype dt, dist_kernels **out);

/* A buffer of at least `bytes` in slot s (contents not kept when it grows). */
fcl_status dist_buffer_get(fcl_mpi *m, dist_slot s, size_t bytes, cl_mem *mem);
/* The same for a staging slot; *host is its mapped memory. */
fcl_status dist_staging_get(fcl_mpi *m, dist_slot s, size_t bytes, cl_mem *mem, void **host);
void dist_buffers_free(fcl_mpi *m);

typedef struct dist_shape dist_shape;

/* ---- collective checks (agree.c) ----------------------------------------- */

/* Which call a rank is making (part of what the ranks compare). */
typedef enum dist_op { DIST_FORWARD = 1, DIST_BACKWARD = 2 } dist_op;

/* Every rank's descriptor and local status: FCL_ERROR_RANKS_DISAGREE when
 * descriptors differ, else the lowest rank's error, else FCL_OK. */
fcl_status dist_agree(fcl_mpi *m, const fcl_mpi_desc *d, dist_op op, fcl_status local);
/* The lowest rank's error, else FCL_OK (FCL_ERROR_MPI if MPI fails). */
fcl_status dist_first_error(MPI_Comm comm, fcl_status local);
/* ---- what a call was given (tensors.c) ----------------------------------- */

/* The tensors of the calls, in the backward's argument order. */
enum { IO_Q, IO_K, IO_V, IO_O, IO_LSE, IO_DOUT, IO_DQ, IO_DK, IO_DV, DIST_TENSORS };

/* The host form's arrays (only whether each is there) or the cl_mem form's
 * buffers and wait list. */
typedef struct dist_io {
    unsigned given;               /* bit t: tensor t's array or buffer is not NULL */
    const fcl_mpi_tensor *dev;    /* the cl_mem form's DIST_TENSORS tensors; NULL: host form */
    cl_uint num_wait;
    const cl_event *wait_list;
} dist_io;

dist_io dist_io_host(const void *const arrays[DIST_TENSORS]);
dist_io dist_io_device(const fcl_mpi_tensor tensors[DIST_TENSORS], cl_uint num_wait,
                       const cl_event *wait_list);
/* The arguments alone: FCL_ERROR_NULL_ARGUMENT, FCL_ERROR_MISSING_LSE. */
fcl_status dist_check_args(const dist_io *io, dist_op op);
/* The cl_mem form's buffers (nothing for the host form): context, size,
 * then aliasing of an output with any other tensor (flashcl_mpi.h). */
fcl_status dist_check_buffers(fcl_mpi *m, const dist_shape *s, dist_op op, const dist_io *io);

/* What every call checks on its own rank: fields, shard geometry. */
fcl_status dist_check_desc(const fcl_mpi_desc *d, int ranks);
/* The above, *sh, and flashcl's checks and kernel builds for the calls the
 * ring will make (no collective call). */
fcl_status dist_check_call(fcl_mpi *m, const fcl_mpi_desc *d, dist_op op, dist_shape *sh);
/* The start of every call, of both forms: timing reset, the arguments'
 * checks, the checks above, the cl_mem form's buffers, the ring's buffers
 * from `get` (with more than one rank), then dist_agree.  A NULL desc
 * counts as all zeros.  Nothing of the caller's is read or enqueued. */
typedef fcl_status (*dist_buffers_fn)(fcl_mpi *m, const dist_shape *s, void *buffers);
fcl_status dist_begin(fcl_mpi *m, const fcl_mpi_desc *desc, dist_op op, const dist_io *io,
                      dist_shape *s, dist_buffers_fn get, void *buffers);
/* The end of every call that got past dist_begin: its time in the timing;
 * returns st. */
fcl_status dist_done(fcl_mpi *m, fcl_status st);

/* ---- the ring's pieces (ring.c) ------------------------------------------ */

/* Local sizes of one call. */
struct dist_shape {
    const fcl_mpi_desc *d;
    int ranks, rank;
    size_t rows;                  /* this rank's rows */
    size_t max_rows;              /* any rank's */
    size_t q_elems, kv_elems;     /* elements of this rank's Q and K shards */
    size_t elem;                  /* bytes per element */
};

fcl_status dist_shape_make(const fcl_mpi_desc *d, int ranks, int rank, dist_shape *s);
size_t dist_rows_of(const dist_shape *s, int rank);
/* Elements of one K (or V) shard of `rows` rows. */
size_t dist_kv_elems(const dist_shape *s, size_t rows);

/* The whole local problem as one flashcl descriptor (the plain call, and
 * the checks before the ring). */
void dist_plain_desc(const dist_shape *s, fcl_attention_desc *out);
/* The cl_mem form's offsets in the plain descriptor (the one-rank call). */
void dist_plain_offsets(const fcl_mpi_tensor t[DIST_TENSORS], fcl_attention_desc *out);
/* The flashcl descriptor of `c`: Q-side tensors are this rank's (rows rows),
 * K-side ones the shard in hand of kv_rows rows, K then V in one buffer. */
void dist_call_desc(const dist_shape *s, const dist_call *c, size_t kv_rows,
                    fcl_attention_desc *out);

/* Launches (on the context's queue), of `heads` heads (heads_q or
 * heads_kv) and sh's batch and head_dim, over at most m->launch_rows rows
 * a launch.  Row arrays: see cl/dist.cl. */
fcl_status dist_widen(fcl_mpi *m, const dist_kernels *k, const dist_shape *sh, size_t heads,
                      const fcl_layout *pl, cl_mem part_o, cl_mem part_lse, size_t n, size_t row0,
                      size_t rows, cl_mem dst, size_t dst_base, cl_mem dst_lse, size_t dst_lse_base);
fcl_status dist_accumulate(fcl_mpi *m, const dist_kernels *k, const dist_shape *sh, size_t heads,
                           cl_mem acc, size_t acc_base, size_t rows, size_t row0, cl_mem part,
                           const fcl_layout *pl, size_t n, int assign);
fcl_status dist_store(fcl_mpi *m, const dist_kernels *k, const dist_shape *sh, size_t heads,
                      cl_mem acc, size_t acc_base, size_t rows, cl_mem out, const fcl_layout *ol,
                      size_t n);
/* The device's timeline of the ring's steps (fcl_mpi_timing's device
 * fields), where m->profiling: dist_stamp_in when a step's inputs are in
 * (after dist_after_upload), dist_stamp_end after its work, and
 * dist_stamps_add once its device work is over (dist_finish_step waited
 * for it).  A stamp is a 4-byte fill, not a marker: NVIDIA's OpenCL has
 * been seen to give markers and barriers zero timestamps.  Without
 * profiling all three do nothing; timestamps of zero add nothing. */
typedef struct dist_stamps {
    cl_event in, end;
    cl_ulong prev_end;            /* the previous step's end, device ns (0: none yet) */
} dist_stamps;
fcl_status dist_stamp_in(fcl_mpi *m, dist_stamps *st);
fcl_status dist_stamp_end(fcl_mpi *m, dist_stamps *st);
void dist_stamps_add(fcl_mpi *m, dist_stamps *st);

/* clEnqueueFillBuffer of `bytes` from byte `offset` on the context's queue,
 * in pieces of at most m->command_bytes. */
fcl_status dist_fill(fcl_mpi *m, cl_mem mem, const void *pattern, size_t pattern_bytes,
                     size_t offset, size_t bytes);
/* clEnqueueWriteBuffer from src, or clEnqueueReadBuffer into dst, of
 * `bytes` at byte `offset` of mem on `queue`, in pieces of at most
 * m->command_bytes, each after the wait list.  *event (when not NULL), and
 * a blocking call's return, come after every piece (a marker, on either
 * kind of queue). */
fcl_status dist_write(fcl_mpi *m, cl_command_queue queue, cl_mem mem, cl_bool blocking,
                      size_t offset, size_t bytes, const void *src, cl_uint num_wait,
                      const cl_event *wait_list, cl_event *event);
fcl_status dist_read(fcl_mpi *m, cl_command_queue queue, cl_mem mem, cl_bool blocking,
                     size_t offset, size_t bytes, void *dst, cl_uint num_wait,
                     const cl_event *wait_list, cl_event *event);
/* combine.cl's merge of `num_parts` row arrays of this rank's queries
 * (part p at p * batch * heads_q * rows rows) into out (strided storage)
 * and, with write_lse, lse ((batch, heads_q, rows) from float lse_offset,
 * +inf for a row that saw no key). */
fcl_status dist_combine(fcl_mpi *m, const dist_kernels *k, const dist_shape *sh, cl_mem parts,
                        cl_mem parts_lse, int num_parts, cl_mem out, const fcl_layout *ol,
                        cl_mem lse, size_t lse_offset, int write_lse);
/* LSE rows q0 .. q0+n-1 of a (batch*heads, rows) array (from float
 * lse_offset) into a contiguous (batch*heads, n) one. */
fcl_status dist_gather_lse(fcl_mpi *m, cl_mem lse, size_t lse_offset, size_t bh, size_t rows,
                           size_t q0, size_t n, cl_mem out);

/* Messages of one step: K/V (and gradient sums) to the next rank, from the
 * previous one. */
enum { DIST_MAX_REQUESTS = 128, DIST_MAX_COPIES = 4 };
typedef struct dist_copy {          /* a message read from the previous rank (copy_threads) */
    MPI_Request notice_req;
    uint64_t notice[2];             /* its address and bytes there */
    void *dst;
    size_t bytes;
    int tag, done;
} dist_copy;
typedef struct dist_messages {
    MPI_Request req[DIST_MAX_REQUESTS];
    int count;
    /* with copy_threads: the notices sent (kept until sent), the receipts
     * they wait for, and the copies to make */
    uint64_t sent[DIST_MAX_COPIES][2];
    unsigned char receipt[DIST_MAX_COPIES];
    int sends;
    dist_copy copy[DIST_MAX_COPIES];
    int copies;
    /* a send to the next rank that waits for a device read (dist_post_after) */
    cl_event send_ready;
    void *send_buf;
    size_t send_bytes;
    int send_tag;
} dist_messages;
fcl_status dist_post(fcl_mpi *m, dist_messages *msg, void *send, void *recv, size_t send_bytes,
                     size_t recv_bytes, int tag);
/* A receive from the previous rank now, and a send to the next one as soon
 * as `ready` (a read into `send`, whose event this takes over) completes,
 * while dist_finish_step polls (one such send a step). */
fcl_status dist_post_after(fcl_mpi *m, dist_messages *msg, cl_event ready, void *send,
                           void *recv, size_t send_bytes, size_t recv_bytes, int tag);
/* Host memory to copy to the device as soon as a step's messages are in
 * (while the device still computes), on the copy queue; `done` receives
 * the copy's event.  The device buffer must be free by then. */
typedef struct dist_upload {
    cl_mem dst;
    const void *src;
    size_t bytes;
    cl_event *done;
} dist_upload;
enum { DIST_MAX_UPLOADS = 2 };

/* Waits for the step's device work (a marker after it) and its messages,
 * starting `uploads` (n of them, none unless device_ok) once the messages
 * are in; adds to timing.wait_seconds the time spent on messages after the
 * device was done.  Returns the device's, OpenCL's or MPI's failure. */
fcl_status dist_finish_step(fcl_mpi *m, dist_messages *msg, int device_ok,
                            const dist_upload *uploads, int n);
/* Makes the context's queue wait for an upload's event (and releases it);
 * nothing when *done is NULL. */
fcl_status dist_after_upload(fcl_mpi *m, cl_event *done);

double dist_now(void);

/* The cl_mem form's start: the context's queue waits for the caller's
 * events (nothing of the caller's is read before). */
fcl_status dist_wait_for(fcl_mpi *m, const dist_io *io);
/* The cl_mem form's end, once the ranks agreed on success (`st`, from
 * dist_first_error): `write` enqueues the outputs' writes; then the event
 * the caller asked for, and the status every rank returns (the writes'
 * enqueue errors shared).  *event is NULL unless FCL_OK. */
typedef fcl_status (*dist_write_fn)(fcl_mpi *m, const dist_shape *s, void *buffers,
                                    const fcl_mpi_tensor *out);
fcl_status dist_end_device(fcl_mpi *m, fcl_status st, const dist_shape *s, dist_write_fn write,
                           void *buffers, const dist_io *io, cl_event *event);

/* The K/V shards' trip: step t computes with the shard of rank - t, in
 * dev[t % 2] (staged in host[t % 2]), while the next one arrives in the
 * other pair. */
typedef struct dist_kv_ring {
    cl_mem dev[2];
    cl_mem staging[2];
    void *host[2];
    cl_event ready;               /* the next shard's upload, NULL when done */
    cl_event host_ready;          /* cl_mem form: the own shard's read into host[0], which
                                     step 0's send waits for (NULL: nothing to wait for) */
} dist_kv_ring;

int dist_source(const dist_shape *s, int t);
/* The buffers (before the collective check). */
fcl_status dist_kv_begin(fcl_mpi *m, const dist_shape *s, dist_kv_ring *kv);
/* This rank's own K and V as step 0's shard: from host arrays, or (cl_mem
 * form) copied on the device and read into host[0] on the copy queue while
 * step 0 computes (kv->host_ready). */
fcl_status dist_kv_load(fcl_mpi *m, const dist_shape *s, dist_kv_ring *kv, const void *k,
                        const void *v);
fcl_status dist_kv_load_device(fcl_mpi *m, const dist_shape *s, dist_kv_ring *kv,
                               const fcl_mpi_tensor *k, const fcl_mpi_tensor *v);
/* Step t's messages: the shard in hand to the next rank, step t+1's from
 * the previous one (none at the last step). */
fcl_status dist_kv_post(fcl_mpi *m, const dist_shape *s, dist_kv_ring *kv, int t,
                        dist_messages *msg);
/* The upload of step t+1's shard once step t's messages are in (n = 0 at
 * the last step); the next step starts with dist_after_upload(&kv->ready). */
int dist_kv_upload(const dist_shape *s, dist_kv_ring *kv, int t, dist_upload *up);
/* After the ring: the copy queue drained, a pending upload's event released. */
void dist_kv_end(fcl_mpi *m, dist_kv_ring *kv);

#endif
