/* Shared by the MPI side's files (see concerto_mpiio.c): the Rust side's
 * C ABI, Concerto's file handles, errors agreed between ranks, datatype
 * descriptions and hints. */
#ifndef CONCERTO_MPIIO_H
#define CONCERTO_MPIIO_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* ---- The Rust side (src/ffi.rs) ---- */

typedef struct cmpi_access_t cmpi_access_t;
typedef struct {
    int kind, peer, tag;
    void *ptr;
    uint64_t len, first, count;
} cmpi_step_t;
enum { STEP_DONE, STEP_ISEND, STEP_IRECV, STEP_WAIT, STEP_RECV_NOTE, STEP_SEND_NOTE };
enum { M_READ = 1, M_WRITE = 2, M_CREATE = 4, M_EXCL = 8, M_APPEND = 16, M_DELETE = 32 };

void cmpi_last_error(char *buf, size_t cap);
int cmpi_resolve(const char *name, char *out, size_t cap);
int cmpi_open(const char *path, uint32_t mode, int create_here, const char **keys,
              const char **values, size_t n, uint64_t *id);
int cmpi_close(uint64_t id);
int cmpi_delete(const char *path);
int cmpi_set_view(uint64_t id, int64_t disp, const int64_t *etype, size_t ne,
                  const int64_t *filetype, size_t nf, const char **keys, const char **values,
                  size_t n);
int cmpi_set_info(uint64_t id, const char **keys, const char **values, size_t n);
int cmpi_info(uint64_t id, char *buf, size_t cap);
int cmpi_size(uint64_t id, uint64_t *size);
int cmpi_settle(uint64_t id);
int cmpi_size_at_least(uint64_t id, uint64_t end);
int cmpi_size_was_set(uint64_t id);
int cmpi_runs_independent(cmpi_access_t *a, const uint64_t *spans, uint64_t n);
int cmpi_independent_part(cmpi_access_t *a);
int cmpi_set_size(uint64_t id, uint64_t size, int grow_only);
int cmpi_sync(uint64_t id);
int cmpi_seek(uint64_t id, int64_t offset, int whence);
int cmpi_position(uint64_t id, int64_t *at);
int cmpi_byte_offset(uint64_t id, int64_t offset, int64_t *bytes);
int cmpi_access(uint64_t id, int64_t offset, void *buf, uint64_t count, const int64_t *desc,
                size_t words, int write, cmpi_access_t **access);
int cmpi_independent(cmpi_access_t *a);
void cmpi_extents(cmpi_access_t *a, const uint64_t **pairs, uint64_t *n);
int cmpi_plan(cmpi_access_t *a, uint32_t ranks, uint32_t me, const uint64_t *counts,
              const uint64_t *all);
int cmpi_step(cmpi_access_t *a, cmpi_step_t *step);
int cmpi_finish(cmpi_access_t *a);
int cmpi_incomplete(cmpi_access_t *a);
int cmpi_count_to_end(cmpi_access_t *a);
uint64_t cmpi_bytes(cmpi_access_t *a);
uint64_t cmpi_hints_fingerprint(uint64_t id);
void cmpi_free(cmpi_access_t *a);

/* ---- Errors ---- */

#define MSG 1024
int world_rank(void);
/* An MPI error code whose string is "concerto: CALL: message"; `own`:
 * this rank's failure (not another rank's, spread to it). */
int error_code(const char *call, const char *msg, int own);
/* The variable that has every rank print its own failures on stderr, also
 * those the program's error handler returns to it (fatal ones always are). */
#define PRINT_ERRORS_VAR "CONCERTO_MPIIO_PRINT_ERRORS"
void report(int code, int fatal);
int fail(const char *call, const char *fmt, ...);
int rust_error(const char *call);

/* ---- Concerto's files ---- */

typedef struct cfile {
    uint64_t id;
    MPI_Comm comm; /* a duplicate: the library's messages never meet the program's */
    int amode, seq;
    MPI_Errhandler errhandler;
    MPI_Fint fint; /* its Fortran handle (MPI_File_c2f): negative, never one of MPI's */
    MPI_Offset disp;
    MPI_Datatype etype, filetype;
    char *path; /* in the cluster's namespace */
    int split_pending;       /* a split collective begun, not yet ended */
    MPI_Count split_bytes;   /* what it moved */
    MPI_Win shared;          /* the shared file pointer (shared.c), at rank 0 */
    struct cfile *next;
} cfile;
extern cfile *open_files;
cfile *ours(MPI_File fh);
void forget(cfile *f);
int raise_on(cfile *f, int code);

/* ---- Agreement between ranks ---- */

/* ---- Reads and writes (data.c): an access served now; `offset` -1: at
 * the individual file pointer; `call_id` a C_* code ---- */

int independent(MPI_File fh, const char *call, MPI_Offset offset, const void *buf, MPI_Count count,
                MPI_Datatype datatype, int write, MPI_Status *status);
int collective(MPI_File fh, int call_id, MPI_Offset offset, const void *buf, MPI_Count count,
               MPI_Datatype datatype, int write, MPI_Status *status);

/* Nonblocking calls (nonblocking.c): an access served at its start, `code`
 * and `status` its outcome: a request already complete, or the error. */
int started(int code, MPI_Status *status, MPI_Request *request);
/* Split collectives (nonblocking.c): the begin's outcome kept for the end. */
int split_begin(cfile *f, const char *call, int code, MPI_Status *status);
int split_end(cfile *f, const char *call, MPI_Status *status);

/* The shared file pointer (shared.c): made at open, reset by a view, gone at close. */
int shared_open(cfile *f);
void shared_reset(cfile *f);
void shared_close(cfile *f);

enum { C_CLOSE = 1, C_SET_VIEW, C_SET_INFO, C_SET_SIZE, C_PREALLOCATE, C_SYNC, C_SET_ATOMICITY,
       C_READ_AT_ALL, C_WRITE_AT_ALL, C_READ_ALL, C_WRITE_ALL };
extern const char *const call_names[];
int spread(cfile *f, MPI_Comm comm, const char *call, int root, int failed);
int first_failed(MPI_Comm comm, int worst);
int marker(MPI_Comm comm, int failed);
int agree(cfile *f, MPI_Comm comm, const char *call, int failed);
int mismatch(cfile *f, int call, int r, uint64_t other);
int same_call(cfile *f, int call);

/* ---- Datatypes and hints ---- */

typedef struct {
    int64_t *w;
    size_t n, cap;
} words;

int describe_for(const char *call, MPI_Datatype t, words *d);

typedef struct {
    int n;
    char **keys, **values;
} hints;

void read_hints(MPI_Info info, hints *h);
void free_hints(hints *h);

#endif
