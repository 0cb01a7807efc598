/* The Fortran bindings of the MPI_File calls (`use mpi` and mpif.h), for
 * every file: each converts its Fortran handles, strings and statuses and
 * calls this library's C entry point, which serves a Concerto file and
 * hands any other to the MPI library (PMPI_File_*). Open MPI's own
 * Fortran bindings call PMPI_File_* directly, past the C entry points
 * (an open of "concerto:/x" reached ROMIO and failed); MPICH's call the C
 * entry points but not for every conversion. Preloaded, these symbols come
 * first under both, as Darshan's Fortran wrappers do.
 *
 * Each binding is exported under the four names Fortran compilers give a
 * subroutine (mpi_file_open_, mpi_file_open__, mpi_file_open,
 * MPI_FILE_OPEN). A CHARACTER argument's length comes after all the
 * others, as a size_t (gfortran 8 and later, and the Intel and LLVM
 * compilers). `use mpi_f08` has other bindings (not served). */

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "concerto_mpiio.h"

#define ALIASES(lower, UPPER, params) \
    void lower##_ params __attribute__((alias("f_" #lower))); \
    void lower##__ params __attribute__((alias("f_" #lower))); \
    void lower params __attribute__((alias("f_" #lower))); \
    void UPPER params __attribute__((alias("f_" #lower)));

#define FH(x) MPI_File_f2c(*(x))
#define TYPE(x) PMPI_Type_f2c(*(x))

/* A Fortran string (blank-padded, `len` long) as a C string; NULL when too long. */
static char *c_string(const char *f, size_t len, char *out, size_t cap) {
    while (len > 0 && f[len - 1] == ' ') len--;
    if (len >= cap) return NULL;
    memcpy(out, f, len);
    out[len] = 0;
    return out;
}

static void status_out(MPI_Status *c, MPI_Fint *f) {
    if (f != MPI_F_STATUS_IGNORE) PMPI_Status_c2f(c, f);
}

/* ---- Opening, closing, the file's properties ---- */

static void f_mpi_file_open(MPI_Fint *comm, const char *name, MPI_Fint *amode, MPI_Fint *info, MPI_Fint *fh,
                            MPI_Fint *ierr, size_t len) {
    char path[4096];
    if (!c_string(name, len, path, sizeof path)) {
        *ierr = fail("MPI_File_open", "the file name is longer than %zu characters", sizeof path - 1);
        return;
    }
    MPI_File c = MPI_FILE_NULL;
    *ierr = MPI_File_open(PMPI_Comm_f2c(*comm), path, *amode, PMPI_Info_f2c(*info), &c);
    *fh = MPI_File_c2f(c);
}
ALIASES(mpi_file_open, MPI_FILE_OPEN, (MPI_Fint *, const char *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                                       size_t))

static void f_mpi_file_close(MPI_Fint *fh, MPI_Fint *ierr) {
    MPI_File c = FH(fh);
    *ierr = MPI_File_close(&c);
    *fh = MPI_File_c2f(c);
}
ALIASES(mpi_file_close, MPI_FILE_CLOSE, (MPI_Fint *, MPI_Fint *))

static void f_mpi_file_delete(const char *name, MPI_Fint *info, MPI_Fint *ierr, size_t len) {
    char path[4096];
    *ierr = c_string(name, len, path, sizeof path)
                ? MPI_File_delete(path, PMPI_Info_f2c(*info))
                : fail("MPI_File_delete", "the file name is longer than %zu characters", sizeof path - 1);
}
ALIASES(mpi_file_delete, MPI_FILE_DELETE, (const char *, MPI_Fint *, MPI_Fint *, size_t))

#define F_OFFSET_IN(lower, UPPER, call) \
    static void f_##lower(MPI_Fint *fh, MPI_Offset *offset, MPI_Fint *ierr) { *ierr = call(FH(fh), *offset); } \
    ALIASES(lower, UPPER, (MPI_Fint *, MPI_Offset *, MPI_Fint *))
#define F_OFFSET_OUT(lower, UPPER, call) \
    static void f_##lower(MPI_Fint *fh, MPI_Offset *offset, MPI_Fint *ierr) { *ierr = call(FH(fh), offset); } \
    ALIASES(lower, UPPER, (MPI_Fint *, MPI_Offset *, MPI_Fint *))
F_OFFSET_IN(mpi_file_set_size, MPI_FILE_SET_SIZE, MPI_File_set_size)
F_OFFSET_IN(mpi_file_preallocate, MPI_FILE_PREALLOCATE, MPI_File_preallocate)
F_OFFSET_OUT(mpi_file_get_size, MPI_FILE_GET_SIZE, MPI_File_get_size)
F_OFFSET_OUT(mpi_file_get_position, MPI_FILE_GET_POSITION, MPI_File_get_position)
F_OFFSET_OUT(mpi_file_get_position_shared, MPI_FILE_GET_POSITION_SHARED, MPI_File_get_position_shared)

static void f_mpi_file_get_byte_offset(MPI_Fint *fh, MPI_Offset *offset, MPI_Offset *disp, MPI_Fint *ierr) {
    *ierr = MPI_File_get_byte_offset(FH(fh), *offset, disp);
}
ALIASES(mpi_file_get_byte_offset, MPI_FILE_GET_BYTE_OFFSET, (MPI_Fint *, MPI_Offset *, MPI_Offset *, MPI_Fint *))

static void f_mpi_file_seek(MPI_Fint *fh, MPI_Offset *offset, MPI_Fint *whence, MPI_Fint *ierr) {
    *ierr = MPI_File_seek(FH(fh), *offset, *whence);
}
ALIASES(mpi_file_seek, MPI_FILE_SEEK, (MPI_Fint *, MPI_Offset *, MPI_Fint *, MPI_Fint *))

static void f_mpi_file_seek_shared(MPI_Fint *fh, MPI_Offset *offset, MPI_Fint *whence, MPI_Fint *ierr) {
    *ierr = MPI_File_seek_shared(FH(fh), *offset, *whence);
}
ALIASES(mpi_file_seek_shared, MPI_FILE_SEEK_SHARED, (MPI_Fint *, MPI_Offset *, MPI_Fint *, MPI_Fint *))

static void f_mpi_file_get_group(MPI_Fint *fh, MPI_Fint *group, MPI_Fint *ierr) {
    MPI_Group g = MPI_GROUP_NULL;
    *ierr = MPI_File_get_group(FH(fh), &g);
    *group = PMPI_Group_c2f(g);
}
ALIASES(mpi_file_get_group, MPI_FILE_GET_GROUP, (MPI_Fint *, MPI_Fint *, MPI_Fint *))

static void f_mpi_file_get_amode(MPI_Fint *fh, MPI_Fint *amode, MPI_Fint *ierr) {
    int a = 0;
    *ierr = MPI_File_get_amode(FH(fh), &a);
    *amode = a;
}
ALIASES(mpi_file_get_amode, MPI_FILE_GET_AMODE, (MPI_Fint *, MPI_Fint *, MPI_Fint *))

static void f_mpi_file_set_info(MPI_Fint *fh, MPI_Fint *info, MPI_Fint *ierr) {
    *ierr = MPI_File_set_info(FH(fh), PMPI_Info_f2c(*info));
}
ALIASES(mpi_file_set_info, MPI_FILE_SET_INFO, (MPI_Fint *, MPI_Fint *, MPI_Fint *))

static void f_mpi_file_get_info(MPI_Fint *fh, MPI_Fint *info, MPI_Fint *ierr) {
    MPI_Info i = MPI_INFO_NULL;
    *ierr = MPI_File_get_info(FH(fh), &i);
    *info = PMPI_Info_c2f(i);
}
ALIASES(mpi_file_get_info, MPI_FILE_GET_INFO, (MPI_Fint *, MPI_Fint *, MPI_Fint *))

static void f_mpi_file_set_view(MPI_Fint *fh, MPI_Offset *disp, MPI_Fint *etype, MPI_Fint *filetype,
                                const char *datarep, MPI_Fint *info, MPI_Fint *ierr, size_t len) {
    char rep[256];
    *ierr = c_string(datarep, len, rep, sizeof rep)
                ? MPI_File_set_view(FH(fh), *disp, TYPE(etype), TYPE(filetype), rep, PMPI_Info_f2c(*info))
                : fail("MPI_File_set_view", "the data representation's name is too long");
}
ALIASES(mpi_file_set_view, MPI_FILE_SET_VIEW, (MPI_Fint *, MPI_Offset *, MPI_Fint *, MPI_Fint *, const char *,
                                               MPI_Fint *, MPI_Fint *, size_t))

static void f_mpi_file_get_view(MPI_Fint *fh, MPI_Offset *disp, MPI_Fint *etype, MPI_Fint *filetype,
                                char *datarep, MPI_Fint *ierr, size_t len) {
    MPI_Datatype e = MPI_DATATYPE_NULL, t = MPI_DATATYPE_NULL;
    char rep[MPI_MAX_DATAREP_STRING + 1] = "";
    *ierr = MPI_File_get_view(FH(fh), disp, &e, &t, rep);
    *etype = PMPI_Type_c2f(e);
    *filetype = PMPI_Type_c2f(t);
    size_t n = strlen(rep) < len ? strlen(rep) : len;
    memcpy(datarep, rep, n);
    memset(datarep + n, ' ', len - n);
}
ALIASES(mpi_file_get_view, MPI_FILE_GET_VIEW, (MPI_Fint *, MPI_Offset *, MPI_Fint *, MPI_Fint *, char *,
                                               MPI_Fint *, size_t))

static void f_mpi_file_get_type_extent(MPI_Fint *fh, MPI_Fint *datatype, MPI_Aint *extent, MPI_Fint *ierr) {
    *ierr = MPI_File_get_type_extent(FH(fh), TYPE(datatype), extent);
}
ALIASES(mpi_file_get_type_extent, MPI_FILE_GET_TYPE_EXTENT, (MPI_Fint *, MPI_Fint *, MPI_Aint *, MPI_Fint *))

static void f_mpi_file_set_atomicity(MPI_Fint *fh, MPI_Fint *flag, MPI_Fint *ierr) {
    *ierr = MPI_File_set_atomicity(FH(fh), *flag != 0);
}
ALIASES(mpi_file_set_atomicity, MPI_FILE_SET_ATOMICITY, (MPI_Fint *, MPI_Fint *, MPI_Fint *))

static void f_mpi_file_get_atomicity(MPI_Fint *fh, MPI_Fint *flag, MPI_Fint *ierr) {
    int f = 0;
    *ierr = MPI_File_get_atomicity(FH(fh), &f);
    *flag = f != 0; /* .TRUE. is 1 for gfortran */
}
ALIASES(mpi_file_get_atomicity, MPI_FILE_GET_ATOMICITY, (MPI_Fint *, MPI_Fint *, MPI_Fint *))

static void f_mpi_file_sync(MPI_Fint *fh, MPI_Fint *ierr) { *ierr = MPI_File_sync(FH(fh)); }
ALIASES(mpi_file_sync, MPI_FILE_SYNC, (MPI_Fint *, MPI_Fint *))

static void f_mpi_file_set_errhandler(MPI_Fint *fh, MPI_Fint *eh, MPI_Fint *ierr) {
    *ierr = MPI_File_set_errhandler(FH(fh), PMPI_Errhandler_f2c(*eh));
}
ALIASES(mpi_file_set_errhandler, MPI_FILE_SET_ERRHANDLER, (MPI_Fint *, MPI_Fint *, MPI_Fint *))

static void f_mpi_file_get_errhandler(MPI_Fint *fh, MPI_Fint *eh, MPI_Fint *ierr) {
    MPI_Errhandler e = MPI_ERRHANDLER_NULL;
    *ierr = MPI_File_get_errhandler(FH(fh), &e);
    *eh = PMPI_Errhandler_c2f(e);
}
ALIASES(mpi_file_get_errhandler, MPI_FILE_GET_ERRHANDLER, (MPI_Fint *, MPI_Fint *, MPI_Fint *))

static void f_mpi_file_call_errhandler(MPI_Fint *fh, MPI_Fint *code, MPI_Fint *ierr) {
    *ierr = MPI_File_call_errhandler(FH(fh), *code);
}
ALIASES(mpi_file_call_errhandler, MPI_FILE_CALL_ERRHANDLER, (MPI_Fint *, MPI_Fint *, MPI_Fint *))

/* ---- Reads and writes ---- */

#define F_AT(lower, UPPER, call, CONST) \
    static void f_##lower(MPI_Fint *fh, MPI_Offset *offset, CONST void *buf, MPI_Fint *count, MPI_Fint *type, \
                          MPI_Fint *status, MPI_Fint *ierr) { \
        MPI_Status st; \
        memset(&st, 0, sizeof st); \
        *ierr = call(FH(fh), *offset, buf, *count, TYPE(type), &st); \
        status_out(&st, status); \
    } \
    ALIASES(lower, UPPER, (MPI_Fint *, MPI_Offset *, CONST void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))
#define F_HERE(lower, UPPER, call, CONST) \
    static void f_##lower(MPI_Fint *fh, CONST void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *status, \
                          MPI_Fint *ierr) { \
        MPI_Status st; \
        memset(&st, 0, sizeof st); \
        *ierr = call(FH(fh), buf, *count, TYPE(type), &st); \
        status_out(&st, status); \
    } \
    ALIASES(lower, UPPER, (MPI_Fint *, CONST void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))
#define F_I_AT(lower, UPPER, call, CONST) \
    static void f_##lower(MPI_Fint *fh, MPI_Offset *offset, CONST void *buf, MPI_Fint *count, MPI_Fint *type, \
                          MPI_Fint *request, MPI_Fint *ierr) { \
        MPI_Request r = MPI_REQUEST_NULL; \
        *ierr = call(FH(fh), *offset, buf, *count, TYPE(type), &r); \
        *request = PMPI_Request_c2f(r); \
    } \
    ALIASES(lower, UPPER, (MPI_Fint *, MPI_Offset *, CONST void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))
#define F_I_HERE(lower, UPPER, call, CONST) \
    static void f_##lower(MPI_Fint *fh, CONST void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *request, \
                          MPI_Fint *ierr) { \
        MPI_Request r = MPI_REQUEST_NULL; \
        *ierr = call(FH(fh), buf, *count, TYPE(type), &r); \
        *request = PMPI_Request_c2f(r); \
    } \
    ALIASES(lower, UPPER, (MPI_Fint *, CONST void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))
#define F_BEGIN_AT(lower, UPPER, call, CONST) \
    static void f_##lower(MPI_Fint *fh, MPI_Offset *offset, CONST void *buf, MPI_Fint *count, MPI_Fint *type, \
                          MPI_Fint *ierr) { \
        *ierr = call(FH(fh), *offset, buf, *count, TYPE(type)); \
    } \
    ALIASES(lower, UPPER, (MPI_Fint *, MPI_Offset *, CONST void *, MPI_Fint *, MPI_Fint *, MPI_Fint *))
#define F_BEGIN_HERE(lower, UPPER, call, CONST) \
    static void f_##lower(MPI_Fint *fh, CONST void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *ierr) { \
        *ierr = call(FH(fh), buf, *count, TYPE(type)); \
    } \
    ALIASES(lower, UPPER, (MPI_Fint *, CONST void *, MPI_Fint *, MPI_Fint *, MPI_Fint *))
