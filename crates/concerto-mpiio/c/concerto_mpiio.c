/* The MPI side of Concerto's MPI-IO library (see ../src/lib.rs).
 *
 * Preloaded into an unmodified MPI program, this file's MPI_File_* entry
 * points take the calls first (MPI's profiling interface, as Darshan's
 * wrappers do): a file named "concerto:/PATH", or lying under a Concerto
 * mount, is served by Concerto; every other call goes on to the MPI
 * library as PMPI_File_*, untouched. It is compiled once per MPI library
 * (Open MPI's and MPICH's handles and constants differ) and linked with the
 * Rust static library, which does everything that is not MPI: datatypes
 * are handed over as descriptions (describe()), and a collective call is
 * the Rust side's plan, whose steps (cmpi_step) this side turns into MPI
 * messages. Kept to what only MPI can do: reading MPI objects, moving
 * bytes between ranks, MPI's error codes. */

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
void cmpi_free(cmpi_access_t *a);

/* ---- Errors: MPI error codes whose strings say what went wrong ---- */

#define MSG 1024
/* Codes are reused in a ring: MPI lets a user code's string be replaced. */
#define CODES 64
static int error_class = -1, codes[CODES], next_code;

static int world_rank(void) {
    int r = 0, up = 0;
    PMPI_Initialized(&up);
    if (up) PMPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

/* An MPI error code whose string is "concerto: CALL: message". */
static int error_code(const char *call, const char *msg, int loud) {
    char text[MSG + 128];
    snprintf(text, sizeof text, "concerto: %s: %s", call, msg);
    /* Written to stderr too, by the rank where it happened: a program that
     * does not print MPI's error strings still shows why. */
    if (loud) fprintf(stderr, "rank %d: %s\n", world_rank(), text);
    if (error_class < 0 && PMPI_Add_error_class(&error_class) != MPI_SUCCESS) return MPI_ERR_OTHER;
    int slot = next_code++ % CODES;
    if (next_code <= CODES && PMPI_Add_error_code(error_class, &codes[slot]) != MPI_SUCCESS)
        return MPI_ERR_OTHER;
    /* MPI's error strings hold MPI_MAX_ERROR_STRING - 1 characters. */
    text[MPI_MAX_ERROR_STRING - 1] = 0;
    PMPI_Add_error_string(codes[slot], text);
    return codes[slot];
}

static int fail(const char *call, const char *fmt, ...) {
    char msg[MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_code(call, msg, 1);
}

/* The Rust side's last error as an MPI error code. */
static int rust_error(const char *call) {
    char msg[MSG];
    cmpi_last_error(msg, sizeof msg);
    return fail(call, "%s", msg);
}

/* ---- Concerto's files: the handles this side hands out ---- */

typedef struct cfile {
    uint64_t id;
    MPI_Comm comm; /* a duplicate: the library's messages never meet the program's */
    int amode, seq;
    MPI_Errhandler errhandler;
    MPI_Offset disp;
    MPI_Datatype etype, filetype;
    char *path; /* in the cluster's namespace */
    struct cfile *next;
} cfile;
static cfile *open_files;

static cfile *ours(MPI_File fh) {
    for (cfile *f = open_files; f; f = f->next)
        if ((void *)f == (void *)fh) return f;
    return NULL;
}

static void forget(cfile *f) {
    for (cfile **p = &open_files; *p; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            return;
        }
}

/* A failed call on a file: its error handler decides (ERRORS_ARE_FATAL
 * aborts; any other returns the code). */
static int raise_on(cfile *f, int code) {
    if (f && f->errhandler == MPI_ERRORS_ARE_FATAL) PMPI_Abort(f->comm, code);
    return code;
}

/* Every rank learns whether any failed: 0, or the error (with the first
 * failing rank's message) on every rank. `failed`: this rank's code, 0 if
 * none. */
static int agree(cfile *f, MPI_Comm comm, const char *call, int failed) {
    int size, rank, mine, worst;
    PMPI_Comm_size(comm, &size);
    PMPI_Comm_rank(comm, &rank);
    mine = failed ? size - rank : 0;
    PMPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, comm);
    if (!worst) return MPI_SUCCESS;
    int root = size - worst;
    char msg[MSG] = "";
    if (rank == root) {
        int len;
        PMPI_Error_string(failed, msg, &len);
    }
    PMPI_Bcast(msg, MSG, MPI_CHAR, root, comm);
    if (rank == root) return raise_on(f, failed);
    /* "concerto: CALL: why" -> "rank R failed: why" (R printed it already) */
    char *why = strstr(msg, ": ");
    why = why ? strstr(why + 2, ": ") : NULL;
    char text[MSG + 32];
    snprintf(text, sizeof text, "rank %d failed: %s", root, why ? why + 2 : msg);
    return raise_on(f, error_code(call, text, 0));
}

/* Collective calls on a file start alike: every rank says which call it
 * made, so ranks that made different ones fail instead of mixing their
 * messages (or hanging). */
enum { C_CLOSE = 1, C_SET_VIEW, C_SET_INFO, C_SET_SIZE, C_PREALLOCATE, C_SYNC, C_SET_ATOMICITY,
       C_READ_AT_ALL, C_WRITE_AT_ALL, C_READ_ALL, C_WRITE_ALL };
static const char *const call_names[] = {"", "MPI_File_close", "MPI_File_set_view",
    "MPI_File_set_info", "MPI_File_set_size", "MPI_File_preallocate", "MPI_File_sync",
    "MPI_File_set_atomicity", "MPI_File_read_at_all", "MPI_File_write_at_all",
    "MPI_File_read_all", "MPI_File_write_all"};

static int same_call(cfile *f, int call) {
    int size, me[2] = {call, f->seq++};
    PMPI_Comm_size(f->comm, &size);
    int *all = malloc(sizeof(int) * 2 * size);
    PMPI_Allgather(me, 2, MPI_INT, all, 2, MPI_INT, f->comm);
    int code = MPI_SUCCESS;
    for (int r = 0; r < size && code == MPI_SUCCESS; r++)
        if (all[2 * r] != call || all[2 * r + 1] != me[1]) {
            int other = all[2 * r] >= 1 && all[2 * r] <= C_WRITE_ALL ? all[2 * r] : 0;
            code = raise_on(f, fail(call_names[call],
                "mismatched collective calls: this rank called %s, rank %d called %s",
                call_names[call], r, other ? call_names[other] : "another collective"));
        }
    free(all);
    return code;
}

/* ---- Datatypes, described for the Rust side (src/datatype.rs) ---- */

typedef struct {
    int64_t *w;
    size_t n, cap;
} words;

static void put(words *d, int64_t v) {
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 64;
        d->w = realloc(d->w, d->cap * sizeof(int64_t));
    }
    d->w[d->n++] = v;
}

