/* The MPI side of Concerto's MPI-IO library (see ../src/lib.rs): the
 * entry points for opening, closing, views, hints, sizes and the file
 * pointer; data.c has reads and writes, support.c what they share.
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

#include "concerto_mpiio.h"

/* ---- Opening and closing ---- */

/* A failed open or delete: the error handler of MPI_FILE_NULL decides, as
 * MPI says (MPI_ERRORS_RETURN unless the program set another). */
static int open_failed(MPI_Errhandler eh, MPI_Comm comm, int code) {
    int fatal = eh == MPI_ERRORS_ARE_FATAL;
    report(code, fatal);
    if (fatal) PMPI_Abort(comm, code);
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
    f->shared = MPI_WIN_NULL;
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
        if (code == MPI_SUCCESS) {
            code = agree(NULL, f->comm, call, shared_open(f));
            if (code != MPI_SUCCESS) shared_close(f);
        }
        if (code != MPI_SUCCESS && opened) cmpi_close(f->id);
    }
    free_hints(&h);
    if (code != MPI_SUCCESS) {
        PMPI_Comm_free(&f->comm);
        free(f->path);
        free(f);
        return open_failed(eh, comm, code);
    }
    f->fint = -(MPI_Fint)(f->id + 1);
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
    shared_close(f);
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
    int code = r < 0 ? fail("MPI_File_delete", "%s: the path is too long", filename)
               : cmpi_delete(path) ? rust_error("MPI_File_delete") : MPI_SUCCESS;
    if (code == MPI_SUCCESS) return code;
    MPI_Errhandler eh;
    PMPI_File_get_errhandler(MPI_FILE_NULL, &eh);
    return open_failed(eh, MPI_COMM_WORLD, code);
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
        shared_reset(f);
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
    /* cb_nodes as ROMIO reports it: the aggregators two-phase uses, every
     * rank of the file's communicator unless the hint said fewer. */
    int len, flag;
    PMPI_Info_get_valuelen(*info_used, "cb_nodes", &len, &flag);
    if (!flag) {
        int size;
        char n[16];
        PMPI_Comm_size(f->comm, &size);
        snprintf(n, sizeof n, "%d", size);
        PMPI_Info_set(*info_used, "cb_nodes", n);
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
    /* Every rank's held writes land before the size changes: one held
     * past a cut would land after it and grow the file back. */
    if (size < 0) failed = fail(call_names[call], "a negative size (%lld)", (long long)size);
    else if (cmpi_settle(f->id)) failed = rust_error(call_names[call]);
    code = agree(f, f->comm, call_names[call], failed);
    if (code != MPI_SUCCESS) return code;
    if (rank == 0 && cmpi_set_size(f->id, (uint64_t)size, grow_only)) failed = rust_error(call_names[call]);
    if (!failed && cmpi_size_was_set(f->id)) failed = rust_error(call_names[call]);
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

int MPI_File_call_errhandler(MPI_File fh, int errorcode) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_call_errhandler(fh, errorcode);
    raise_on(f, errorcode);
    return MPI_SUCCESS;
}

int MPI_File_get_type_extent(MPI_File fh, MPI_Datatype datatype, MPI_Aint *extent) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_type_extent(fh, datatype, extent);
    MPI_Aint lb;
    return PMPI_Type_get_extent(datatype, &lb, extent);
}

#if MPI_VERSION >= 4
int MPI_File_get_type_extent_c(MPI_File fh, MPI_Datatype datatype, MPI_Count *extent) {
    cfile *f = ours(fh);
    if (!f) return PMPI_File_get_type_extent_c(fh, datatype, extent);
    MPI_Count lb;
    return PMPI_Type_get_extent_x(datatype, &lb, extent);
}
#endif

/* ---- Fortran handles: Concerto's files as INTEGERs (MPICH's Fortran
 * bindings convert with these; fortran.c's wrappers too) ---- */

MPI_Fint MPI_File_c2f(MPI_File fh) {
    cfile *f = ours(fh);
    return f ? f->fint : PMPI_File_c2f(fh);
}

MPI_File MPI_File_f2c(MPI_Fint fh) {
    for (cfile *f = open_files; f; f = f->next)
        if (f->fint == fh) return (MPI_File)(void *)f;
    return PMPI_File_f2c(fh);
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

