/* Reads and writes: independent ones, collective ones (this rank's steps
 * of core's plan, src/collective.rs), and the calls Concerto does not
 * serve on its files. */

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "concerto_mpiio.h"

/* ---- Reads and writes ---- */

static void set_status(MPI_Status *status, uint64_t bytes) {
    if (status != MPI_STATUS_IGNORE) PMPI_Status_set_elements_x(status, MPI_BYTE, (MPI_Count)bytes);
}

/* Starts an access; `offset` < 0: at the individual file pointer. */
static int begin(cfile *f, const char *call, MPI_Offset offset, const void *buf, MPI_Count count,
                 MPI_Datatype datatype, int write, cmpi_access_t **a) {
    *a = NULL;
    if (count < 0) return fail(call, "a negative count (%lld)", (long long)count);
    words d = {0};
    int code = describe_for(call, datatype, &d);
    if (code == MPI_SUCCESS &&
        cmpi_access(f->id, offset, (void *)buf, (uint64_t)count, d.w, d.n, write, a))
        code = rust_error(call);
    free(d.w);
    return code;
}

int independent(MPI_File fh, const char *call, MPI_Offset offset, const void *buf, MPI_Count count,
                MPI_Datatype datatype, int write, MPI_Status *status) {
    cfile *f = ours(fh);
    if (offset < -1) return raise_on(f, fail(call, "a negative offset (%lld)", (long long)offset));
    cmpi_access_t *a;
    int code = begin(f, call, offset, buf, count, datatype, write, &a);
    if (code == MPI_SUCCESS && cmpi_independent(a)) code = rust_error(call);
    if (code == MPI_SUCCESS) set_status(status, cmpi_bytes(a));
    cmpi_free(a);
    return raise_on(f, code);
}

/* Runs this rank's steps of the plan (see ../src/collective.rs). */
static int run_steps(cfile *f, const char *call, cmpi_access_t *a) {
    size_t n = 0, cap = 16;
    MPI_Request *reqs = malloc(cap * sizeof *reqs);
    int code = MPI_SUCCESS;
    for (;;) {
        cmpi_step_t s;
        if (cmpi_step(a, &s)) {
            code = rust_error(call);
            break;
        }
        if (s.kind == STEP_DONE) break;
        if (n == cap) reqs = realloc(reqs, (cap *= 2) * sizeof *reqs);
        switch (s.kind) {
        case STEP_ISEND:
            PMPI_Isend(s.ptr, (int)s.len, MPI_BYTE, s.peer, s.tag, f->comm, &reqs[n++]);
            break;
        case STEP_IRECV:
            PMPI_Irecv(s.ptr, (int)s.len, MPI_BYTE, s.peer, s.tag, f->comm, &reqs[n++]);
            break;
        case STEP_WAIT:
            PMPI_Waitall((int)s.count, &reqs[s.first], MPI_STATUSES_IGNORE);
            break;
        case STEP_RECV_NOTE:
            PMPI_Recv(NULL, 0, MPI_BYTE, s.peer, s.tag, f->comm, MPI_STATUS_IGNORE);
            break;
        case STEP_SEND_NOTE:
            PMPI_Isend(NULL, 0, MPI_BYTE, s.peer, s.tag, f->comm, &reqs[n++]);
            break;
        }
    }
    PMPI_Waitall((int)n, reqs, MPI_STATUSES_IGNORE);
    free(reqs);
    if (code == MPI_SUCCESS && cmpi_finish(a)) code = rust_error(call);
    return code;
}

/* Every rank's header, the first exchange of a collective call. */
enum { H_CALL, H_SEQ, H_HINTS, H_FAILED, H_COUNT, H_LO, H_HI, H_WORDS };

/* Whether the call runs as each rank's independent call: the file's
 * romio_cb hint and, for automatic, whether two ranks' data (each rank's
 * span, from the headers) share a stripe unit. The rule is core's
 * (concerto_core::client::collective::Buffering), which the simulator's
 * collective applications follow too. */
static int runs_independent(cmpi_access_t *a, const uint64_t *headers, int size) {
    uint64_t *spans = malloc(sizeof(uint64_t) * 2 * (size_t)size);
    uint64_t n = 0;
    for (int r = 0; r < size; r++) {
        const uint64_t *h = &headers[H_WORDS * r];
        if (h[H_COUNT] == 0) continue;
        spans[2 * n] = h[H_LO];
        spans[2 * n + 1] = h[H_HI];
        n++;
    }
    int alone = cmpi_runs_independent(a, spans, n);
    free(spans);
    return alone;
}

/* Plans the call from every rank's access list (gathered here, after the
 * headers said how long each is); frees `headers`. */