static int combiner_code(int c) {
    if (c == MPI_COMBINER_NAMED) return 0;
    if (c == MPI_COMBINER_DUP) return 1;
    if (c == MPI_COMBINER_CONTIGUOUS) return 2;
    if (c == MPI_COMBINER_VECTOR) return 3;
    if (c == MPI_COMBINER_HVECTOR) return 4;
    if (c == MPI_COMBINER_INDEXED) return 5;
    if (c == MPI_COMBINER_HINDEXED) return 6;
    if (c == MPI_COMBINER_INDEXED_BLOCK) return 7;
    if (c == MPI_COMBINER_HINDEXED_BLOCK) return 8;
    if (c == MPI_COMBINER_STRUCT) return 9;
    if (c == MPI_COMBINER_SUBARRAY) return 10;
    if (c == MPI_COMBINER_DARRAY) return 11;
    if (c == MPI_COMBINER_RESIZED) return 12;
    return -1;
}

static int order_code(int o) { return o == MPI_ORDER_FORTRAN ? 1 : 0; }

/* Appends the description of `t` to `d`; on a combiner Concerto does not
 * read, fills `why` and returns -1. */
static int describe(MPI_Datatype t, words *d, char *why) {
    int ni, na, nt, comb;
    MPI_Aint lb, extent;
    PMPI_Type_get_envelope(t, &ni, &na, &nt, &comb);
    PMPI_Type_get_extent(t, &lb, &extent);
    int code = combiner_code(comb);
    if (code < 0) {
        snprintf(why, MSG, "a datatype built with combiner %d (the Fortran-integer or F90 "
                 "variants) is not served", comb);
        return -1;
    }
    put(d, code);
    put(d, lb);
    put(d, extent);
    if (code == 0) {
        MPI_Count size;
        PMPI_Type_size_x(t, &size);
        put(d, size);
        return 0;
    }
    int *ints = malloc(sizeof(int) * (ni + 1));
    MPI_Aint *addrs = malloc(sizeof(MPI_Aint) * (na + 1));
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (nt + 1));
    PMPI_Type_get_contents(t, ni, na, nt, ints, addrs, types);
    /* The constants MPI libraries number differently, as the Rust side reads them. */
    if (comb == MPI_COMBINER_SUBARRAY) ints[ni - 1] = order_code(ints[ni - 1]);
    if (comb == MPI_COMBINER_DARRAY) {
        int nd = ints[2];
        for (int k = 0; k < nd; k++) {
            int *dist = &ints[3 + nd + k], *darg = &ints[3 + 2 * nd + k];
            *dist = *dist == MPI_DISTRIBUTE_BLOCK ? 0 : *dist == MPI_DISTRIBUTE_CYCLIC ? 1 : 2;
            if (*darg == MPI_DISTRIBUTE_DFLT_DARG) *darg = -1;
        }
        ints[ni - 1] = order_code(ints[ni - 1]);
    }
    put(d, ni);
    put(d, na);
    put(d, nt);
    for (int i = 0; i < ni; i++) put(d, ints[i]);
    for (int i = 0; i < na; i++) put(d, addrs[i]);
    int rc = 0;
    for (int i = 0; i < nt; i++) {
        int cni, cna, cnt, ccomb;
        if (rc == 0) rc = describe(types[i], d, why);
        PMPI_Type_get_envelope(types[i], &cni, &cna, &cnt, &ccomb);
        if (ccomb != MPI_COMBINER_NAMED) PMPI_Type_free(&types[i]);
    }
    free(ints);
    free(addrs);
    free(types);
    return rc;
}

