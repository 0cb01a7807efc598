/* IOR's MPI-IO pattern (-a MPIIO), without IOR (not packaged): one shared
 * file, each rank `segments` blocks of `block` bytes in `transfer`-byte
 * calls at IOR's offsets ((segment * ranks + rank) * block), written then
 * read back and checked, each phase timed as IOR times it (from a barrier
 * before the open to the last rank's close; the write phase syncs before
 * closing, as IOR's -e).
 *   iorlike FILE TRANSFER BLOCK SEGMENTS independent|collective
 * Prints "write MIB_S read MIB_S" on rank 0; exits non-zero on a wrong
 * byte or an MPI error. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, procs;

static void check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return;
    char s[MPI_MAX_ERROR_STRING];
    int n;
    MPI_Error_string(rc, s, &n);
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, s);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static double phase(const char *file, long long t, long long b, int segments, int collective, int write,
                    unsigned char *buf) {
    MPI_File fh;
    MPI_Status st;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    check(MPI_File_open(MPI_COMM_WORLD, file, write ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY,
                        MPI_INFO_NULL, &fh), "MPI_File_open");
    for (int s = 0; s < segments; s++)
        for (long long k = 0; k < b / t; k++) {
            MPI_Offset at = ((long long)s * procs + rank) * b + k * t;
            if (write) {
                memset(buf, (int)((at / t + 1) % 251), t);
                check(collective ? MPI_File_write_at_all(fh, at, buf, (int)t, MPI_BYTE, &st)
                                 : MPI_File_write_at(fh, at, buf, (int)t, MPI_BYTE, &st), "write");
            } else {
                check(collective ? MPI_File_read_at_all(fh, at, buf, (int)t, MPI_BYTE, &st)
                                 : MPI_File_read_at(fh, at, buf, (int)t, MPI_BYTE, &st), "read");
                for (long long i = 0; i < t; i++)
                    if (buf[i] != (unsigned char)((at / t + 1) % 251)) {
                        fprintf(stderr, "rank %d: byte %lld is wrong\n", rank, (long long)(at + i));
                        MPI_Abort(MPI_COMM_WORLD, 3);
                    }
            }
        }
    if (write) check(MPI_File_sync(fh), "MPI_File_sync");
    check(MPI_File_close(&fh), "MPI_File_close");
    double mine = MPI_Wtime() - start, slowest;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return (double)procs * segments * b / slowest / (1 << 20);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &procs);
    if (argc != 6) {
        if (rank == 0) fprintf(stderr, "usage: iorlike FILE TRANSFER BLOCK SEGMENTS independent|collective\n");
        MPI_Finalize();
        return 2;
    }
    long long t = atoll(argv[2]), b = atoll(argv[3]);
    int segments = atoi(argv[4]), collective = !strcmp(argv[5], "collective");
    unsigned char *buf = malloc(t);
    double w = phase(argv[1], t, b, segments, collective, 1, buf);
    double r = phase(argv[1], t, b, segments, collective, 0, buf);
    if (rank == 0) printf("write %.1f read %.1f\n", w, r);
    free(buf);
    MPI_Finalize();
    return 0;
}
