/* Makes one mistake with a Concerto file and checks that every rank gets
 * an error from it (and none hangs):
 *   errors FILE CASE
 * CASE: missing | bad-hint | unknown-hint | bad-view | datarep | mismatch | unserved |
 *       different-hints.
 * Each rank prints the error string it got; exits 0 when every rank got one. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int rank, procs;

static int report(int rc, const char *what) {
    if (rc == MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s: no error\n", rank, what);
        return 0;
    }
    char s[MPI_MAX_ERROR_STRING];
    int n;
    MPI_Error_string(rc, s, &n);
    printf("rank %d: %s: error: %s\n", rank, what, s);
    return 1;
}

static MPI_File open_file(const char *file) {
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) {
        report(rc, "MPI_File_open");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return fh;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &procs);
    const char *file = argv[1], *c = argv[2];
    int got = 0;
    char buf[4096] = {0};
    MPI_File fh;
    MPI_Status st;
    if (!strcmp(c, "missing")) {
        got = report(MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), c);
    } else if (!strcmp(c, "bad-hint") || !strcmp(c, "unknown-hint")) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, !strcmp(c, "bad-hint") ? "concerto_strategy" : "concerto_stratgy", "fastest");
        got = report(MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh), c);
        MPI_Info_free(&info);
    } else if (!strcmp(c, "bad-view") || !strcmp(c, "datarep")) {
        fh = open_file(file);
        MPI_Datatype t;
        int lens[2] = {4, 4};
        MPI_Aint disps[2] = {64, 0}; /* decreasing: MPI forbids it in a filetype */
        MPI_Type_create_hindexed(2, lens, disps, MPI_BYTE, &t);
        MPI_Type_commit(&t);
        if (!strcmp(c, "bad-view"))
            got = report(MPI_File_set_view(fh, 0, MPI_BYTE, t, "native", MPI_INFO_NULL), c);
        else
            got = report(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "external32", MPI_INFO_NULL), c);
        MPI_Type_free(&t);
        MPI_File_close(&fh);
    } else if (!strcmp(c, "mismatch")) {
        fh = open_file(file);
        if (rank == 0)
            got = report(MPI_File_write_at_all(fh, 0, buf, 16, MPI_BYTE, &st), c);
        else
            got = report(MPI_File_read_at_all(fh, 16 * rank, buf, 16, MPI_BYTE, &st), c);
        MPI_File_close(&fh);
    } else if (!strcmp(c, "different-hints")) {
        fh = open_file(file);
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "concerto_strategy", rank == 0 ? "two_phase" : "resonant");
        MPI_File_set_info(fh, info);
        MPI_Info_free(&info);
        got = report(MPI_File_write_at_all(fh, 16 * rank, buf, 16, MPI_BYTE, &st), c);
        MPI_File_close(&fh);
    } else if (!strcmp(c, "unserved")) {
        fh = open_file(file);
        got = report(MPI_File_set_atomicity(fh, 1), c);
        MPI_File_close(&fh);
    } else {
        if (rank == 0) fprintf(stderr, "unknown case %s\n", c);
    }
    int all;
    MPI_Allreduce(&got, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Finalize();
    return all ? 0 : 1;
}