/* A datatype's description, or an MPI error code for `call`. */
static int describe_for(const char *call, MPI_Datatype t, words *d) {
    char why[MSG];
    if (t == MPI_DATATYPE_NULL) return fail(call, "MPI_DATATYPE_NULL is not a datatype");
    if (describe(t, d, why) != 0) return fail(call, "%s", why);
    return MPI_SUCCESS;
}

/* ---- Hints ---- */

typedef struct {
    int n;
    char **keys, **values;
} hints;

static void read_hints(MPI_Info info, hints *h) {
    h->n = 0;
    h->keys = h->values = NULL;
    if (info == MPI_INFO_NULL) return;
    int n;
    PMPI_Info_get_nkeys(info, &n);
    h->keys = calloc(n + 1, sizeof(char *));
    h->values = calloc(n + 1, sizeof(char *));
    for (int i = 0; i < n; i++) {
        char key[MPI_MAX_INFO_KEY + 1];
        int len, flag;
        PMPI_Info_get_nthkey(info, i, key);
        PMPI_Info_get_valuelen(info, key, &len, &flag);
        h->keys[h->n] = strdup(key);
        h->values[h->n] = calloc(len + 1, 1);
        PMPI_Info_get(info, key, len, h->values[h->n], &flag);
        h->n++;
    }
}

static void free_hints(hints *h) {
    for (int i = 0; i < h->n; i++) {
        free(h->keys[i]);
        free(h->values[i]);
    }
    free(h->keys);
    free(h->values);
}

/* ---- Opening and closing ---- */

/* A failed open: the error handler of MPI_FILE_NULL decides, as MPI says
 * (MPI_ERRORS_RETURN unless the program set another). */
static int open_failed(MPI_Errhandler eh, MPI_Comm comm, int code) {
    if (eh == MPI_ERRORS_ARE_FATAL) PMPI_Abort(comm, code);
    return code;
}

