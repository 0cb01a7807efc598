/* Calls beyond the classic blocking ones, on a Concerto file, each checked
 * against what it must give:
 *   calls FILE CASE
 * CASE: large-count   every MPI-4 `_c` read and write (MPI_Count counts, as
 *                     IOR built against MPICH 4 calls them), written and
 *                     read back byte-exact (MPI 4 libraries only);
 *       handles       MPI_File_f2c(MPI_File_c2f(fh)) == fh, and the Fortran
 *                     handle is no other open file's;
 *       nonblocking   every nonblocking read and write (iread_at, iwrite,
 *                     iwrite_at_all, iread_all, ...) and split collective,
 *                     completed by MPI_Wait/Waitall/Test;
 *       shared        the shared file pointer: write_shared, iwrite_shared,
 *                     read_shared, write_ordered (and its begin/end),
 *                     read_ordered, seek_shared, get_position_shared.
 * nonblocking and shared run on FILE and then on a plain file the MPI
 * library serves itself (under /tmp), and the two files must hold the same
 * bytes (write_shared's blocks in any order, as the ranks raced).
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

static void expect(const unsigned char *got, long long at, const char *what) {
    for (int i = 0; i < N; i++)
        if (got[i] != value(at + i)) {
            fprintf(stderr, "rank %d: %s: byte %lld is %d, not %d\n", rank, what, at + i, got[i], value(at + i));
            bad = 1;
            return;
        }
}

static void fill(unsigned char *buf, long long at) {
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

static void wait_all(int n, MPI_Request *reqs, const char *what) {
    MPI_Status st[8];
    check(MPI_Waitall(n, reqs, st), what);
    for (int i = 0; i < n; i++) {
        int moved;
        MPI_Get_count(&st[i], MPI_BYTE, &moved);
        if (moved != N) fprintf(stderr, "rank %d: %s: request %d moved %d\n", rank, what, i, moved), bad = 1;
    }
}

/* Region k of the file: procs * N bytes, rank r's part at k * region + r * N. */
static void nonblocking(MPI_File fh) {
    unsigned char buf[4][N], got[4][N];
    long long region = (long long)procs * N, mine = (long long)rank * N;
    long long theirs = (long long)((rank + 1) % procs) * N;
    MPI_Request reqs[4];
    for (int k = 0; k < 4; k++) fill(buf[k], k * region + mine);
    check(MPI_File_iwrite_at(fh, mine, buf[0], N, MPI_BYTE, &reqs[0]), "MPI_File_iwrite_at");
    check(MPI_File_iwrite_at_all(fh, region + mine, buf[1], N, MPI_BYTE, &reqs[1]), "MPI_File_iwrite_at_all");
    wait_all(2, reqs, "MPI_Waitall (writes at offsets)");
    check(MPI_File_seek(fh, 2 * region + mine, MPI_SEEK_SET), "MPI_File_seek");
    check(MPI_File_iwrite(fh, buf[2], N, MPI_BYTE, &reqs[0]), "MPI_File_iwrite");
    MPI_Status st;
    int done = 0;
    while (!done) check(MPI_Test(&reqs[0], &done, &st), "MPI_Test");
    check(MPI_File_seek(fh, 3 * region + mine, MPI_SEEK_SET), "MPI_File_seek");
    check(MPI_File_iwrite_all(fh, buf[3], N, MPI_BYTE, &reqs[0]), "MPI_File_iwrite_all");
    check(MPI_Wait(&reqs[0], &st), "MPI_Wait");
    /* Split collectives: region 4. */
    unsigned char split[N];
    fill(split, 4 * region + mine);
    check(MPI_File_write_at_all_begin(fh, 4 * region + mine, split, N, MPI_BYTE), "MPI_File_write_at_all_begin");
    check(MPI_File_write_at_all_end(fh, split, &st), "MPI_File_write_at_all_end");
    int moved;
    MPI_Get_count(&st, MPI_BYTE, &moved);
    if (moved != N) fprintf(stderr, "rank %d: write_at_all_end moved %d\n", rank, moved), bad = 1;
    check(MPI_File_sync(fh), "MPI_File_sync");
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_sync(fh), "MPI_File_sync");
    check(MPI_File_iread_at(fh, theirs, got[0], N, MPI_BYTE, &reqs[0]), "MPI_File_iread_at");
    check(MPI_File_iread_at_all(fh, region + theirs, got[1], N, MPI_BYTE, &reqs[1]), "MPI_File_iread_at_all");
    wait_all(2, reqs, "MPI_Waitall (reads at offsets)");
    check(MPI_File_seek(fh, 2 * region + theirs, MPI_SEEK_SET), "MPI_File_seek");
    check(MPI_File_iread(fh, got[2], N, MPI_BYTE, &reqs[0]), "MPI_File_iread");
    wait_all(1, reqs, "MPI_Waitall (iread)");
    check(MPI_File_seek(fh, 3 * region + theirs, MPI_SEEK_SET), "MPI_File_seek");
    check(MPI_File_iread_all(fh, got[3], N, MPI_BYTE, &reqs[0]), "MPI_File_iread_all");
    wait_all(1, reqs, "MPI_Waitall (iread_all)");
    for (int k = 0; k < 4; k++) expect(got[k], k * region + theirs, "a nonblocking read");
    check(MPI_File_seek(fh, 4 * region + theirs, MPI_SEEK_SET), "MPI_File_seek");
    check(MPI_File_read_all_begin(fh, split, N, MPI_BYTE), "MPI_File_read_all_begin");
    check(MPI_File_read_all_end(fh, split, &st), "MPI_File_read_all_end");
    expect(split, 4 * region + theirs, "MPI_File_read_all_end");
}

