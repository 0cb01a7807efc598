/* Calls beyond the classic blocking ones, on a Concerto file, each checked
 * against what it must give:
 *   calls FILE CASE
 * CASE: large-count   every MPI-4 `_c` read and write (MPI_Count counts, as
 *                     IOR built against MPICH 4 calls them), written and
 *                     read back byte-exact (MPI 4 libraries only);
 *       handles       MPI_File_f2c(MPI_File_c2f(fh)) == fh, and the Fortran
 *                     handle is no other open file's.
 * Prints "ok CASE" on rank 0 when every rank passed; exits non-zero else. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 4096 /* bytes per rank per call */

static int rank, procs, bad;

static void check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return;
    char s[MPI_MAX_ERROR_STRING];
    int n;
    MPI_Error_string(rc, s, &n);
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, s);
    bad = 1;
}

static unsigned char value(long long k) { return (unsigned char)((k * 131 + 7) % 251); }

static inline void expect(const unsigned char *got, long long at, const char *what) {
    for (int i = 0; i < N; i++)
        if (got[i] != value(at + i)) {
            fprintf(stderr, "rank %d: %s: byte %lld is %d, not %d\n", rank, what, at + i, got[i], value(at + i));
            bad = 1;
            return;
        }
}

static inline void fill(unsigned char *buf, long long at) {
    for (int i = 0; i < N; i++) buf[i] = value(at + i);
}

#if MPI_VERSION >= 4
static void large_count(MPI_File fh) {
    unsigned char buf[N], got[N];
    MPI_Status st;
    MPI_Count moved;
    /* Four regions of procs * N bytes, one per kind of call. */
    long long region = (long long)procs * N, mine = (long long)rank * N;
    fill(buf, mine);
    check(MPI_File_write_at_c(fh, mine, buf, N, MPI_BYTE, &st), "MPI_File_write_at_c");
    MPI_Get_elements_x(&st, MPI_BYTE, &moved);
    if (moved != N) fprintf(stderr, "rank %d: write_at_c moved %lld\n", rank, (long long)moved), bad = 1;
    fill(buf, region + mine);
    check(MPI_File_write_at_all_c(fh, region + mine, buf, N, MPI_BYTE, &st), "MPI_File_write_at_all_c");
    check(MPI_File_seek(fh, 2 * region + mine, MPI_SEEK_SET), "MPI_File_seek");
    fill(buf, 2 * region + mine);
    check(MPI_File_write_c(fh, buf, N, MPI_BYTE, &st), "MPI_File_write_c");
    check(MPI_File_seek(fh, 3 * region + mine, MPI_SEEK_SET), "MPI_File_seek");
    fill(buf, 3 * region + mine);
    check(MPI_File_write_all_c(fh, buf, N, MPI_BYTE, &st), "MPI_File_write_all_c");
    check(MPI_File_sync(fh), "MPI_File_sync");
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_sync(fh), "MPI_File_sync");
    /* Each read reads another rank's bytes, so nothing is read from a cache of its own. */
    long long theirs = (long long)((rank + 1) % procs) * N;
    check(MPI_File_read_at_c(fh, theirs, got, N, MPI_BYTE, &st), "MPI_File_read_at_c");
    MPI_Get_elements_x(&st, MPI_BYTE, &moved);
    if (moved != N) fprintf(stderr, "rank %d: read_at_c moved %lld\n", rank, (long long)moved), bad = 1;
    expect(got, theirs, "MPI_File_read_at_c");
    check(MPI_File_read_at_all_c(fh, region + theirs, got, N, MPI_BYTE, &st), "MPI_File_read_at_all_c");
    expect(got, region + theirs, "MPI_File_read_at_all_c");
    check(MPI_File_seek(fh, 2 * region + theirs, MPI_SEEK_SET), "MPI_File_seek");
    check(MPI_File_read_c(fh, got, N, MPI_BYTE, &st), "MPI_File_read_c");
    expect(got, 2 * region + theirs, "MPI_File_read_c");
    check(MPI_File_seek(fh, 3 * region + theirs, MPI_SEEK_SET), "MPI_File_seek");
    check(MPI_File_read_all_c(fh, got, N, MPI_BYTE, &st), "MPI_File_read_all_c");
    expect(got, 3 * region + theirs, "MPI_File_read_all_c");
    MPI_Count extent;
    check(MPI_File_get_type_extent_c(fh, MPI_DOUBLE, &extent), "MPI_File_get_type_extent_c");
    if (extent != sizeof(double)) fprintf(stderr, "rank %d: extent %lld\n", rank, (long long)extent), bad = 1;
}
#endif

static void handles(MPI_File fh) {
    MPI_Fint f = MPI_File_c2f(fh);
    if (MPI_File_f2c(f) != fh) fprintf(stderr, "rank %d: f2c(c2f(fh)) is not fh\n", rank), bad = 1;
    /* A second file (the MPI library's own, under /tmp) has another Fortran handle. */
    char other[256];
    snprintf(other, sizeof other, "/tmp/concerto-calls-%d.bin", (int)getpid());
    MPI_File plain;
    check(MPI_File_open(MPI_COMM_SELF, other, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                        MPI_INFO_NULL, &plain), "MPI_File_open (a plain file)");
    MPI_Fint g = MPI_File_c2f(plain);
    if (g == f) fprintf(stderr, "rank %d: two files share Fortran handle %d\n", rank, (int)f), bad = 1;
    if (MPI_File_f2c(g) != plain) fprintf(stderr, "rank %d: the plain file's f2c(c2f)\n", rank), bad = 1;
    MPI_File_close(&plain);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &procs);
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: calls FILE large-count|handles\n");
        MPI_Finalize();
        return 2;
    }
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh),
          "MPI_File_open");
    if (!bad && !strcmp(argv[2], "large-count")) {
#if MPI_VERSION >= 4
        large_count(fh);
#else
        fprintf(stderr, "rank %d: this MPI library is MPI %d.%d: no large-count calls\n", rank, MPI_VERSION,
                MPI_SUBVERSION);
        bad = 1;
#endif
    } else if (!bad && !strcmp(argv[2], "handles")) {
        handles(fh);
    } else if (!bad) {
        fprintf(stderr, "unknown case %s\n", argv[2]);
        bad = 1;
    }
    if (!bad) check(MPI_File_close(&fh), "MPI_File_close");
    int any;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any) printf("ok %s\n", argv[2]);
    MPI_Finalize();
    return any;
}