int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh) {
    static const char *call = "MPI_File_open";
    char path[4096];
    int r = cmpi_resolve(filename, path, sizeof path);
    if (r == 0) return PMPI_File_open(comm, filename, amode, info, fh);
    MPI_Errhandler eh;
    PMPI_File_get_errhandler(MPI_FILE_NULL, &eh);
    int code = MPI_SUCCESS;
    int access = !!(amode & MPI_MODE_RDONLY) + !!(amode & MPI_MODE_WRONLY) + !!(amode & MPI_MODE_RDWR);
    if (r < 0) code = fail(call, "%s: the path is too long", filename);
    else if (access != 1)
        code = fail(call, "%s: give exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY, MPI_MODE_RDWR", filename);
    else if ((amode & MPI_MODE_RDONLY) && (amode & (MPI_MODE_CREATE | MPI_MODE_EXCL)))
        code = fail(call, "%s: MPI_MODE_CREATE and MPI_MODE_EXCL need write access", filename);
    else if (amode & MPI_MODE_SEQUENTIAL)
        code = fail(call, "%s: MPI_MODE_SEQUENTIAL (shared file pointers only) is not served", filename);
    if (code != MPI_SUCCESS) return open_failed(eh, comm, code);
    uint32_t mode = (amode & MPI_MODE_WRONLY ? M_WRITE : amode & MPI_MODE_RDWR ? M_READ | M_WRITE : M_READ) |
                    (amode & MPI_MODE_CREATE ? M_CREATE : 0) | (amode & MPI_MODE_EXCL ? M_EXCL : 0) |
                    (amode & MPI_MODE_APPEND ? M_APPEND : 0) |
                    (amode & MPI_MODE_DELETE_ON_CLOSE ? M_DELETE : 0);
    hints h;
    read_hints(info, &h);
    cfile *f = calloc(1, sizeof *f);
    PMPI_Comm_dup(comm, &f->comm);
    f->amode = amode;
    f->errhandler = eh;
    f->etype = f->filetype = MPI_BYTE;
    f->path = strdup(path);
    int rank;
    PMPI_Comm_rank(f->comm, &rank);
    /* Rank 0 creates the file (with the layout the hints ask for); then the others open it. */
    int created = 0, failed = 0;
    if (rank == 0 && (amode & MPI_MODE_CREATE)) {
        if (cmpi_open(path, mode, 1, (const char **)h.keys, (const char **)h.values, h.n, &f->id))
            failed = rust_error(call);
        else
            created = 1;
    }
    code = agree(NULL, f->comm, call, failed);
    if (code == MPI_SUCCESS) {
        int opened = created;
        if (!created)
            failed = cmpi_open(path, mode, 0, (const char **)h.keys, (const char **)h.values, h.n,
                               &f->id) ? rust_error(call) : (opened = 1, 0);
        code = agree(NULL, f->comm, call, failed);
        if (code != MPI_SUCCESS && opened) cmpi_close(f->id);
    }
    free_hints(&h);
    if (code != MPI_SUCCESS) {
        PMPI_Comm_free(&f->comm);
        free(f->path);
        free(f);
        return open_failed(eh, comm, code);
    }
    f->next = open_files;
    open_files = f;
    *fh = (MPI_File)(void *)f;
    return MPI_SUCCESS;
}

static void drop_types(cfile *f) {
    if (f->etype != MPI_BYTE) PMPI_Type_free(&f->etype);
    if (f->filetype != MPI_BYTE) PMPI_Type_free(&f->filetype);
}

int MPI_File_close(MPI_File *fh) {
    cfile *f = ours(*fh);
    if (!f) return PMPI_File_close(fh);
    int code = same_call(f, C_CLOSE);
    if (code != MPI_SUCCESS) return code;
    int failed = cmpi_close(f->id) ? rust_error("MPI_File_close") : 0;
    code = agree(f, f->comm, "MPI_File_close", failed);
    int rank;
    PMPI_Comm_rank(f->comm, &rank);
    if (code == MPI_SUCCESS && (f->amode & MPI_MODE_DELETE_ON_CLOSE)) {
        failed = rank == 0 && cmpi_delete(f->path) ? rust_error("MPI_File_close") : 0;
        code = agree(f, f->comm, "MPI_File_close", failed);
    }
    forget(f);
    drop_types(f);
    PMPI_Comm_free(&f->comm);
    free(f->path);
    free(f);
    *fh = MPI_FILE_NULL;
    return code;
}