/* Collective (a barrier either side, so that no rank moves the pointer meanwhile). */
static void same_position(MPI_File fh, MPI_Offset want, const char *what) {
    MPI_Offset at;
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_get_position_shared(fh, &at), "MPI_File_get_position_shared");
    if (at != want) fprintf(stderr, "rank %d: %s: shared pointer at %lld, not %lld\n", rank, what,
                            (long long)at, (long long)want), bad = 1;
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Region 0: every rank's write_shared and iwrite_shared block, in the
 * order the ranks raced (each block one rank's, value(block's rank)).
 * Region 1 on, from seek_shared: write_ordered, its begin/end, in rank order. */
static void shared(MPI_File fh) {
    unsigned char buf[N], got[N];
    long long region = 2LL * procs * N;
    MPI_Status st;
    memset(buf, rank + 1, N);
    check(MPI_File_write_shared(fh, buf, N, MPI_BYTE, &st), "MPI_File_write_shared");
    MPI_Request req;
    check(MPI_File_iwrite_shared(fh, buf, N, MPI_BYTE, &req), "MPI_File_iwrite_shared");
    check(MPI_Wait(&req, &st), "MPI_Wait");
    same_position(fh, region, "after write_shared");
    check(MPI_File_seek_shared(fh, region, MPI_SEEK_SET), "MPI_File_seek_shared");
    fill(buf, region + (long long)rank * N);
    check(MPI_File_write_ordered(fh, buf, N, MPI_BYTE, &st), "MPI_File_write_ordered");
    same_position(fh, region + (long long)procs * N, "after write_ordered");
    fill(buf, region + (long long)(procs + rank) * N);
    check(MPI_File_write_ordered_begin(fh, buf, N, MPI_BYTE), "MPI_File_write_ordered_begin");
    check(MPI_File_write_ordered_end(fh, buf, &st), "MPI_File_write_ordered_end");
    check(MPI_File_sync(fh), "MPI_File_sync");
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_sync(fh), "MPI_File_sync");
    check(MPI_File_seek_shared(fh, region, MPI_SEEK_SET), "MPI_File_seek_shared");
    check(MPI_File_read_ordered(fh, got, N, MPI_BYTE, &st), "MPI_File_read_ordered");
    expect(got, region + (long long)rank * N, "MPI_File_read_ordered");
    /* From the end: MPI_SEEK_END then back over the last ordered write. */
    check(MPI_File_seek_shared(fh, -(MPI_Offset)procs * N, MPI_SEEK_END), "MPI_File_seek_shared (end)");
    same_position(fh, region + (long long)procs * N, "after seek_shared from the end");
    MPI_Barrier(MPI_COMM_WORLD);
    /* read_shared: each rank one block of region 0, any block; it is one
     * rank's, whole. */
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "MPI_File_seek_shared");
    check(MPI_File_read_shared(fh, got, N, MPI_BYTE, &st), "MPI_File_read_shared");
    for (int i = 1; i < N; i++)
        if (got[i] != got[0] || got[0] < 1 || got[0] > procs) {
            fprintf(stderr, "rank %d: read_shared got a block that is no rank's (byte %d is %d)\n", rank, i,
                    got[i]);
            bad = 1;
            break;
        }
}