static int plan(cfile *f, const char *call, cmpi_access_t *a, uint64_t *headers, const uint64_t *mine,
                uint64_t n) {
    int size, rank, code = MPI_SUCCESS;
    PMPI_Comm_size(f->comm, &size);
    PMPI_Comm_rank(f->comm, &rank);
    uint64_t *counts = malloc(sizeof(uint64_t) * size);
    int *rc = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    uint64_t total = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = headers[H_WORDS * r + H_COUNT];
        rc[r] = (int)(2 * counts[r]);
        displs[r] = (int)(2 * total);
        total += counts[r];
    }
    uint64_t *all = malloc(sizeof(uint64_t) * (2 * total + 1));
    PMPI_Allgatherv(mine, (int)(2 * n), MPI_UINT64_T, all, rc, displs, MPI_UINT64_T, f->comm);
    /* Every rank plans alike from the same lists and hints: a plan that
     * fails, fails on every rank. */
    if (cmpi_plan(a, (uint32_t)size, (uint32_t)rank, counts, all)) code = raise_on(f, rust_error(call));
    free(headers);
    free(counts);
    free(rc);
    free(displs);
    free(all);
    return code;
}

/* A collective read or write: three collective operations per call (the
 * header and the access lists gathered, the outcome reduced) around this
 * rank's steps of the plan; two (no access lists, no plan) when the ranks'
 * data share no stripe unit and the hints let such a call run as each
 * rank's independent call (romio_cb_* automatic, ROMIO's rule and the
 * default; or disable). MPI's collectives are costly where ranks share
 * cores, so each carries all it can. */
int collective(MPI_File fh, int call_id, MPI_Offset offset, const void *buf, MPI_Count count,
               MPI_Datatype datatype, int write, MPI_Status *status) {
    cfile *f = ours(fh);
    const char *call = call_names[call_id];
    int size, rank;
    PMPI_Comm_size(f->comm, &size);
    PMPI_Comm_rank(f->comm, &rank);
    cmpi_access_t *a = NULL;
    int failed = offset < -1 ? fail(call, "a negative offset (%lld)", (long long)offset) : 0;
    /* A read: what this rank wrote behind reaches the servers before any
     * rank leaves the exchange of headers below, which every rank
     * entered first: the call reads every rank's writes, as a read after
     * ROMIO's written-through collective write does (MPI itself asks for
     * a sync between them). A write settles only before a plan. */
    if (!failed && !write && cmpi_settle(f->id)) failed = rust_error(call);
    if (!failed) failed = begin(f, call, offset, buf, count, datatype, write, &a);
    const uint64_t *mine = NULL;
    uint64_t n = 0;
    if (!failed) cmpi_extents(a, &mine, &n);
    /* Which call, its sequence number, the hints in effect, whether this
     * rank failed, how many extents it accesses and their span: from every
     * rank. */
    uint64_t header[H_WORDS] = {(uint64_t)call_id, (uint64_t)f->seq++, cmpi_hints_fingerprint(f->id),
                                (uint64_t)marker(f->comm, failed), n, n ? mine[0] : 0,
                                n ? mine[2 * n - 2] + mine[2 * n - 1] : 0};
    uint64_t *all_headers = malloc(sizeof(uint64_t) * H_WORDS * size);
    PMPI_Allgather(header, H_WORDS, MPI_UINT64_T, all_headers, H_WORDS, MPI_UINT64_T, f->comm);
    int code = MPI_SUCCESS, worst = 0;
    for (int r = 0; r < size && code == MPI_SUCCESS; r++) {
        uint64_t *h = &all_headers[H_WORDS * r];
        if (h[H_CALL] != (uint64_t)call_id || h[H_SEQ] != header[H_SEQ]) {
            code = mismatch(f, call_id, r, h[H_CALL]);
        } else if (h[H_HINTS] != header[H_HINTS]) {
            code = raise_on(f, fail(call, "ranks %d and %d have different hints on this file (give every "
                                    "rank the same MPI_Info)", rank, r));
        }
        if ((int)h[H_FAILED] > worst) worst = (int)h[H_FAILED];
    }
    if (code == MPI_SUCCESS && worst) code = spread(f, f->comm, call, first_failed(f->comm, worst), failed);
    if (code != MPI_SUCCESS) {
        free(all_headers);
        cmpi_free(a);
        return code;
    }
    if (runs_independent(a, all_headers, size)) {
        /* Each rank's own part, a write held behind as an independent
         * one is (cmpi_independent_part says why MPI allows it); every
         * rank knows the call's end from the headers, so every rank's
         * size after the call agrees. */
        uint64_t end = 0;
        for (int r = 0; r < size; r++)
            if (all_headers[H_WORDS * r + H_COUNT] && all_headers[H_WORDS * r + H_HI] > end)
                end = all_headers[H_WORDS * r + H_HI];
        free(all_headers);
        failed = cmpi_independent_part(a) ? rust_error(call) : 0;
        if (!failed && write && cmpi_size_at_least(f->id, end)) failed = rust_error(call);
    } else {
        /* A write: what this rank wrote behind reaches the servers before
         * it enters the plan's exchange, which no rank leaves before every
         * rank entered it: no agent reads before all held writes landed.
         * (A write that runs independent needs no settling: the rank's own
         * writes keep their order in its write-behind.) A held write's
         * error is this call's, after the steps every rank must take. */
        int settled = write && cmpi_settle(f->id) ? rust_error(call) : 0;
        code = plan(f, call, a, all_headers, mine, n);
        if (code == MPI_SUCCESS) failed = run_steps(f, call, a);
        if (code == MPI_SUCCESS && !failed) failed = settled;
    }
    if (code == MPI_SUCCESS) {
        /* Whether any rank failed, and whether any rank's read met the end of the file. */
        int outcome[2] = {marker(f->comm, failed), !write && cmpi_incomplete(a)}, reduced[2];
        PMPI_Allreduce(outcome, reduced, 2, MPI_INT, MPI_MAX, f->comm);
        if (reduced[0]) code = spread(f, f->comm, call, first_failed(f->comm, reduced[0]), failed);
        else if (reduced[1] && cmpi_count_to_end(a)) code = raise_on(f, rust_error(call));
    }
    if (code == MPI_SUCCESS) set_status(status, cmpi_bytes(a));
    cmpi_free(a);
    return code;
}