int MPI_File_delete(const char *filename, MPI_Info info) {
    char path[4096];
    int r = cmpi_resolve(filename, path, sizeof path);
    if (r == 0) return PMPI_File_delete(filename, info);
    if (r < 0) return fail("MPI_File_delete", "%s: the path is too long", filename);
    return cmpi_delete(path) ? rust_error("MPI_File_delete") : MPI_SUCCESS;
}

/* ---- Views, hints, sizes ---- */

int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
                      const char *datarep, MPI_Info info) {
    static const char *call = "MPI_File_set_view";
    cfile *f = ours(fh);
    if (!f) return PMPI_File_set_view(fh, disp, etype, filetype, datarep, info);
    int code = same_call(f, C_SET_VIEW);
    if (code != MPI_SUCCESS) return code;
    words e = {0}, t = {0};
    int failed = 0;
    if (!datarep || strcasecmp(datarep, "native") != 0)
        failed = fail(call, "data representation \"%s\" is not served (only \"native\")",
                      datarep ? datarep : "(null)");
    if (!failed) failed = describe_for(call, etype, &e);
    if (!failed) failed = describe_for(call, filetype, &t);
    if (!failed) {
        hints h;
        read_hints(info, &h);
        if (cmpi_set_view(f->id, disp, e.w, e.n, t.w, t.n, (const char **)h.keys,
                          (const char **)h.values, h.n))
            failed = rust_error(call);
        free_hints(&h);
    }
    free(e.w);
    free(t.w);
    code = agree(f, f->comm, call, failed);
    if (code == MPI_SUCCESS) {
        drop_types(f);
        f->disp = disp;
        PMPI_Type_dup(etype, &f->etype);
        PMPI_Type_dup(filetype, &f->filetype);
    }
    return code;
}

int MPI_File_get_view(MPI_File fh, MPI_Offset *disp, MPI_Datatype *etype, MPI_Datatype *filetype,
                      char *datarep) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_view(fh, disp, etype, filetype, datarep);
    *disp = f->disp;
    PMPI_Type_dup(f->etype, etype);
    PMPI_Type_dup(f->filetype, filetype);
    strcpy(datarep, "native");
    return MPI_SUCCESS;
}

int MPI_File_set_info(MPI_File fh, MPI_Info info) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_set_info(fh, info);
    int code = same_call(f, C_SET_INFO);
    if (code != MPI_SUCCESS) return code;
    hints h;
    read_hints(info, &h);
    int failed = cmpi_set_info(f->id, (const char **)h.keys, (const char **)h.values, h.n)
                     ? rust_error("MPI_File_set_info") : 0;
    free_hints(&h);
    return agree(f, f->comm, "MPI_File_set_info", failed);
}

int MPI_File_get_info(MPI_File fh, MPI_Info *info_used) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_info(fh, info_used);
    char text[8192];
    if (cmpi_info(f->id, text, sizeof text)) return raise_on(f, rust_error("MPI_File_get_info"));
    PMPI_Info_create(info_used);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        PMPI_Info_set(*info_used, line, eq + 1);
    }
    return MPI_SUCCESS;
}

int MPI_File_get_size(MPI_File fh, MPI_Offset *size) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_size(fh, size);
    uint64_t s;
    if (cmpi_size(f->id, &s)) return raise_on(f, rust_error("MPI_File_get_size"));
    *size = (MPI_Offset)s;
    return MPI_SUCCESS;
}

static int resize(cfile *f, int call, MPI_Offset size, int grow_only) {
    int code = same_call(f, call);
    if (code != MPI_SUCCESS) return code;
    int rank, failed = 0;
    PMPI_Comm_rank(f->comm, &rank);
    if (size < 0) failed = fail(call_names[call], "a negative size (%lld)", (long long)size);
    else if (rank == 0 && cmpi_set_size(f->id, (uint64_t)size, grow_only))
        failed = rust_error(call_names[call]);
    return agree(f, f->comm, call_names[call], failed);
}

int MPI_File_set_size(MPI_File fh, MPI_Offset size) {
    cfile *f = ours(fh);
    return f ? resize(f, C_SET_SIZE, size, 0) : PMPI_File_set_size(fh, size);
}

int MPI_File_preallocate(MPI_File fh, MPI_Offset size) {
    cfile *f = ours(fh);
    return f ? resize(f, C_PREALLOCATE, size, 1) : PMPI_File_preallocate(fh, size);
}

