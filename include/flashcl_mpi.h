/*
 * flashcl_mpi.h - exact attention over one sequence sharded across MPI ranks
 * (context parallelism, ring attention), forward and backward.
 *
 * An optional part of flashcl: the library `flashcl_mpi` (CMake target
 * flashcl::flashcl_mpi, component `mpi` of find_package(flashcl);
 * pkg-config `flashcl-mpi`), built only where MPI is found.  It uses flashcl
 * (flashcl.h) through its public calls; the core library never links MPI.
 *
 * What it computes.  One sequence of `seqlen` tokens (per batch entry and
 * head) is cut into shards, one per rank of an MPI communicator, each rank on
 * its own OpenCL device.  Every rank passes its own shard of Q, K, V (and, in
 * the backward, of O, LSE, dO) and receives its shard of O, LSE (dQ, dK, dV):
 * exactly what fcl_attention_forward/backward (flashcl.h) give for the whole
 * sequence, with seqlen_q = seqlen_k = seqlen, restricted to the rank's rows:
 *
 *     O[i] = sum_j softmax_j(scale * q_i . k_j) v_j   over the keys j that
 *            query i sees: every key, or with `causal` the keys j <= i
 *            (global positions; seqlen_q = seqlen_k, so bottom-right and
 *            top-left alignment agree)
 *     LSE[i] = log sum_j exp(scale * q_i . k_j)        (fp32)
 *     dQ, dK, dV: the gradients of sum(O * dO) (dK, dV summed over the query
 *            heads that share a K/V head, GQA/MQA as in flashcl.h)
 *
 * Scale is 1/sqrt(head_dim) unless softmax_scale is set.  Storage fp32,
 * fp16 (IEEE binary16 as uint16_t) or bf16 (as uint16_t); arithmetic fp32.
 * No attention variants (windows, ALiBi, softcap, dropout, packed sequences,
 * block masks) are offered here.
 *
 * Shards.  The sequence is cut into C chunks: C = R (the number of ranks)
 * for FCL_MPI_SHARD_CONTIGUOUS, C = 2R for FCL_MPI_SHARD_ZIGZAG.  Chunk c
 * holds the positions
 *     floor(c * seqlen / C)  ..  floor((c + 1) * seqlen / C) - 1
 * (lengths differ by at most one when seqlen does not divide by C; the
 * longer chunks are spread as the floors fall).  Rank r holds
 *     contiguous: chunk r
 *     zigzag:     chunk r, then chunk 2R - 1 - r (for causal attention every
 *                 rank then has the same amount of work)
 * as one local sequence of `rows` positions, its chunks one after the other
 * in that order.  fcl_mpi_shard_of() gives the numbers.  Each local tensor is
 * contiguous in desc->layout with `rows` positions:
 *     Q, O, dO, dQ: (batch, rows, heads_q, head_dim)    FCL_LAYOUT_BSHD
 *                   (batch, heads_q, rows, head_dim)    FCL_LAYOUT_BHSD
 *     K, V, dK, dV: the same with heads_kv
 *     LSE:          fp32 (batch, heads_q, rows), always this order
 * Local row t of rank r is global position start[0] + t for t < len[0],
 * else start[1] + (t - len[0]).
 *
 * How it runs (ring attention).  Each rank keeps its queries; the K/V shards
 * travel once around the ring of ranks (rank r sends to r + 1 and receives
 * from r - 1, modulo R) with non-blocking MPI point-to-point messages staged
 * through host memory the device can read directly (cl_mem is not MPI
 * memory), while the device computes attention against the shard in hand.
 * Between a query chunk and a key chunk the causal mask is all-visible,
 * diagonal or all-hidden; hidden pairs are skipped.  Each step's partial
 * (O, LSE) is merged into the running result by the log-sum-exp rule (the
 * merge of flashcl's split-KV forward), in fp32, steps in ring order.  The
 * backward calls flashcl's backward once per step with the rank's own, global
 * O and LSE (so P is exact); dQ is summed on the rank; dK/dV are summed in
 * fp32 as they travel with their K/V, and the rank that adds the last part
 * rounds the sum to the storage type and sends it home to its owner.
 *
 * Accuracy.  Each step's partial O (and partial gradients) comes out of
 * flashcl's calls rounded to the storage type (unit roundoff u: 2^-24 fp32,
 * 2^-11 fp16, 2^-8 bf16); they are summed in fp32 and rounded once more at the
 * end.  So against the exact result, on top of what the single-device call
 * shows:
 *     |O - O_exact|   <= about u * max over steps |O_step| + u * |O|
 *     |dX - dX_exact| <= about u * sum over steps |dX_step| + u * |dX|
 * (dX = dQ, dK, dV; at most R steps contribute).  For fp32 this is fp32
 * rounding noise; for fp16/bf16 about one more rounding than a single device.
 *
 * Deterministic: for a fixed number of ranks, inputs and devices, results are
 * bitwise the same on every run (fixed step order, fixed sums).  With one
 * rank the calls are exactly fcl_attention_forward_host/backward_host.
 *
 * Errors.  Every call here is collective over the communicator: every rank
 * must make it, with descriptors that agree (every field of fcl_mpi_desc; a
 * NULL desc counts as one of all zeros, so it disagrees with any other).
 * Before any work the ranks compare their descriptors and their own checks;
 * every rank then returns the same status: FCL_ERROR_RANKS_DISAGREE if the
 * descriptors differ, else the error of the lowest-numbered rank that found
 * one, else FCL_OK.  An error during the ring (an OpenCL failure on one rank)
 * does not stop the others mid-way: the ring completes, and every rank returns
 * the error of the lowest-numbered rank that had one.  On any error no output
 * of any rank is written.  The library never prints, exits or aborts; MPI
 * errors on its own communicator are returned as FCL_ERROR_MPI, not fatal.
 *
 * Minimal use:
 *
 *     MPI_Init(&argc, &argv);
 *     fcl_mpi *m = NULL;
 *     fcl_status st = fcl_mpi_create(MPI_COMM_WORLD, NULL, NULL, &m); // device by local rank
 *     fcl_mpi_desc d;
 *     fcl_mpi_desc_init(&d, 1, 8, 8, 1 << 20, 128, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
 *     d.causal = 1;
 *     d.sharding = FCL_MPI_SHARD_ZIGZAG;
 *     fcl_mpi_shard sh;
 *     fcl_mpi_shard_of(&d, fcl_mpi_rank(m), fcl_mpi_size(m), &sh);  // sh.rows local rows
 *     if (st == FCL_OK) st = fcl_mpi_attention_forward_host(m, &d, q, k, v, o, lse);
 *     fcl_mpi_destroy(m);
 *     MPI_Finalize();
 */
