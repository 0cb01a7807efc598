/* The resonance paper's access patterns as an MPI program, timed:
 *   collbench FILE PATTERN PARAM CALLS OP [STRATEGY [HINT=VALUE ...]]
 * PATTERN demo: in each collective call process i of P asks for segments
 *   k*P + i, k = 0..3, of the call's range (PARAM = segment bytes);
 * PATTERN noncontig: a vector over P columns of PARAM 4-byte elements, a
 *   call covering 4 MiB of the file.
 * The same patterns as concerto-core's client::collective::patterns, so the
 * simulator can be given the same accesses. Hints after the strategy are
 * set too (e.g. cb_nodes=1). OP is write, read (which
 * first writes the file, untimed) or read-existing (a file written before). STRATEGY, when given, is passed as the
 * concerto_strategy hint (without it, ROMIO decides, with collective
 * buffering enabled). Prints "MBps <rate>" from rank 0: the bytes of all
 * ranks over the time from a barrier before the first call to a barrier
 * after the last. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONCONTIG_CALL (4LL << 20)

static int rank, procs;

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int n;
        MPI_Error_string(rc, s, &n);
        fprintf(stderr, "rank %d: %s: %s\n", rank, what, s);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* The filetype of one call, tiled call after call; this rank's bytes per call. */
static long long view(const char *pattern, long long param, MPI_Datatype *t, MPI_Offset *disp) {
    MPI_Datatype v;
    long long piece, count, stride, call;
    if (!strcmp(pattern, "demo")) {
        piece = param, count = 4, stride = procs * param, call = 4LL * procs * param;
    } else if (!strcmp(pattern, "noncontig")) {
        piece = 4 * param, stride = piece * procs;
        count = NONCONTIG_CALL / stride > 0 ? NONCONTIG_CALL / stride : 1;
        call = count * stride;
    } else {
        if (rank == 0) fprintf(stderr, "unknown pattern %s\n", pattern);
        MPI_Abort(MPI_COMM_WORLD, 2);
        return 0;
    }
    MPI_Type_vector((int)count, (int)piece, (int)stride, MPI_BYTE, &v);
    MPI_Type_create_resized(v, 0, call, t);
    MPI_Type_commit(t);
    MPI_Type_free(&v);
    *disp = (MPI_Offset)rank * piece;
    return count * piece;
}

static char **hints;
static int nhints;

static double run(const char *file, const char *pattern, long long param, int calls, int write,
                   const char *strategy) {
    MPI_Info info;
    MPI_Info_create(&info);
    if (strategy) {
        MPI_Info_set(info, "concerto_strategy", strategy);
        for (int i = 0; i < nhints; i++) {
            char key[256];
            const char *eq = strchr(hints[i], '=');
            if (!eq || eq - hints[i] >= (long)sizeof key) continue;
            memcpy(key, hints[i], eq - hints[i]);
            key[eq - hints[i]] = 0;
            MPI_Info_set(info, key, eq + 1);
        }
    } else {
        MPI_Info_set(info, "romio_cb_read", "enable");
        MPI_Info_set(info, "romio_cb_write", "enable");
    }
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, file, write ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY,
                        info, &fh), "MPI_File_open");
    MPI_Info_free(&info);
    MPI_Datatype t;
    MPI_Offset disp = 0;
    long long each = view(pattern, param, &t, &disp);
    check(MPI_File_set_view(fh, disp, MPI_BYTE, t, "native", MPI_INFO_NULL), "MPI_File_set_view");
    char *buf = malloc(each);
    memset(buf, rank + 1, each);
    MPI_Status st;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int c = 0; c < calls; c++) {
        if (write) check(MPI_File_write_all(fh, buf, (int)each, MPI_BYTE, &st), "MPI_File_write_all");
        else check(MPI_File_read_all(fh, buf, (int)each, MPI_BYTE, &st), "MPI_File_read_all");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double elapsed = MPI_Wtime() - t0;
    check(MPI_File_close(&fh), "MPI_File_close");
    MPI_Type_free(&t);
    free(buf);
    return (double)each * procs * calls / elapsed / 1e6;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &procs);
    if (argc < 6) {
        if (rank == 0) fprintf(stderr, "usage: collbench FILE PATTERN PARAM CALLS OP [STRATEGY]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *file = argv[1], *pattern = argv[2], *strategy = argc > 6 ? argv[6] : NULL;
    long long param = atoll(argv[3]);
    hints = argv + 7;
    nhints = argc > 7 ? argc - 7 : 0;
    int calls = atoi(argv[4]), write = !strcmp(argv[5], "write");
    if (!strcmp(argv[5], "read")) run(file, pattern, param, calls, 1, strategy);
    double rate = run(file, pattern, param, calls, write, strategy);
    if (rank == 0) printf("MBps %.3f\n", rate);
    MPI_Finalize();
    return 0;
}
