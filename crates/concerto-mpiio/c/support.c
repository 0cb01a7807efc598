/* Errors agreed between ranks, Concerto's file handles, datatypes
 * described for the Rust side (src/datatype.rs) and hints: what the MPI
 * entry points (concerto_mpiio.c, data.c) share. */

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "concerto_mpiio.h"

/* ---- Errors: MPI error codes whose strings say what went wrong ---- */

/* Codes are reused in a ring: MPI lets a user code's string be replaced. */
#define CODES 64
static int error_class = -1, codes[CODES], next_code;
/* Per code: 1 while it is this rank's own failure not yet printed. */
static int unprinted[CODES];

int world_rank(void) {
    int r = 0, up = 0;
    PMPI_Initialized(&up);
    if (up) PMPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

/* An MPI error code whose string is "concerto: CALL: message". */
int error_code(const char *call, const char *msg, int own) {
    char text[MSG + 128];
    snprintf(text, sizeof text, "concerto: %s: %s", call, msg);
    if (error_class < 0 && PMPI_Add_error_class(&error_class) != MPI_SUCCESS) return MPI_ERR_OTHER;
    int slot = next_code++ % CODES;
    if (next_code <= CODES && PMPI_Add_error_code(error_class, &codes[slot]) != MPI_SUCCESS)
        return MPI_ERR_OTHER;
    /* MPI's error strings hold MPI_MAX_ERROR_STRING - 1 characters. */
    text[MPI_MAX_ERROR_STRING - 1] = 0;
    PMPI_Add_error_string(codes[slot], text);
    unprinted[slot] = own;
    return codes[slot];
}

static int print_errors(void) {
    const char *v = getenv(PRINT_ERRORS_VAR);
    return v && *v && strcmp(v, "0") != 0;
}

/* An error on its way to the program: on stderr when it is fatal (the job
 * is about to end: every rank says why), or when the program asked for
 * every failure (PRINT_ERRORS_VAR), by the rank where it happened. An
 * error the program's handler returns is the program's to report: an
 * existence probe's "no such file" (IOR opens a file to see whether it
 * is there) prints nothing. */
void report(int code, int fatal) {
    for (int slot = 0; slot < CODES && slot < next_code; slot++) {
        if (codes[slot] != code) continue;
        if (fatal || (unprinted[slot] && print_errors())) {
            char text[MPI_MAX_ERROR_STRING];
            int len;
            PMPI_Error_string(code, text, &len);
            fprintf(stderr, "rank %d: %s\n", world_rank(), text);
            unprinted[slot] = 0;
        }
        return;
    }
}

int fail(const char *call, const char *fmt, ...) {
    char msg[MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_code(call, msg, 1);
}

/* The Rust side's last error as an MPI error code. */
int rust_error(const char *call) {
    char msg[MSG];
    cmpi_last_error(msg, sizeof msg);
    return fail(call, "%s", msg);
}

/* ---- Concerto's files: the handles this side hands out ---- */

cfile *open_files;

cfile *ours(MPI_File fh) {
    for (cfile *f = open_files; f; f = f->next)
        if ((void *)f == (void *)fh) return f;
    return NULL;
}

void forget(cfile *f) {
    for (cfile **p = &open_files; *p; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            return;
        }
}

/* A failed call on a file: its error handler decides (ERRORS_ARE_FATAL
 * aborts, saying why; any other returns the code). */
int raise_on(cfile *f, int code) {
    int fatal = f && f->errhandler == MPI_ERRORS_ARE_FATAL;
    report(code, fatal);
    if (fatal) PMPI_Abort(f->comm, code);
    return code;
}

/* Every rank learns whether any failed: 0, or the error (with the first
 * failing rank's message) on every rank. `failed`: this rank's code, 0 if
 * none. */
/* Rank `root`'s error (`failed` there) as the error of every rank. */
int spread(cfile *f, MPI_Comm comm, const char *call, int root, int failed) {
    int rank;
    PMPI_Comm_rank(comm, &rank);
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

/* The first failing rank of `comm`, or -1, from each rank's marker
 * (size - rank when it failed, 0 if not) reduced with MPI_MAX. */
int first_failed(MPI_Comm comm, int worst) {
    int size;
    PMPI_Comm_size(comm, &size);
    return worst ? size - worst : -1;
}

int marker(MPI_Comm comm, int failed) {
    int size, rank;
    PMPI_Comm_size(comm, &size);
    PMPI_Comm_rank(comm, &rank);
    return failed ? size - rank : 0;
}

int agree(cfile *f, MPI_Comm comm, const char *call, int failed) {
    int mine = marker(comm, failed), worst;
    PMPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, comm);
    int root = first_failed(comm, worst);
    return root < 0 ? MPI_SUCCESS : spread(f, comm, call, root, failed);
}

/* Collective calls on a file start alike: every rank says which call it
 * made, so ranks that made different ones fail instead of mixing their
 * messages (or hanging). */
const char *const call_names[] = {"", "MPI_File_close", "MPI_File_set_view",
    "MPI_File_set_info", "MPI_File_set_size", "MPI_File_preallocate", "MPI_File_sync",
    "MPI_File_set_atomicity", "MPI_File_read_at_all", "MPI_File_write_at_all",
    "MPI_File_read_all", "MPI_File_write_all"};

/* This rank called `call`; rank `r` said it called `other` (a C_* code,
 * or anything else): the error of ranks whose collective calls differ. */
int mismatch(cfile *f, int call, int r, uint64_t other) {
    const char *theirs = other >= 1 && other <= C_WRITE_ALL ? call_names[other] : "another collective";
    return raise_on(f, fail(call_names[call], "mismatched collective calls: this rank called %s, rank %d called %s",
                            call_names[call], r, theirs));
}

int same_call(cfile *f, int call) {
    int size, me[2] = {call, f->seq++};
    PMPI_Comm_size(f->comm, &size);
    int *all = malloc(sizeof(int) * 2 * size);
    PMPI_Allgather(me, 2, MPI_INT, all, 2, MPI_INT, f->comm);
    int code = MPI_SUCCESS;
    for (int r = 0; r < size && code == MPI_SUCCESS; r++)
        if (all[2 * r] != call || all[2 * r + 1] != me[1]) code = mismatch(f, call, r, (uint64_t)all[2 * r]);
    free(all);
    return code;
}

/* ---- Datatypes, described for the Rust side (src/datatype.rs) ---- */

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
int describe_for(const char *call, MPI_Datatype t, words *d) {
    char why[MSG];
    if (t == MPI_DATATYPE_NULL) return fail(call, "MPI_DATATYPE_NULL is not a datatype");
    if (describe(t, d, why) != 0) return fail(call, "%s", why);
    return MPI_SUCCESS;
}

/* ---- Hints ---- */

void read_hints(MPI_Info info, hints *h) {
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

void free_hints(hints *h) {
    for (int i = 0; i < h->n; i++) {
        free(h->keys[i]);
        free(h->values[i]);
    }
    free(h->keys);
    free(h->values);
}