#define INDEPENDENT(name, write, ...) \
    { if (!ours(fh)) return P##name(__VA_ARGS__); \
      return independent(fh, #name, OFFSET, buf, count, datatype, write, status); }
#define COLLECTIVE(name, id, write, ...) \
    { if (!ours(fh)) return P##name(__VA_ARGS__); \
      return collective(fh, id, OFFSET, buf, count, datatype, write, status); }

/* The classic calls (`int count`) and, with an MPI 4 library, their
 * large-count forms (`MPI_Count count`: MPICH 4's mpi.h declares them, and
 * IOR built against it calls them; Open MPI 4's is MPI 3.1 and has none). */
#define BLOCKING_AT(C, COUNT) \
    int MPI_File_read_at##C(MPI_File fh, MPI_Offset offset, void *buf, COUNT count, MPI_Datatype datatype, \
                            MPI_Status *status) \
        INDEPENDENT(MPI_File_read_at##C, 0, fh, offset, buf, count, datatype, status) \
    int MPI_File_write_at##C(MPI_File fh, MPI_Offset offset, const void *buf, COUNT count, \
                             MPI_Datatype datatype, MPI_Status *status) \
        INDEPENDENT(MPI_File_write_at##C, 1, fh, offset, buf, count, datatype, status) \
    int MPI_File_read_at_all##C(MPI_File fh, MPI_Offset offset, void *buf, COUNT count, MPI_Datatype datatype, \
                                MPI_Status *status) \
        COLLECTIVE(MPI_File_read_at_all##C, C_READ_AT_ALL, 0, fh, offset, buf, count, datatype, status) \
    int MPI_File_write_at_all##C(MPI_File fh, MPI_Offset offset, const void *buf, COUNT count, \
                                 MPI_Datatype datatype, MPI_Status *status) \
        COLLECTIVE(MPI_File_write_at_all##C, C_WRITE_AT_ALL, 1, fh, offset, buf, count, datatype, status)
#define BLOCKING_AT_POINTER(C, COUNT) \
    int MPI_File_read##C(MPI_File fh, void *buf, COUNT count, MPI_Datatype datatype, MPI_Status *status) \
        INDEPENDENT(MPI_File_read##C, 0, fh, buf, count, datatype, status) \
    int MPI_File_write##C(MPI_File fh, const void *buf, COUNT count, MPI_Datatype datatype, MPI_Status *status) \
        INDEPENDENT(MPI_File_write##C, 1, fh, buf, count, datatype, status) \
    int MPI_File_read_all##C(MPI_File fh, void *buf, COUNT count, MPI_Datatype datatype, MPI_Status *status) \
        COLLECTIVE(MPI_File_read_all##C, C_READ_ALL, 0, fh, buf, count, datatype, status) \
    int MPI_File_write_all##C(MPI_File fh, const void *buf, COUNT count, MPI_Datatype datatype, \
                              MPI_Status *status) \
        COLLECTIVE(MPI_File_write_all##C, C_WRITE_ALL, 1, fh, buf, count, datatype, status)

#define OFFSET offset
BLOCKING_AT(, int)
#if MPI_VERSION >= 4
BLOCKING_AT(_c, MPI_Count)
#endif
#undef OFFSET
#define OFFSET -1
BLOCKING_AT_POINTER(, int)
#if MPI_VERSION >= 4
BLOCKING_AT_POINTER(_c, MPI_Count)
#endif
#undef OFFSET
