/* The shared file pointer and ordered I/O on Concerto's files.
 *
 * The pointer is one 64-bit integer at rank 0 of the file's communicator,
 * in an MPI one-sided window made at open: a rank's read_shared or
 * write_shared takes its place with one atomic fetch-and-add (MPI's
 * passive target, no other rank involved), then reads or writes there as
 * the independent call at that offset. The ordered calls are collective:
 * the ranks' places in rank order from one prefix sum, rank 0 moving the
 * pointer past them all, then one collective access. As the individual
 * pointer, it counts elementary types of the view; a new view sets it to
 * zero. (ROMIO keeps it in a hidden file under a lock; Concerto's
 * metadata service has no atomic add, and MPI's windows need no server.) */

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

#include "concerto_mpiio.h"

int shared_open(cfile *f) {
    int rank;
    PMPI_Comm_rank(f->comm, &rank);
    int64_t *at = NULL;
    /* The library's communicator returns errors (its own duplicate): a
     * window MPI cannot make fails the open, not the job. */
    PMPI_Comm_set_errhandler(f->comm, MPI_ERRORS_RETURN);
    int rc = PMPI_Win_allocate(rank == 0 ? sizeof *at : 0, sizeof *at, MPI_INFO_NULL, f->comm, &at, &f->shared);
    if (rc != MPI_SUCCESS) {
        f->shared = MPI_WIN_NULL;
        return fail("MPI_File_open", "cannot make the shared file pointer (an MPI one-sided window)");
    }
    if (rank == 0) {
        PMPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, f->shared);
        *at = 0;
        PMPI_Win_unlock(0, f->shared);
    }
    PMPI_Barrier(f->comm);
    return MPI_SUCCESS;
}

void shared_close(cfile *f) {
    if (f->shared != MPI_WIN_NULL) PMPI_Win_free(&f->shared);
}

/* Adds `by` to the pointer (0: reads it); its value before. */
static int64_t fetch_add(cfile *f, int64_t by) {
    int64_t old = 0;
    PMPI_Win_lock(MPI_LOCK_SHARED, 0, 0, f->shared);
    PMPI_Fetch_and_op(&by, &old, MPI_INT64_T, 0, 0, by ? MPI_SUM : MPI_NO_OP, f->shared);
    PMPI_Win_unlock(0, f->shared);
    return old;
}

static void set_pointer(cfile *f, int64_t to) {
    int64_t old;
    PMPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, f->shared);
    PMPI_Fetch_and_op(&to, &old, MPI_INT64_T, 0, 0, MPI_REPLACE, f->shared);
    PMPI_Win_unlock(0, f->shared);
}

/* Collective (a new view): rank 0 sets the pointer to zero, and no rank
 * uses it before. */
void shared_reset(cfile *f) {
    int rank;
    PMPI_Comm_rank(f->comm, &rank);
    if (rank == 0) set_pointer(f, 0);
    PMPI_Barrier(f->comm);
}

/* How many elementary types of the view `count` items of `datatype` are
 * (the shared pointer's unit); -1 and the error when they are not whole. */
static int64_t etypes(cfile *f, const char *call, MPI_Count count, MPI_Datatype datatype, int *code) {
    MPI_Count size, esize;
    PMPI_Type_size_x(datatype, &size);
    PMPI_Type_size_x(f->etype, &esize);
    if (count < 0) {
        *code = fail(call, "a negative count (%lld)", (long long)count);
        return -1;
    }
    if (esize == 0 || (count * size) % esize != 0) {
        *code = fail(call, "%lld bytes are not a whole number of the view's elementary type (%lld bytes)",
                     (long long)(count * size), (long long)esize);
        return -1;
    }
    return count * size / esize;
}

/* An independent access at the shared pointer, which it moves past itself. */
static int at_shared(MPI_File fh, const char *call, const void *buf, MPI_Count count, MPI_Datatype datatype,
                     int write, MPI_Status *status) {
    cfile *f = ours(fh);
    int code = MPI_SUCCESS;
    int64_t n = etypes(f, call, count, datatype, &code);
    if (n < 0) return raise_on(f, code);
    int64_t at = fetch_add(f, n);
    return independent(fh, call, at, buf, count, datatype, write, status);
}

/* A collective access in rank order from the shared pointer. */
static int ordered(MPI_File fh, int call_id, const char *call, const void *buf, MPI_Count count,
                   MPI_Datatype datatype, int write, MPI_Status *status) {
    cfile *f = ours(fh);
    int rank, code = MPI_SUCCESS;
    PMPI_Comm_rank(f->comm, &rank);
    int64_t n = etypes(f, call, count, datatype, &code), before = 0, total = 0, base = 0;
    int failed = n < 0 ? code : 0;
    code = agree(f, f->comm, call, failed);
    if (code != MPI_SUCCESS) return code;
    PMPI_Exscan(&n, &before, 1, MPI_INT64_T, MPI_SUM, f->comm);
    if (rank == 0) before = 0; /* MPI_Exscan leaves rank 0's undefined */
    PMPI_Allreduce(&n, &total, 1, MPI_INT64_T, MPI_SUM, f->comm);
    if (rank == 0) base = fetch_add(f, total);
    PMPI_Bcast(&base, 1, MPI_INT64_T, 0, f->comm);
    return collective(fh, call_id, base + before, buf, count, datatype, write, status);
}