/* The file's first `len` bytes, on every rank. */
static unsigned char *contents(MPI_File fh, long long len) {
    unsigned char *all = calloc(1, len);
    MPI_Status st;
    check(MPI_File_read_at(fh, 0, all, (int)len, MPI_BYTE, &st), "MPI_File_read_at (contents)");
    return all;
}

static int by_block(const void *a, const void *b) { return memcmp(a, b, N); }

/* Runs `run` on FILE and on a plain file of the MPI library's own, then
 * compares what they hold: the first `sorted_blocks` blocks of N as
 * sets (ranks raced for them), the rest byte for byte. */
static void against_plain(MPI_File fh, void (*run)(MPI_File), long long len, int sorted_blocks) {
    char plain[256];
    int id = (int)getpid();
    MPI_Bcast(&id, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(plain, sizeof plain, "/tmp/concerto-calls-%d.bin", id);
    MPI_File other;
    check(MPI_File_open(MPI_COMM_WORLD, plain, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                        MPI_INFO_NULL, &other), "MPI_File_open (the plain file)");
    run(fh);
    run(other);
    MPI_Barrier(MPI_COMM_WORLD);
    unsigned char *ours = contents(fh, len), *theirs = contents(other, len);
    qsort(ours, sorted_blocks, N, by_block);
    qsort(theirs, sorted_blocks, N, by_block);
    for (long long i = 0; i < len; i++)
        if (ours[i] != theirs[i]) {
            fprintf(stderr, "rank %d: byte %lld is %d on Concerto, %d on the plain file\n", rank, i, ours[i],
                    theirs[i]);
            bad = 1;
            break;
        }
    free(ours);
    free(theirs);
    MPI_File_close(&other);
}

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

static void size_is(MPI_File fh, MPI_Offset want, const char *after) {
    MPI_Offset size;
    check(MPI_File_get_size(fh, &size), "MPI_File_get_size");
    if (size != want)
        fprintf(stderr, "rank %d: size %lld after %s, not %lld\n", rank, (long long)size, after, (long long)want),
            bad = 1;
}

/* Sizes with writes held behind: after a collective write every rank's
 * size is the call's end, at once; a cut lands after every rank's held
 * writes, so none grows the file back past it. */
static void sizes(MPI_File fh) {
    unsigned char buf[N];
    MPI_Status st;
    fill(buf, (long long)rank * N);
    check(MPI_File_write_at_all(fh, (MPI_Offset)rank * N, buf, N, MPI_BYTE, &st), "MPI_File_write_at_all");
    size_is(fh, (MPI_Offset)procs * N, "a collective write");
    fill(buf, (long long)(procs + rank) * N);
    check(MPI_File_write_at(fh, (MPI_Offset)(procs + rank) * N, buf, N, MPI_BYTE, &st), "MPI_File_write_at");
    check(MPI_File_set_size(fh, N), "MPI_File_set_size");
    size_is(fh, N, "a cut");
    check(MPI_File_sync(fh), "MPI_File_sync");
    MPI_Barrier(MPI_COMM_WORLD);
    size_is(fh, N, "a cut, a sync and a barrier");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &procs);
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: calls FILE large-count|handles|nonblocking|shared|sizes\n");
        MPI_Finalize();
        return 2;
    }
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh),
          "MPI_File_open");
    int opened = !bad;
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
    } else if (!bad && !strcmp(argv[2], "nonblocking")) {
        against_plain(fh, nonblocking, 5LL * procs * N, 0);
    } else if (!bad && !strcmp(argv[2], "sizes")) {
        sizes(fh);
    } else if (!bad && !strcmp(argv[2], "shared")) {
        against_plain(fh, shared, 4LL * procs * N, 2 * procs);
    } else if (!bad) {
        fprintf(stderr, "unknown case %s\n", argv[2]);
        bad = 1;
    }
    /* Collective: every rank that opened closes, whatever failed since. */
    if (opened) check(MPI_File_close(&fh), "MPI_File_close");
    int any;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any) printf("ok %s\n", argv[2]);
    MPI_Finalize();
    return any;
}