#define F_END(lower, UPPER, call, CONST) \
    static void f_##lower(MPI_Fint *fh, CONST void *buf, MPI_Fint *status, MPI_Fint *ierr) { \
        MPI_Status st; \
        memset(&st, 0, sizeof st); \
        *ierr = call(FH(fh), buf, &st); \
        status_out(&st, status); \
    } \
    ALIASES(lower, UPPER, (MPI_Fint *, CONST void *, MPI_Fint *, MPI_Fint *))

#define CONST_ const
#define MUTABLE_
F_AT(mpi_file_read_at, MPI_FILE_READ_AT, MPI_File_read_at, MUTABLE_)
F_AT(mpi_file_write_at, MPI_FILE_WRITE_AT, MPI_File_write_at, CONST_)
F_AT(mpi_file_read_at_all, MPI_FILE_READ_AT_ALL, MPI_File_read_at_all, MUTABLE_)
F_AT(mpi_file_write_at_all, MPI_FILE_WRITE_AT_ALL, MPI_File_write_at_all, CONST_)
F_HERE(mpi_file_read, MPI_FILE_READ, MPI_File_read, MUTABLE_)
F_HERE(mpi_file_write, MPI_FILE_WRITE, MPI_File_write, CONST_)
F_HERE(mpi_file_read_all, MPI_FILE_READ_ALL, MPI_File_read_all, MUTABLE_)
F_HERE(mpi_file_write_all, MPI_FILE_WRITE_ALL, MPI_File_write_all, CONST_)
F_HERE(mpi_file_read_shared, MPI_FILE_READ_SHARED, MPI_File_read_shared, MUTABLE_)
F_HERE(mpi_file_write_shared, MPI_FILE_WRITE_SHARED, MPI_File_write_shared, CONST_)
F_HERE(mpi_file_read_ordered, MPI_FILE_READ_ORDERED, MPI_File_read_ordered, MUTABLE_)
F_HERE(mpi_file_write_ordered, MPI_FILE_WRITE_ORDERED, MPI_File_write_ordered, CONST_)
F_I_AT(mpi_file_iread_at, MPI_FILE_IREAD_AT, MPI_File_iread_at, MUTABLE_)
F_I_AT(mpi_file_iwrite_at, MPI_FILE_IWRITE_AT, MPI_File_iwrite_at, CONST_)
F_I_AT(mpi_file_iread_at_all, MPI_FILE_IREAD_AT_ALL, MPI_File_iread_at_all, MUTABLE_)
F_I_AT(mpi_file_iwrite_at_all, MPI_FILE_IWRITE_AT_ALL, MPI_File_iwrite_at_all, CONST_)
F_I_HERE(mpi_file_iread, MPI_FILE_IREAD, MPI_File_iread, MUTABLE_)
F_I_HERE(mpi_file_iwrite, MPI_FILE_IWRITE, MPI_File_iwrite, CONST_)
F_I_HERE(mpi_file_iread_all, MPI_FILE_IREAD_ALL, MPI_File_iread_all, MUTABLE_)
F_I_HERE(mpi_file_iwrite_all, MPI_FILE_IWRITE_ALL, MPI_File_iwrite_all, CONST_)
F_I_HERE(mpi_file_iread_shared, MPI_FILE_IREAD_SHARED, MPI_File_iread_shared, MUTABLE_)
F_I_HERE(mpi_file_iwrite_shared, MPI_FILE_IWRITE_SHARED, MPI_File_iwrite_shared, CONST_)
F_BEGIN_AT(mpi_file_read_at_all_begin, MPI_FILE_READ_AT_ALL_BEGIN, MPI_File_read_at_all_begin, MUTABLE_)
F_BEGIN_AT(mpi_file_write_at_all_begin, MPI_FILE_WRITE_AT_ALL_BEGIN, MPI_File_write_at_all_begin, CONST_)
F_BEGIN_HERE(mpi_file_read_all_begin, MPI_FILE_READ_ALL_BEGIN, MPI_File_read_all_begin, MUTABLE_)
F_BEGIN_HERE(mpi_file_write_all_begin, MPI_FILE_WRITE_ALL_BEGIN, MPI_File_write_all_begin, CONST_)
F_BEGIN_HERE(mpi_file_read_ordered_begin, MPI_FILE_READ_ORDERED_BEGIN, MPI_File_read_ordered_begin, MUTABLE_)
F_BEGIN_HERE(mpi_file_write_ordered_begin, MPI_FILE_WRITE_ORDERED_BEGIN, MPI_File_write_ordered_begin, CONST_)
F_END(mpi_file_read_at_all_end, MPI_FILE_READ_AT_ALL_END, MPI_File_read_at_all_end, MUTABLE_)
F_END(mpi_file_write_at_all_end, MPI_FILE_WRITE_AT_ALL_END, MPI_File_write_at_all_end, CONST_)
F_END(mpi_file_read_all_end, MPI_FILE_READ_ALL_END, MPI_File_read_all_end, MUTABLE_)
F_END(mpi_file_write_all_end, MPI_FILE_WRITE_ALL_END, MPI_File_write_all_end, CONST_)
F_END(mpi_file_read_ordered_end, MPI_FILE_READ_ORDERED_END, MPI_File_read_ordered_end, MUTABLE_)
F_END(mpi_file_write_ordered_end, MPI_FILE_WRITE_ORDERED_END, MPI_File_write_ordered_end, CONST_)
