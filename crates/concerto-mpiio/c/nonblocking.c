/* Nonblocking reads and writes and split collectives on Concerto's files:
 * each is served at once, when it is called, and hands back what its
 * completion gives. MPI lets a nonblocking operation complete at any time
 * between its start and its wait, and a split collective between its
 * begin and its end; the program may not touch the buffer meanwhile, so
 * doing the work at the start is one of the executions MPI allows. The
 * request is a generalized request already complete, whose status carries
 * the bytes moved: MPI_Wait, MPI_Test and their kin (the MPI library's own)
 * return at once. An error is returned by the starting call, under the
 * file's error handler (a generalized request's error would go to the
 * communicator's handler instead, fatal by default), and the request is
 * then MPI_REQUEST_NULL.
 *
 * A nonblocking collective (iwrite_all, ...) is its blocking collective:
 * MPI requires every rank to start the file's collectives in the same
 * order, which is the order they run in here. */

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

#include "concerto_mpiio.h"

/* ---- Requests already complete ---- */

static int done_query(void *extra, MPI_Status *status) {
    PMPI_Status_set_elements_x(status, MPI_BYTE, *(MPI_Count *)extra);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int done_free(void *extra) {
    free(extra);
    return MPI_SUCCESS;
}

static int done_cancel(void *extra, int complete) {
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* A request already complete whose status says `status` moved its bytes. */
static int completed(MPI_Status *status, MPI_Request *request) {
    MPI_Count *bytes = malloc(sizeof *bytes);
    PMPI_Get_elements_x(status, MPI_BYTE, bytes);
    int rc = PMPI_Grequest_start(done_query, done_free, done_cancel, bytes, request);
    if (rc != MPI_SUCCESS) {
        free(bytes);
        return rc;
    }
    return PMPI_Grequest_complete(*request);
}

/* The outcome of an operation served at its start: its request, or its error. */
int started(int code, MPI_Status *status, MPI_Request *request) {
    if (code != MPI_SUCCESS) {
        *request = MPI_REQUEST_NULL;
        return code;
    }
    return completed(status, request);
}

#define I_INDEPENDENT(name, call, write, ...) \
    { if (!ours(fh)) return P##name(__VA_ARGS__); \
      MPI_Status st; \
      return started(independent(fh, call, OFFSET, buf, count, datatype, write, &st), &st, request); }
#define I_COLLECTIVE(name, id, write, ...) \
    { if (!ours(fh)) return P##name(__VA_ARGS__); \
      MPI_Status st; \
      return started(collective(fh, id, OFFSET, buf, count, datatype, write, &st), &st, request); }

/* Both the classic calls (`int count`) and, with an MPI 4 library, the
 * large-count ones (`MPI_Count count`). */
#define NONBLOCKING_CALLS(C, COUNT) \
    int MPI_File_iread_at##C(MPI_File fh, MPI_Offset offset, void *buf, COUNT count, MPI_Datatype datatype, \
                             MPI_Request *request) \
        I_INDEPENDENT(MPI_File_iread_at##C, "MPI_File_iread_at" #C, 0, fh, offset, buf, count, datatype, request) \
    int MPI_File_iwrite_at##C(MPI_File fh, MPI_Offset offset, const void *buf, COUNT count, \
                              MPI_Datatype datatype, MPI_Request *request) \
        I_INDEPENDENT(MPI_File_iwrite_at##C, "MPI_File_iwrite_at" #C, 1, fh, offset, buf, count, datatype, \
                      request) \
    int MPI_File_iread_at_all##C(MPI_File fh, MPI_Offset offset, void *buf, COUNT count, MPI_Datatype datatype, \
                                 MPI_Request *request) \
        I_COLLECTIVE(MPI_File_iread_at_all##C, C_READ_AT_ALL, 0, fh, offset, buf, count, datatype, request) \
    int MPI_File_iwrite_at_all##C(MPI_File fh, MPI_Offset offset, const void *buf, COUNT count, \
                                  MPI_Datatype datatype, MPI_Request *request) \
        I_COLLECTIVE(MPI_File_iwrite_at_all##C, C_WRITE_AT_ALL, 1, fh, offset, buf, count, datatype, request)

#define NONBLOCKING_AT_POINTER(C, COUNT) \
    int MPI_File_iread##C(MPI_File fh, void *buf, COUNT count, MPI_Datatype datatype, MPI_Request *request) \
        I_INDEPENDENT(MPI_File_iread##C, "MPI_File_iread" #C, 0, fh, buf, count, datatype, request) \
    int MPI_File_iwrite##C(MPI_File fh, const void *buf, COUNT count, MPI_Datatype datatype, \
                           MPI_Request *request) \
        I_INDEPENDENT(MPI_File_iwrite##C, "MPI_File_iwrite" #C, 1, fh, buf, count, datatype, request) \
    int MPI_File_iread_all##C(MPI_File fh, void *buf, COUNT count, MPI_Datatype datatype, MPI_Request *request) \
        I_COLLECTIVE(MPI_File_iread_all##C, C_READ_ALL, 0, fh, buf, count, datatype, request) \
    int MPI_File_iwrite_all##C(MPI_File fh, const void *buf, COUNT count, MPI_Datatype datatype, \
                               MPI_Request *request) \
        I_COLLECTIVE(MPI_File_iwrite_all##C, C_WRITE_ALL, 1, fh, buf, count, datatype, request)

#define OFFSET offset
NONBLOCKING_CALLS(, int)
#if MPI_VERSION >= 4
NONBLOCKING_CALLS(_c, MPI_Count)
#endif
#undef OFFSET
#define OFFSET -1
NONBLOCKING_AT_POINTER(, int)
#if MPI_VERSION >= 4
NONBLOCKING_AT_POINTER(_c, MPI_Count)
#endif
#undef OFFSET

/* ---- Split collectives: the collective at its begin, its status kept
 * for its end (one split collective at a time per file, as MPI says) ---- */

int split_begin(cfile *f, const char *call, int code, MPI_Status *status) {
    if (f->split_pending) return raise_on(f, fail(call, "a split collective is already under way on this file "
                                                  "(end it first)"));
    if (code != MPI_SUCCESS) return code;
    f->split_pending = 1;
    PMPI_Get_elements_x(status, MPI_BYTE, &f->split_bytes);
    return MPI_SUCCESS;
}

int split_end(cfile *f, const char *call, MPI_Status *status) {
    if (!f->split_pending) return raise_on(f, fail(call, "no split collective was begun on this file"));
    f->split_pending = 0;
    if (status != MPI_STATUS_IGNORE) PMPI_Status_set_elements_x(status, MPI_BYTE, f->split_bytes);
    return MPI_SUCCESS;
}

#define SPLIT_BEGIN(name, id, write, ...) \
    { cfile *f = ours(fh); if (!f) return P##name(__VA_ARGS__); \
      if (f->split_pending) return split_begin(f, #name, MPI_SUCCESS, NULL); \
      MPI_Status st; \
      return split_begin(f, #name, collective(fh, id, OFFSET, buf, count, datatype, write, &st), &st); }
#define SPLIT_END(name, ...) \
    { cfile *f = ours(fh); if (!f) return P##name(__VA_ARGS__); \
      return split_end(f, #name, status); }

#define SPLIT_CALLS(C, COUNT) \
    int MPI_File_read_at_all_begin##C(MPI_File fh, MPI_Offset offset, void *buf, COUNT count, \
                                      MPI_Datatype datatype) \
        SPLIT_BEGIN(MPI_File_read_at_all_begin##C, C_READ_AT_ALL, 0, fh, offset, buf, count, datatype) \
    int MPI_File_write_at_all_begin##C(MPI_File fh, MPI_Offset offset, const void *buf, COUNT count, \
                                       MPI_Datatype datatype) \
        SPLIT_BEGIN(MPI_File_write_at_all_begin##C, C_WRITE_AT_ALL, 1, fh, offset, buf, count, datatype)
#define SPLIT_AT_POINTER(C, COUNT) \
    int MPI_File_read_all_begin##C(MPI_File fh, void *buf, COUNT count, MPI_Datatype datatype) \
        SPLIT_BEGIN(MPI_File_read_all_begin##C, C_READ_ALL, 0, fh, buf, count, datatype) \
    int MPI_File_write_all_begin##C(MPI_File fh, const void *buf, COUNT count, MPI_Datatype datatype) \
        SPLIT_BEGIN(MPI_File_write_all_begin##C, C_WRITE_ALL, 1, fh, buf, count, datatype)

#define OFFSET offset
SPLIT_CALLS(, int)
#if MPI_VERSION >= 4
SPLIT_CALLS(_c, MPI_Count)
#endif
#undef OFFSET
#define OFFSET -1
SPLIT_AT_POINTER(, int)
#if MPI_VERSION >= 4
SPLIT_AT_POINTER(_c, MPI_Count)
#endif
#undef OFFSET

int MPI_File_read_at_all_end(MPI_File fh, void *buf, MPI_Status *status)
    SPLIT_END(MPI_File_read_at_all_end, fh, buf, status)
int MPI_File_write_at_all_end(MPI_File fh, const void *buf, MPI_Status *status)
    SPLIT_END(MPI_File_write_at_all_end, fh, buf, status)
int MPI_File_read_all_end(MPI_File fh, void *buf, MPI_Status *status)
    SPLIT_END(MPI_File_read_all_end, fh, buf, status)
int MPI_File_write_all_end(MPI_File fh, const void *buf, MPI_Status *status)
    SPLIT_END(MPI_File_write_all_end, fh, buf, status)
