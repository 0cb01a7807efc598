/* Parallel HDF5 through MPI-IO: writes a contiguous and a chunked dataset
 * collectively, each rank its own rows, then reads back the rows of the
 * next rank collectively and checks every value.
 *   hdf5 FILE [ROWS_PER_RANK] */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define COLS 1024

static double value(hsize_t r, hsize_t c) { return (double)r * 10000.0 + (double)c; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, procs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &procs);
    const char *name = argv[1];
    hsize_t rows = argc > 2 ? (hsize_t)atoi(argv[2]) : 64;
    hsize_t dims[2] = {rows * procs, COLS}, count[2] = {rows, COLS}, chunk[2] = {rows / 2 ? rows / 2 : 1, COLS / 2};
    double *data = malloc(sizeof(double) * rows * COLS), *back = malloc(sizeof(double) * rows * COLS);
    const char *sets[2] = {"contiguous", "chunked"};

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    hid_t file = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0) { fprintf(stderr, "rank %d: H5Fcreate %s failed\n", rank, name); MPI_Abort(MPI_COMM_WORLD, 2); }
    hid_t space = H5Screate_simple(2, dims, NULL), mem = H5Screate_simple(2, count, NULL);
    for (int s = 0; s < 2; s++) {
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        if (s == 1) H5Pset_chunk(dcpl, 2, chunk);
        hid_t set = H5Dcreate2(file, sets[s], H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        hsize_t start[2] = {rows * rank, 0};
        for (hsize_t r = 0; r < rows; r++)
            for (hsize_t c = 0; c < COLS; c++) data[r * COLS + c] = value(start[0] + r, c) + s;
        hid_t fs = H5Dget_space(set);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
        if (H5Dwrite(set, H5T_NATIVE_DOUBLE, mem, fs, dxpl, data) < 0) {
            fprintf(stderr, "rank %d: H5Dwrite %s failed\n", rank, sets[s]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        H5Sclose(fs);
        H5Dclose(set);
        H5Pclose(dcpl);
    }
    H5Fclose(file);

    long bad = 0;
    file = H5Fopen(name, H5F_ACC_RDONLY, fapl);
    if (file < 0) { fprintf(stderr, "rank %d: H5Fopen %s failed\n", rank, name); MPI_Abort(MPI_COMM_WORLD, 2); }
    for (int s = 0; s < 2; s++) {
        hid_t set = H5Dopen2(file, sets[s], H5P_DEFAULT);
        hid_t fs = H5Dget_space(set);
        hsize_t start[2] = {rows * ((rank + 1) % procs), 0};
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
        if (H5Dread(set, H5T_NATIVE_DOUBLE, mem, fs, dxpl, back) < 0) {
            fprintf(stderr, "rank %d: H5Dread %s failed\n", rank, sets[s]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        for (hsize_t r = 0; r < rows; r++)
            for (hsize_t c = 0; c < COLS; c++)
                if (back[r * COLS + c] != value(start[0] + r, c) + s && bad++ == 0)
                    fprintf(stderr, "rank %d: %s[%llu][%llu] = %g, not %g\n", rank, sets[s],
                            (unsigned long long)(start[0] + r), (unsigned long long)c,
                            back[r * COLS + c], value(start[0] + r, c) + s);
        H5Sclose(fs);
        H5Dclose(set);
    }
    H5Fclose(file);
    H5Sclose(space);
    H5Sclose(mem);
    H5Pclose(fapl);
    H5Pclose(dxpl);
    long all;
    MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && !all) printf("ok hdf5 %d ranks, %llu rows\n", procs, (unsigned long long)dims[0]);
    free(data);
    free(back);
    MPI_Finalize();
    return all ? 1 : 0;
}