int MPI_File_sync(MPI_File fh) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_sync(fh);
    int code = same_call(f, C_SYNC);
    if (code != MPI_SUCCESS) return code;
    int failed = cmpi_sync(f->id) ? rust_error("MPI_File_sync") : 0;
    return agree(f, f->comm, "MPI_File_sync", failed);
}

int MPI_File_get_amode(MPI_File fh, int *amode) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_amode(fh, amode);
    *amode = f->amode;
    return MPI_SUCCESS;
}

int MPI_File_get_group(MPI_File fh, MPI_Group *group) {
    cfile *f = ours(fh);
    return f ? PMPI_Comm_group(f->comm, group) : PMPI_File_get_group(fh, group);
}

int MPI_File_set_atomicity(MPI_File fh, int flag) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_set_atomicity(fh, flag);
    int code = same_call(f, C_SET_ATOMICITY);
    if (code != MPI_SUCCESS) return code;
    int failed = flag ? fail("MPI_File_set_atomicity", "atomic mode is not served "
                             "(Concerto's writes are not atomic across servers)") : 0;
    return agree(f, f->comm, "MPI_File_set_atomicity", failed);
}

int MPI_File_get_atomicity(MPI_File fh, int *flag) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_atomicity(fh, flag);
    *flag = 0;
    return MPI_SUCCESS;
}

int MPI_File_set_errhandler(MPI_File fh, MPI_Errhandler errhandler) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_set_errhandler(fh, errhandler);
    f->errhandler = errhandler;
    return MPI_SUCCESS;
}

int MPI_File_get_errhandler(MPI_File fh, MPI_Errhandler *errhandler) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_errhandler(fh, errhandler);
    *errhandler = f->errhandler;
    return MPI_SUCCESS;
}

int MPI_File_get_type_extent(MPI_File fh, MPI_Datatype datatype, MPI_Aint *extent) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_type_extent(fh, datatype, extent);
    MPI_Aint lb;
    return PMPI_Type_get_extent(datatype, &lb, extent);
}

/* ---- The individual file pointer ---- */

int MPI_File_seek(MPI_File fh, MPI_Offset offset, int whence) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_seek(fh, offset, whence);
    int w = whence == MPI_SEEK_SET ? 0 : whence == MPI_SEEK_CUR ? 1 : whence == MPI_SEEK_END ? 2 : -1;
    if (w < 0) return raise_on(f, fail("MPI_File_seek", "whence %d is not MPI_SEEK_SET, _CUR or _END", whence));
    return cmpi_seek(f->id, offset, w) ? raise_on(f, rust_error("MPI_File_seek")) : MPI_SUCCESS;
}

int MPI_File_get_position(MPI_File fh, MPI_Offset *offset) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_position(fh, offset);
    int64_t at;
    if (cmpi_position(f->id, &at)) return raise_on(f, rust_error("MPI_File_get_position"));
    *offset = at;
    return MPI_SUCCESS;
}

int MPI_File_get_byte_offset(MPI_File fh, MPI_Offset offset, MPI_Offset *disp) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_byte_offset(fh, offset, disp);
    int64_t b;
    if (cmpi_byte_offset(f->id, offset, &b)) return raise_on(f, rust_error("MPI_File_get_byte_offset"));
    *disp = b;
    return MPI_SUCCESS;
}

/* ---- Reads and writes ---- */

static void set_status(MPI_Status *status, uint64_t bytes) {
    if (status != MPI_STATUS_IGNORE) PMPI_Status_set_elements_x(status, MPI_BYTE, (MPI_Count)bytes);
}

/* Starts an access; `offset` < 0: at the individual file pointer. */
static int begin(cfile *f, const char *call, MPI_Offset offset, const void *buf, int count,
                 MPI_Datatype datatype, int write, cmpi_access_t **a) {
    *a = NULL;
    if (count < 0) return fail(call, "a negative count (%d)", count);
    words d = {0};
    int code = describe_for(call, datatype, &d);
    if (code == MPI_SUCCESS &&
        cmpi_access(f->id, offset, (void *)buf, (uint64_t)count, d.w, d.n, write, a))
        code = rust_error(call);
    free(d.w);
    return code;
}