#ifndef FLASHCL_MPI_H
#define FLASHCL_MPI_H

#include <flashcl.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes of this part: the last entries of flashcl.h's FCL_STATUS_MAP,
 * FCL_ERROR_RANKS_DISAGREE ("the ranks of a collective call were given
 * different descriptors") and FCL_ERROR_MPI ("an MPI call failed");
 * fcl_status_string() names them. */

/* How the sequence is cut (see "Shards" above). */
typedef enum fcl_mpi_sharding {
    FCL_MPI_SHARD_CONTIGUOUS = 0, /* rank r: chunk r of R */
    FCL_MPI_SHARD_ZIGZAG = 1      /* rank r: chunks r and 2R-1-r of 2R (causal balance) */
} fcl_mpi_sharding;

/* One sharded attention problem; the same on every rank.  Fill it with
 * fcl_mpi_desc_init(), then change what differs. */
typedef struct fcl_mpi_desc {
    size_t batch;
    size_t heads_q;
    size_t heads_kv;              /* divides heads_q */
    size_t seqlen;                /* the whole sequence, >= the number of chunks C */
    size_t head_dim;              /* 1..256 */
    fcl_dtype dtype;
    float softmax_scale;          /* 0 means 1/sqrt(head_dim); must be finite */
    int causal;                   /* 0 or 1 */
    fcl_mpi_sharding sharding;
    fcl_layout_kind layout;       /* of every local tensor except LSE */
} fcl_mpi_desc;

/*! fcl_mpi_desc_init() :
 * Sets every field: the sizes given, scale 0, causal 0, contiguous shards.
 * Does nothing if desc is NULL. */
FCL_API void fcl_mpi_desc_init(fcl_mpi_desc *desc, size_t batch, size_t heads_q,
                               size_t heads_kv, size_t seqlen, size_t head_dim, fcl_dtype dtype,
                               fcl_layout_kind layout);

/* The positions rank `rank` holds: `chunks` (1 or 2) runs of positions,
 * run i being start[i] .. start[i] + len[i] - 1, in local order; rows is
 * their total (start[1] = len[1] = 0 with one run). */
typedef struct fcl_mpi_shard {
    size_t rows;
    size_t chunks;
    size_t start[2];
    size_t len[2];
} fcl_mpi_shard;

/*! fcl_mpi_shard_of() :
 * The shard of rank `rank` out of `ranks` for desc's seqlen and sharding
 * (no MPI call; any process may ask).
 * @return FCL_OK and *shard; FCL_ERROR_NULL_ARGUMENT; FCL_ERROR_INVALID_VALUE
 *         for ranks < 1, rank outside [0, ranks) or an unknown sharding;
 *         FCL_ERROR_INVALID_SHAPE when seqlen < C (a chunk would be empty). */
FCL_API fcl_status fcl_mpi_shard_of(const fcl_mpi_desc *desc, int rank, int ranks,
                                    fcl_mpi_shard *shard);

/* The ranks of one communicator and this rank's device. */
typedef struct fcl_mpi fcl_mpi;

/*! fcl_mpi_create() :
 * Collective over `comm` (which it duplicates: the caller's messages never
 * meet ours).  With ctx == NULL it creates a flashcl context on this rank's
 * device: the ranks of one host (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED)
 * are numbered 0, 1, ... (the local rank), and local rank l takes GPU
 * l % (number of GPUs) in fcl_list_devices() order; without GPUs (or with
 * FLASHCL_DEVICE set, or opts' device indices set) the device is the one
 * fcl_context_create(opts) picks.  With ctx != NULL that context is used (and
 * not destroyed by fcl_mpi_destroy; it must outlive the handle); opts is
 * then ignored.  The handle keeps device buffers and mapped host buffers
 * for the messages between calls (grown to the largest call so far; with
 * fp16/bf16 and heads_q = heads_kv up to about 30 times the bytes of the
 * rank's Q shard on the device and 15 times in host memory, the sums being
 * fp32) and a second command queue on the context's device for
 * copies, until fcl_mpi_destroy.
 * The ring's messages go from each rank's mapped host buffers to the next
 * rank's.  Where all ranks of `comm` are on one Linux host and each can
 * read its previous rank's memory (process_vm_readv: the same user, ptrace
 * permitted; checked here on a word of each rank), the receiving rank reads
 * each message from the sender's buffer itself, split over T threads, and
 * MPI carries only a 16-byte notice and a 1-byte receipt per message
 * (every wait is still inside an MPI call).  T is read here from
 * FLASHCL_MPI_COPY_THREADS in each rank's environment: 0 asks for MPI's
 * transport, 1..64 for that many threads; unset, empty or any other value
 * counts as 8.  The handle takes the smallest T any rank asks for, so one
 * rank's 0 keeps every rank on MPI's transport; so does any rank that
 * cannot read its neighbour, or ranks on more than one host, with no
 * error.  fcl_mpi_copy_threads() says which; results are bitwise the same
 * either way.  (On four H200s of one host Open MPI moved 3.2-4.9 GB/s
 * between the ranks and the ring waited on it for up to 62% of a step;
 * with 8 threads the waits were 0-6%: NOTES.md, runs 54 and 55.)
 * FLASHCL_MPI_UPLOAD_PIECE, read from each rank's environment at each
 * call, is a measurement switch for the ranks' own copies: a whole number
 * of bytes (at least 1) sends each message that a step uploads to the
 * device (the next K/V shard, the backward's incoming dK/dV sum) up in
 * pieces of that size, each as soon as it is read, so that the upload
 * runs beside the rest of the read; unset, empty, 0 or any other value:
 * each upload starts once the step's messages are all in, as by default.
 * Results are bitwise the same either way (NOTES.md, run 57).  On four
 * H200s at 512k tokens it made the forward 1.01-1.02x faster (NOTES.md,
 * run 59), so it stays off by default.
 * MPI must be initialised.  Every rank returns the same status.
 * @return FCL_OK and *out; else *out is NULL: FCL_ERROR_NULL_ARGUMENT (out),
 *         FCL_ERROR_MPI (MPI not initialised, or an MPI call failed), an
 *         error of fcl_context_create, FCL_ERROR_OUT_OF_HOST_MEMORY. */
FCL_API fcl_status fcl_mpi_create(MPI_Comm comm, fcl_context *ctx,
                                  const fcl_context_options *opts, fcl_mpi **out);

/*! fcl_mpi_destroy() : frees what fcl_mpi_create made (collective only in
 * that it frees a duplicated communicator).  NULL is a no-op. */
FCL_API void fcl_mpi_destroy(fcl_mpi *m);

/*! fcl_mpi_context(), fcl_mpi_rank(), fcl_mpi_size(), fcl_mpi_local_rank() :
 * @return this rank's flashcl context, its rank and the number of ranks in
 *         the communicator, its rank among the ranks of its host (NULL / -1
 *         when m is NULL). */
FCL_API fcl_context *fcl_mpi_context(const fcl_mpi *m);
/*! fcl_mpi_copy_threads() :
 * @return the threads with which this handle's ranks read each other's
 *         messages (fcl_mpi_create, FLASHCL_MPI_COPY_THREADS), the same on
 *         every rank; 0 when MPI moves them (also with one rank), -1 when m
 *         is NULL. */
FCL_API int fcl_mpi_copy_threads(const fcl_mpi *m);
FCL_API int fcl_mpi_rank(const fcl_mpi *m);
FCL_API int fcl_mpi_size(const fcl_mpi *m);
FCL_API int fcl_mpi_local_rank(const fcl_mpi *m);

/*! fcl_mpi_attention_forward_host() :
 * Collective.  O and LSE of this rank's shard (see above) from host arrays
 * of this rank's shard of Q, K, V.  lse may be NULL (not written).
 * @return the same status on every rank: FCL_OK; FCL_ERROR_RANKS_DISAGREE;
 *         else the first error of the lowest-numbered rank that has one, its
 *         checks made in this order:
 *         FCL_ERROR_NULL_ARGUMENT (desc, q, k, v or o NULL);
 *         FCL_ERROR_INVALID_VALUE (causal not 0/1, layout unknown,
 *         softmax_scale not finite); FCL_ERROR_INVALID_SHAPE (batch, heads_q,
 *         heads_kv or head_dim 0); FCL_ERROR_INVALID_VALUE (sharding
 *         unknown); FCL_ERROR_INVALID_SHAPE (seqlen < C);
 *         FCL_ERROR_DTYPE_UNSUPPORTED (dtype not fp32, fp16 or bf16); then the statuses
 *         fcl_attention_forward (and, for the backward, fcl_attention_backward)
 *         gives for this rank's whole shard against the longest shard
 *         (FCL_ERROR_HEAD_DIM_UNSUPPORTED, FCL_ERROR_HEADS_NOT_DIVISIBLE,
 *         FCL_ERROR_INVALID_SHAPE for sizes too large, OpenCL errors, ...);
 *         errors of device memory; during the ring an OpenCL error or
 *         FCL_ERROR_MPI.  m NULL: FCL_ERROR_NULL_ARGUMENT at once on that
 *         rank (there is no communicator to tell the others).
 *         On error no rank's outputs were written. */
FCL_API fcl_status fcl_mpi_attention_forward_host(fcl_mpi *m, const fcl_mpi_desc *desc,
                                                  const void *q, const void *k, const void *v,
                                                  void *o, float *lse);

/*! fcl_mpi_attention_backward_host() :
 * Collective.  dQ, dK, dV of this rank's shard from its shard of Q, K, V, the
 * forward's O and LSE (as fcl_mpi_attention_forward_host wrote them: the
 * whole sequence's, not a per-shard result) and dO.
 * @return as the forward: first FCL_ERROR_NULL_ARGUMENT for a NULL desc,
 *         q, k, v, o, dout, dq, dk or dv, then FCL_ERROR_MISSING_LSE when lse
 *         is NULL, then the forward's other checks in its order.  On error no
 *         rank's outputs were written. */
FCL_API fcl_status fcl_mpi_attention_backward_host(fcl_mpi *m, const fcl_mpi_desc *desc,
                                                   const void *q, const void *k, const void *v,
                                                   const void *o, const float *lse,
                                                   const void *dout, void *dq, void *dk,
                                                   void *dv);

/* ---- the cl_mem form ------------------------------------------------------
 *
 * The same calls on this rank's shards in device buffers, for a model whose
 * activations live on the device: Q, O, dO, LSE and dQ never leave it.
 *
 * Each tensor is an fcl_mpi_tensor: a cl_mem of the handle's context
 * (fcl_context_cl_context(fcl_mpi_context(m)); sub-buffers are fine) and an
 * offset, in elements of the tensor's type (desc->dtype; floats for LSE).
 * The tensor's elements lie from that offset on, laid out as the host form's
 * arrays are (see "Shards": contiguous in desc->layout with the shard's
 * `rows` rows; LSE fp32 (batch, heads_q, rows)): with fcl_layout_contiguous
 * (flashcl.h) strides, the offset added.  Strided layouts (a packed QKV
 * tensor) are not taken: copy such a shard into place first.
 *
 * What crosses host memory.  MPI moves host memory here (cl_mem is not MPI
 * memory), so the K/V shards still travel through the handle's mapped host
 * buffers as in the host form: the rank's own K and V are copied on the
 * device into the handle's buffer and read to host memory once per call
 * (2 x the K shard's bytes), while step 0 computes; each step's incoming
 * shard is uploaded once; the backward's fp32 dK/dV sums are read back and
 * uploaded once a step as in the host form.  Q, O, dO, LSE are read where
 * they are, and O, LSE, dQ, dK, dV are written in place by the device: the
 * host form's copies of them (up: Q; O, dO and LSE in the backward; down:
 * O and LSE; dQ, dK and dV) are what this form saves.
 *
 * Order and blocking.  The call first makes the context's queue
 * (fcl_context_cl_queue) wait for `num_wait` events of `wait_list` (of the
 * same cl_context); nothing of yours is read before they complete.  It then
 * blocks the host until the ring is over, as the host form does: MPI
 * progresses messages only inside MPI calls this rank makes, and each
 * step's message waits for this rank's device, so the call cannot return
 * before its last message.  It returns with the writes of the outputs
 * enqueued on the context's queue (so later work on that queue sees them),
 * and, when `event` is not NULL, an event that completes when they are
 * written (release it with clReleaseEvent; *event is NULL on error).  When
 * it returns, the inputs have been read: you may overwrite them.  Work of
 * yours on other queues must wait for `event` before it reads an output.
 *
 * Checks and errors: as the host form (collective; every rank returns the
 * same status, no rank's outputs written on error), in this order:
 * FCL_ERROR_NULL_ARGUMENT (desc NULL, the mem of a required tensor NULL,
 * num_wait > 0 with wait_list NULL), FCL_ERROR_MISSING_LSE (backward, lse's
 * mem NULL), the descriptor's checks, flashcl's checks for the shard (all as
 * the host form); then the tensors, each in the order of the arguments:
 * FCL_ERROR_WRONG_CONTEXT (a mem of another cl_context), an OpenCL error of
 * clGetMemObjectInfo, FCL_ERROR_BUFFER_TOO_SMALL (offset + elements past the
 * buffer's end); then FCL_ERROR_BUFFER_ALIASING when an output (O, LSE; dQ,
 * dK, dV) shares a byte with another tensor of the call (same buffer, or
 * sub-buffers of one buffer; inputs may share bytes with each other); then
 * device memory and the ring's errors.  A refused call enqueues nothing and
 * reads and writes no buffer of yours.  One exception to "no outputs
 * written": the outputs are written by kernels enqueued after the ranks
 * have agreed that the ring succeeded; if enqueuing them fails on one rank
 * (an OpenCL error such as CL_OUT_OF_HOST_MEMORY), every rank returns that
 * error, but the other ranks' outputs may be written.
 *
 * Results are bitwise those of the host form for the same inputs (the same
 * kernels, sums and order) when every offset is a multiple of 8 elements,
 * as the host form's own device buffers are: the ring's calls read Q and
 * dO in place, and an offset that is not can move them from the
 * tensor-core pieces to the portable piece (flashcl.h, fcl_layout), whose
 * results agree to the storage type's rounding only.  With one rank the
 * calls are exactly fcl_attention_forward/backward (flashcl.h) on these
 * buffers, offsets, wait list and event. */
typedef struct fcl_mpi_tensor {
    cl_mem mem;                   /* NULL: not given */
    size_t offset;                /* in elements of the tensor's type */
} fcl_mpi_tensor;

/*! fcl_mpi_attention_forward() :
 * Collective.  fcl_mpi_attention_forward_host on device buffers (above):
 * reads q, k, v; writes o and, when lse.mem is not NULL, lse.
 * @return as fcl_mpi_attention_forward_host, with the checks above. */
FCL_API fcl_status fcl_mpi_attention_forward(fcl_mpi *m, const fcl_mpi_desc *desc,
                                             fcl_mpi_tensor q, fcl_mpi_tensor k, fcl_mpi_tensor v,
                                             fcl_mpi_tensor o, fcl_mpi_tensor lse,
                                             cl_uint num_wait, const cl_event *wait_list,
                                             cl_event *event);

/*! fcl_mpi_attention_backward() :
 * Collective.  fcl_mpi_attention_backward_host on device buffers (above):
 * reads q, k, v, o, lse, dout; writes dq, dk, dv.
 * @return as fcl_mpi_attention_backward_host, with the checks above. */
FCL_API fcl_status fcl_mpi_attention_backward(fcl_mpi *m, const fcl_mpi_desc *desc,
                                              fcl_mpi_tensor q, fcl_mpi_tensor k, fcl_mpi_tensor v,
                                              fcl_mpi_tensor o, fcl_mpi_tensor lse,
                                              fcl_mpi_tensor dout, fcl_mpi_tensor dq,
                                              fcl_mpi_tensor dk, fcl_mpi_tensor dv,
                                              cl_uint num_wait, const cl_event *wait_list,
                                              cl_event *event);

/* Where the last call's time went on this rank, for benchmarks.  The first
 * four fields are wall clock, host timers.  wait_seconds: time the rank sat
 * idle waiting for messages after its device had finished the step's
 * attention (communication not hidden behind compute, including waiting
 * for slower ranks).  The device fields come from the device's own clock,
 * through the profiling of the context's queue (fcl_context_options'
 * enable_profiling, or a caller's context whose queue has
 * CL_QUEUE_PROFILING_ENABLE); without it, with one rank, and where the
 * device reports no timestamps, they are 0.  A step's device work runs
 * from the moment its K/V shard is on the device (uploaded, the device
 * idle until then) to the end of its last kernel, so it includes any time
 * the host takes to enqueue the step (a first call's kernel builds); what
 * the device does between two steps (the backward adds the dK/dV sum that
 * came with the shard) or waits for there (the shard's upload, the host)
 * is the gap.  home_seconds is the backward's last hop, the part of
 * wait_seconds spent after the ring's last step sending the finished dK/dV
 * sum home and receiving this rank's own (nothing computes beside it).
 * copy_seconds and copy_bytes count the ranks' own copies
 * (fcl_mpi_copy_threads() > 0): the time this rank spent reading messages
 * from the previous rank's memory and the bytes it read, every message of
 * the call (K/V shards, dK/dV sums); both 0 with MPI's transport and
 * with one rank. */
typedef struct fcl_mpi_timing {
    double total_seconds;         /* the whole call, checks and copies included */
    double ring_seconds;          /* the ring steps */
    double wait_seconds;          /* of ring_seconds: waiting on messages */
    int steps;                    /* ring steps: the number of ranks (0 with one rank,
                                     whose call is the plain one) */
    double device_seconds;        /* the steps' device work, summed */
    double device_gap_seconds;    /* the device's time between one step's end and the
                                     next one's inputs being in, summed */
    double home_seconds;          /* of wait_seconds: the backward's last hop (0 in the
                                     forward and with one rank) */
    double copy_seconds;          /* the ranks' own copies: time reading messages */
    size_t copy_bytes;            /* ... and the bytes read */
} fcl_mpi_timing;

/*! fcl_mpi_last_timing() :
 * @return FCL_OK and the timing of this rank's last completed call (zeros
 *         before the first), or FCL_ERROR_NULL_ARGUMENT. */
FCL_API fcl_status fcl_mpi_last_timing(const fcl_mpi *m, fcl_mpi_timing *timing);

#ifdef __cplusplus
}
#endif
#endif /* FLASHCL_MPI_H */