#define SHARED(name, write, ...) \
    { if (!ours(fh)) return P##name(__VA_ARGS__); \
      return at_shared(fh, #name, buf, count, datatype, write, status); }
#define ORDERED(name, id, write, ...) \
    { if (!ours(fh)) return P##name(__VA_ARGS__); \
      return ordered(fh, id, #name, buf, count, datatype, write, status); }
#define I_SHARED(name, write, ...) \
    { if (!ours(fh)) return P##name(__VA_ARGS__); \
      MPI_Status st; \
      int code = at_shared(fh, #name, buf, count, datatype, write, &st); \
      return started(code, &st, request); }
#define ORDERED_BEGIN(name, id, write, ...) \
    { cfile *f = ours(fh); if (!f) return P##name(__VA_ARGS__); \
      if (f->split_pending) return split_begin(f, #name, MPI_SUCCESS, NULL); \
      MPI_Status st; \
      return split_begin(f, #name, ordered(fh, id, #name, buf, count, datatype, write, &st), &st); }

#define SHARED_CALLS(C, COUNT) \
    int MPI_File_read_shared##C(MPI_File fh, void *buf, COUNT count, MPI_Datatype datatype, MPI_Status *status) \
        SHARED(MPI_File_read_shared##C, 0, fh, buf, count, datatype, status) \
    int MPI_File_write_shared##C(MPI_File fh, const void *buf, COUNT count, MPI_Datatype datatype, \
                                 MPI_Status *status) \
        SHARED(MPI_File_write_shared##C, 1, fh, buf, count, datatype, status) \
    int MPI_File_iread_shared##C(MPI_File fh, void *buf, COUNT count, MPI_Datatype datatype, \
                                 MPI_Request *request) \
        I_SHARED(MPI_File_iread_shared##C, 0, fh, buf, count, datatype, request) \
    int MPI_File_iwrite_shared##C(MPI_File fh, const void *buf, COUNT count, MPI_Datatype datatype, \
                                  MPI_Request *request) \
        I_SHARED(MPI_File_iwrite_shared##C, 1, fh, buf, count, datatype, request) \
    int MPI_File_read_ordered##C(MPI_File fh, void *buf, COUNT count, MPI_Datatype datatype, MPI_Status *status) \
        ORDERED(MPI_File_read_ordered##C, C_READ_AT_ALL, 0, fh, buf, count, datatype, status) \
    int MPI_File_write_ordered##C(MPI_File fh, const void *buf, COUNT count, MPI_Datatype datatype, \
                                  MPI_Status *status) \
        ORDERED(MPI_File_write_ordered##C, C_WRITE_AT_ALL, 1, fh, buf, count, datatype, status) \
    int MPI_File_read_ordered_begin##C(MPI_File fh, void *buf, COUNT count, MPI_Datatype datatype) \
        ORDERED_BEGIN(MPI_File_read_ordered_begin##C, C_READ_AT_ALL, 0, fh, buf, count, datatype) \
    int MPI_File_write_ordered_begin##C(MPI_File fh, const void *buf, COUNT count, MPI_Datatype datatype) \
        ORDERED_BEGIN(MPI_File_write_ordered_begin##C, C_WRITE_AT_ALL, 1, fh, buf, count, datatype)

SHARED_CALLS(, int)
#if MPI_VERSION >= 4
SHARED_CALLS(_c, MPI_Count)
#endif

int MPI_File_read_ordered_end(MPI_File fh, void *buf, MPI_Status *status) {
    cfile *f = ours(fh);
    return f ? split_end(f, "MPI_File_read_ordered_end", status) : PMPI_File_read_ordered_end(fh, buf, status);
}

int MPI_File_write_ordered_end(MPI_File fh, const void *buf, MPI_Status *status) {
    cfile *f = ours(fh);
    return f ? split_end(f, "MPI_File_write_ordered_end", status) : PMPI_File_write_ordered_end(fh, buf, status);
}

/* Collective: every rank gives the same offset and whence. */
int MPI_File_seek_shared(MPI_File fh, MPI_Offset offset, int whence) {
    static const char *call = "MPI_File_seek_shared";
    cfile *f = ours(fh);
    if (!f) return PMPI_File_seek_shared(fh, offset, whence);
    int rank, failed = 0;
    PMPI_Comm_rank(f->comm, &rank);
    int w = whence == MPI_SEEK_SET ? 0 : whence == MPI_SEEK_CUR ? 1 : whence == MPI_SEEK_END ? 2 : -1;
    if (w < 0) failed = fail(call, "whence %d is not MPI_SEEK_SET, _CUR or _END", whence);
    int64_t args[2] = {offset, whence}, root[2] = {offset, whence};
    PMPI_Bcast(root, 2, MPI_INT64_T, 0, f->comm);
    if (!failed && (root[0] != args[0] || root[1] != args[1]))
        failed = fail(call, "rank %d gave offset %lld whence %d, rank 0 offset %lld whence %d (give every rank "
                      "the same)", rank, (long long)offset, whence, (long long)root[0], (int)root[1]);
    int64_t to = offset;
    if (!failed && rank == 0 && w == 1) to = fetch_add(f, 0) + offset;
    if (!failed && rank == 0 && w == 2) {
        /* The view's end, as the individual pointer's MPI_SEEK_END finds it. */
        int64_t mine, end;
        if (cmpi_position(f->id, &mine) || cmpi_seek(f->id, offset, 2) || cmpi_position(f->id, &end) ||
            cmpi_seek(f->id, mine, 0))
            failed = rust_error(call);
        to = end;
    }
    if (!failed && rank == 0 && to < 0) failed = fail(call, "the position would be negative (%lld)", (long long)to);
    if (!failed && rank == 0) set_pointer(f, to);
    return agree(f, f->comm, call, failed);
}

int MPI_File_get_position_shared(MPI_File fh, MPI_Offset *offset) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_position_shared(fh, offset);
    *offset = fetch_add(f, 0);
    return MPI_SUCCESS;
}