static int independent(MPI_File fh, const char *call, MPI_Offset offset, const void *buf, int count,
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

static int collective(MPI_File fh, int call_id, MPI_Offset offset, const void *buf, int count,
                      MPI_Datatype datatype, int write, MPI_Status *status) {
    cfile *f = ours(fh);
    const char *call = call_names[call_id];
    int code = same_call(f, call_id);
    if (code != MPI_SUCCESS) return code;
    int size, rank;
    PMPI_Comm_size(f->comm, &size);
    PMPI_Comm_rank(f->comm, &rank);
    cmpi_access_t *a = NULL;
    int failed = offset < -1 ? fail(call, "a negative offset (%lld)", (long long)offset) : 0;
    if (!failed) failed = begin(f, call, offset, buf, count, datatype, write, &a);
    code = agree(f, f->comm, call, failed);
    if (code != MPI_SUCCESS) {
        cmpi_free(a);
        return code;
    }
    /* Every rank's access list, to every rank: the planner's input. */
    const uint64_t *mine;
    uint64_t n;
    cmpi_extents(a, &mine, &n);
    uint64_t *counts = malloc(sizeof(uint64_t) * size);
    PMPI_Allgather(&n, 1, MPI_UINT64_T, counts, 1, MPI_UINT64_T, f->comm);
    int *rc = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    uint64_t total = 0;
    for (int r = 0; r < size; r++) {
        rc[r] = (int)(2 * counts[r]);
        displs[r] = (int)(2 * total);
        total += counts[r];
    }
    uint64_t *all = malloc(sizeof(uint64_t) * (2 * total + 1));
    PMPI_Allgatherv(mine, (int)(2 * n), MPI_UINT64_T, all, rc, displs, MPI_UINT64_T, f->comm);
    failed = cmpi_plan(a, (uint32_t)size, (uint32_t)rank, counts, all) ? rust_error(call) : 0;
    free(counts);
    free(rc);
    free(displs);
    free(all);
    code = agree(f, f->comm, call, failed);
    if (code == MPI_SUCCESS) {
        failed = run_steps(f, call, a);
        /* Whether any rank's read met the end of the file, with the errors. */
        int inc = !write && cmpi_incomplete(a), any = 0;
        PMPI_Allreduce(&inc, &any, 1, MPI_INT, MPI_MAX, f->comm);
        if (!failed && any && cmpi_count_to_end(a)) failed = rust_error(call);
        code = agree(f, f->comm, call, failed);
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

#define OFFSET offset
int MPI_File_read_at(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    INDEPENDENT(MPI_File_read_at, 0, fh, offset, buf, count, datatype, status)
int MPI_File_write_at(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    INDEPENDENT(MPI_File_write_at, 1, fh, offset, buf, count, datatype, status)
int MPI_File_read_at_all(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    COLLECTIVE(MPI_File_read_at_all, C_READ_AT_ALL, 0, fh, offset, buf, count, datatype, status)
int MPI_File_write_at_all(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    COLLECTIVE(MPI_File_write_at_all, C_WRITE_AT_ALL, 1, fh, offset, buf, count, datatype, status)
#undef OFFSET
#define OFFSET -1
int MPI_File_read(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    INDEPENDENT(MPI_File_read, 0, fh, buf, count, datatype, status)
int MPI_File_write(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    INDEPENDENT(MPI_File_write, 1, fh, buf, count, datatype, status)
int MPI_File_read_all(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    COLLECTIVE(MPI_File_read_all, C_READ_ALL, 0, fh, buf, count, datatype, status)
int MPI_File_write_all(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    COLLECTIVE(MPI_File_write_all, C_WRITE_ALL, 1, fh, buf, count, datatype, status)
#undef OFFSET

/* ---- Calls Concerto does not serve: a clear error on a Concerto file,
 * the MPI library's own call on any other ---- */

#define UNSERVED(name, ...) \
    { cfile *f = ours(fh); if (!f) return P##name(__VA_ARGS__); \
      return raise_on(f, fail(#name, "not served on a Concerto file (shared file pointers, " \
                              "split collectives and nonblocking I/O are not)")); }

int MPI_File_iread_at(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype, MPI_Request *request)
    UNSERVED(MPI_File_iread_at, fh, offset, buf, count, datatype, request)
int MPI_File_iwrite_at(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype, MPI_Request *request)
    UNSERVED(MPI_File_iwrite_at, fh, offset, buf, count, datatype, request)
int MPI_File_iread_at_all(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype, MPI_Request *request)
    UNSERVED(MPI_File_iread_at_all, fh, offset, buf, count, datatype, request)
int MPI_File_iwrite_at_all(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype, MPI_Request *request)
    UNSERVED(MPI_File_iwrite_at_all, fh, offset, buf, count, datatype, request)
int MPI_File_iread(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Request *request)
    UNSERVED(MPI_File_iread, fh, buf, count, datatype, request)
int MPI_File_iwrite(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Request *request)
    UNSERVED(MPI_File_iwrite, fh, buf, count, datatype, request)
int MPI_File_iread_all(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Request *request)
    UNSERVED(MPI_File_iread_all, fh, buf, count, datatype, request)
int MPI_File_iwrite_all(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Request *request)
    UNSERVED(MPI_File_iwrite_all, fh, buf, count, datatype, request)
int MPI_File_read_shared(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    UNSERVED(MPI_File_read_shared, fh, buf, count, datatype, status)
int MPI_File_write_shared(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    UNSERVED(MPI_File_write_shared, fh, buf, count, datatype, status)
int MPI_File_iread_shared(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Request *request)
    UNSERVED(MPI_File_iread_shared, fh, buf, count, datatype, request)
int MPI_File_iwrite_shared(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Request *request)
    UNSERVED(MPI_File_iwrite_shared, fh, buf, count, datatype, request)
int MPI_File_read_ordered(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    UNSERVED(MPI_File_read_ordered, fh, buf, count, datatype, status)
int MPI_File_write_ordered(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status)
    UNSERVED(MPI_File_write_ordered, fh, buf, count, datatype, status)
int MPI_File_seek_shared(MPI_File fh, MPI_Offset offset, int whence)
    UNSERVED(MPI_File_seek_shared, fh, offset, whence)
int MPI_File_get_position_shared(MPI_File fh, MPI_Offset *offset)
    UNSERVED(MPI_File_get_position_shared, fh, offset)
int MPI_File_read_at_all_begin(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype)
    UNSERVED(MPI_File_read_at_all_begin, fh, offset, buf, count, datatype)
int MPI_File_read_at_all_end(MPI_File fh, void *buf, MPI_Status *status)
    UNSERVED(MPI_File_read_at_all_end, fh, buf, status)
int MPI_File_write_at_all_begin(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype)
    UNSERVED(MPI_File_write_at_all_begin, fh, offset, buf, count, datatype)
int MPI_File_write_at_all_end(MPI_File fh, const void *buf, MPI_Status *status)
    UNSERVED(MPI_File_write_at_all_end, fh, buf, status)
int MPI_File_read_all_begin(MPI_File fh, void *buf, int count, MPI_Datatype datatype)
    UNSERVED(MPI_File_read_all_begin, fh, buf, count, datatype)
int MPI_File_read_all_end(MPI_File fh, void *buf, MPI_Status *status)
    UNSERVED(MPI_File_read_all_end, fh, buf, status)
int MPI_File_write_all_begin(MPI_File fh, const void *buf, int count, MPI_Datatype datatype)
    UNSERVED(MPI_File_write_all_begin, fh, buf, count, datatype)
int MPI_File_write_all_end(MPI_File fh, const void *buf, MPI_Status *status)
    UNSERVED(MPI_File_write_all_end, fh, buf, status)
int MPI_File_read_ordered_begin(MPI_File fh, void *buf, int count, MPI_Datatype datatype)
    UNSERVED(MPI_File_read_ordered_begin, fh, buf, count, datatype)
int MPI_File_read_ordered_end(MPI_File fh, void *buf, MPI_Status *status)
    UNSERVED(MPI_File_read_ordered_end, fh, buf, status)
int MPI_File_write_ordered_begin(MPI_File fh, const void *buf, int count, MPI_Datatype datatype)
    UNSERVED(MPI_File_write_ordered_begin, fh, buf, count, datatype)
int MPI_File_write_ordered_end(MPI_File fh, const void *buf, MPI_Status *status)
    UNSERVED(MPI_File_write_ordered_end, fh, buf, status)
