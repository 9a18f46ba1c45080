/* node_copy.c - the ring's messages between ranks of one host without
 * MPI's byte transport: the receiver reads the sender's staging memory
 * itself (Linux cross-memory attach, process_vm_readv), split over several
 * threads.  MPI still carries a 16-byte notice (where and how much) and a
 * 1-byte receipt (the sender may reuse its memory), so every wait stays
 * an MPI wait.  The default where it can be used (FLASHCL_MPI_COPY_THREADS,
 * flashcl_mpi.h): Open MPI moved 3.2-4.0 GB/s between the ranks of the
 * 4-GPU machine, one thread's copy (NOTES.md, run 54), and these copies by
 * 8 threads hid nearly every exchange there (run 55). */
#define _GNU_SOURCE /* process_vm_readv */
#include "dist_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>
#define DIST_HAVE_NODE_COPY 1
#else
#define DIST_HAVE_NODE_COPY 0
#endif

enum { MAX_THREADS = 64 };

/* The threads a rank asks for: FLASHCL_MPI_COPY_THREADS = 0 (MPI's
 * transport) .. 64; unset, empty or anything else, DIST_COPY_THREADS. */
static int threads_asked(void)
{
    const char *env = getenv("FLASHCL_MPI_COPY_THREADS");
    if (env == NULL || env[0] == '\0')
        return DIST_COPY_THREADS;
    char *end = NULL;
    const long n = strtol(env, &end, 10);
    return *end == '\0' && n >= 0 && n <= MAX_THREADS ? (int)n : DIST_COPY_THREADS;
}

size_t dist_upload_piece_asked(void)
{
    const char *env = getenv("FLASHCL_MPI_UPLOAD_PIECE");
    if (env == NULL || env[0] == '\0')
        return 0;
    char *end = NULL;
    const unsigned long long n = strtoull(env, &end, 10);
    return *end == '\0' && env[0] != '-' && n >= 1 && n <= SIZE_MAX ? (size_t)n : 0;
}

#if DIST_HAVE_NODE_COPY
typedef struct slice {
    pid_t pid;
    char *dst;
    uint64_t src;
    size_t bytes;
    int err;                      /* errno of a failed read, 0 when it all came */
} slice;

/* One slice, in as many reads as the kernel takes. */
static void *read_slice(void *arg)
{
    slice *s = arg;
    size_t at = 0;
    while (at < s->bytes) {
        struct iovec local = {s->dst + at, s->bytes - at};
        struct iovec remote = {(void *)(uintptr_t)(s->src + at), s->bytes - at};
        const ssize_t got = process_vm_readv(s->pid, &local, 1, &remote, 1, 0);
        if (got <= 0) {
            s->err = got < 0 ? errno : EIO;
            return NULL;
        }
        at += (size_t)got;
    }
    return NULL;
}

/* bytes of process pid's memory at src into dst, by t threads. */
static fcl_status read_from(pid_t pid, int t, void *dst, uint64_t src, size_t bytes)
{
    if (t < 1)
        return FCL_ERROR_MPI;
    slice s[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    /* slices of whole 4 KiB pages where there are enough */
    const size_t per = ((bytes + (size_t)t - 1) / (size_t)t + 4095) / 4096 * 4096;
    int n = 0;
    for (size_t at = 0; at < bytes && n < t; at += per, ++n) {
        const size_t len = bytes - at < per ? bytes - at : per;
        s[n] = (slice){pid, (char *)dst + at, src + at, len, 0};
    }
    for (int i = 1; i < n; ++i) /* slice 0 on this thread; a thread not started runs here too */
        started[i] = pthread_create(&th[i], NULL, read_slice, &s[i]) == 0;
    if (n > 0)
        read_slice(&s[0]);
    for (int i = 1; i < n; ++i) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            read_slice(&s[i]);
    }
    for (int i = 0; i < n; ++i)
        if (s[i].err != 0)
            return FCL_ERROR_MPI;
    return FCL_OK;
}

fcl_status dist_node_read(const fcl_mpi *m, void *dst, uint64_t src, size_t bytes)
{
    return read_from((pid_t)m->prev_pid, m->copy_threads, dst, src, bytes);
}

/* Whether this rank reads the previous rank's memory: a word the previous
 * rank holds, at the address it sent, comes back right. */
static int probe_read(const fcl_mpi *m, pid_t prev_pid)
{
    static volatile uint64_t word; /* lives as long as the process */
    word = 0x666C617368636C00ull ^ (uint64_t)m->rank;
    uint64_t mine = (uint64_t)(uintptr_t)&word, theirs = 0;
    if (MPI_Sendrecv(&mine, 1, MPI_UINT64_T, dist_next(m), 0, &theirs, 1, MPI_UINT64_T,
                     dist_prev(m), 0, m->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return 0;
    uint64_t got = 0;
    const fcl_status st = read_from(prev_pid, 1, &got, theirs, sizeof got);
    /* the previous rank's word changes no more before everyone has read */
    MPI_Barrier(m->comm);
    return st == FCL_OK && got == (0x666C617368636C00ull ^ (uint64_t)dist_prev(m));
}
#else
fcl_status dist_node_read(const fcl_mpi *m, void *dst, uint64_t src, size_t bytes)
{
    (void)m, (void)dst, (void)src, (void)bytes;
    return FCL_ERROR_MPI;
}
#endif

fcl_status dist_node_copy_setup(fcl_mpi *m, int host_ranks)
{
    m->copy_threads = 0;
    int want = m->size > 1 && host_ranks == m->size ? threads_asked() : 0;
    /* collective from here: every rank takes part, whatever it wants */
    int all = 0;
    if (MPI_Allreduce(&want, &all, 1, MPI_INT, MPI_MIN, m->comm) != MPI_SUCCESS)
        return FCL_ERROR_MPI;
    if (all == 0)
        return FCL_OK;
#if DIST_HAVE_NODE_COPY
    int mine = (int)getpid(), prev_pid = 0;
    if (MPI_Sendrecv(&mine, 1, MPI_INT, dist_next(m), 0, &prev_pid, 1, MPI_INT, dist_prev(m), 0,
                     m->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return FCL_ERROR_MPI;
    int ok = probe_read(m, (pid_t)prev_pid), every = 0;
    if (MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, m->comm) != MPI_SUCCESS)
        return FCL_ERROR_MPI;
    /* where any rank cannot read its neighbour (another host's rank, a
     * kernel that forbids it), all keep MPI's transport */
    m->prev_pid = prev_pid;
    m->copy_threads = every ? all : 0;
#endif
    return FCL_OK;
}
