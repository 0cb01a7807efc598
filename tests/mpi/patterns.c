/* Writes a file collectively in one access pattern with one strategy,
 * reads it back collectively with another, and checks every byte.
 *   patterns FILE PATTERN WRITE_STRATEGY READ_STRATEGY [BLOCK]
 * PATTERN: contiguous | vector | subarray | darray | noncontig. Byte k of the
 * file is value(k) whoever wrote it, so any reader can check any byte.
 * Exits 0 when every byte read is right; prints what was wrong if not. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char value(long long k) { return (unsigned char)((k * 131 + 7) % 251); }

static int rank, procs;

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int n;
        MPI_Error_string(rc, s, &n);
        fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, s);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* The view and memory layout of a pattern: this rank's file offsets of
 * its data stream, and the datatypes. */
typedef struct {
    MPI_Offset disp;
    MPI_Datatype filetype, memtype;
    int count;         /* elements of memtype */
    long long bytes;   /* data bytes of this rank */
    long long memsize; /* bytes of the memory buffer */
    long long *offsets; /* file offset of each data byte, in stream order */
} layout;

/* Each rank a tile of side x side ints of a global array over a grid of
 * the ranks (as MPI_Dims_create makes it), the filetype a subarray or the
 * same tiles as a block-distributed array. */
static void tile(layout *l, long long block, int darray) {
    int dims[2] = {0, 0};
    MPI_Dims_create(procs, 2, dims);
    int side = 8;
    while ((long long)(2 * side) * (2 * side) * 4 <= block) side *= 2;
    int gsizes[2] = {dims[0] * side, dims[1] * side}, sub[2] = {side, side};
    int starts[2] = {(rank / dims[1]) * side, (rank % dims[1]) * side};
    if (darray) {
        int distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK};
        int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG};
        MPI_Type_create_darray(procs, rank, 2, gsizes, distribs, dargs, dims, MPI_ORDER_C, MPI_INT, &l->filetype);
    } else {
        MPI_Type_create_subarray(2, gsizes, sub, starts, MPI_ORDER_C, MPI_INT, &l->filetype);
    }
    MPI_Type_commit(&l->filetype);
    l->memtype = MPI_INT;
    l->count = side * side;
    l->bytes = l->memsize = 4LL * side * side;
    l->offsets = malloc(sizeof(long long) * l->bytes);
    for (long long i = 0; i < l->bytes; i++) {
        long long e = i / 4, r = starts[0] + e / side, c = starts[1] + e % side;
        l->offsets[i] = (r * gsizes[1] + c) * 4 + i % 4;
    }
}

static void pattern(const char *name, long long block, layout *l) {
    memset(l, 0, sizeof *l);
    l->filetype = l->memtype = MPI_BYTE;
    if (!strcmp(name, "contiguous")) {
        l->disp = rank * block;
        l->count = (int)block;
        l->bytes = l->memsize = block;
        l->offsets = malloc(sizeof(long long) * block);
        for (long long i = 0; i < block; i++) l->offsets[i] = l->disp + i;
    } else if (!strcmp(name, "vector") || !strcmp(name, "noncontig")) {
        /* 16 pieces of block/16 bytes, interleaved between the ranks */
        int pieces = 16, piece = (int)(block / pieces);
        MPI_Type_vector(pieces, piece, piece * procs, MPI_BYTE, &l->filetype);
        MPI_Type_commit(&l->filetype);
        l->disp = (MPI_Offset)rank * piece;
        l->bytes = (long long)pieces * piece;
        l->offsets = malloc(sizeof(long long) * l->bytes);
        for (long long i = 0; i < l->bytes; i++)
            l->offsets[i] = l->disp + (i / piece) * piece * procs + i % piece;
        if (!strcmp(name, "noncontig")) {
            /* memory noncontiguous too: every other piece of a buffer twice as long */
            MPI_Type_vector(pieces, piece, 2 * piece, MPI_BYTE, &l->memtype);
            MPI_Type_commit(&l->memtype);
            l->count = 1;
            l->memsize = 2LL * pieces * piece;
        } else {
            l->count = (int)l->bytes;
            l->memsize = l->bytes;
        }
    } else if (!strcmp(name, "subarray") || !strcmp(name, "darray")) {
        tile(l, block, !strcmp(name, "darray"));
    } else {
        if (rank == 0) fprintf(stderr, "unknown pattern %s\n", name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* Memory position of stream byte i (noncontig: every other piece). */
static long long mem_at(const char *name, long long block, long long i) {
    if (strcmp(name, "noncontig")) return i;
    long long piece = block / 16;
    return (i / piece) * 2 * piece + i % piece;
}

static void open_with(const char *file, int amode, const char *strategy, MPI_File *fh) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "concerto_strategy", strategy);
    MPI_Info_set(info, "striping_unit", "65536");
    check(MPI_File_open(MPI_COMM_WORLD, file, amode, info, fh), "MPI_File_open");
    MPI_Info_free(&info);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &procs);
    if (argc < 5) {
        if (rank == 0) fprintf(stderr, "usage: patterns FILE PATTERN WRITE_STRATEGY READ_STRATEGY [BLOCK]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *file = argv[1], *name = argv[2];
    long long block = argc > 5 ? atoll(argv[5]) : 262144;
    layout l;
    pattern(name, block, &l);
    unsigned char *buf = calloc(l.memsize + 1, 1);
    for (long long i = 0; i < l.bytes; i++) buf[mem_at(name, block, i)] = value(l.offsets[i]);

    MPI_File fh;
    MPI_Status st;
    open_with(file, MPI_MODE_CREATE | MPI_MODE_RDWR, argv[3], &fh);
    check(MPI_File_set_view(fh, l.disp, MPI_BYTE, l.filetype, "native", MPI_INFO_NULL), "set_view");
    check(MPI_File_write_all(fh, buf, l.count, l.memtype, &st), "MPI_File_write_all");
    int written;
    MPI_Get_count(&st, MPI_BYTE, &written);
    /* sizes: preallocate grows the file, set_size cuts it back; the access
     * mode is the one given (Concerto's files: Open MPI's own preallocate
     * fails on a local file) */
    MPI_Offset size0, grown, cut;
    int amode;
    long long size_bad = 0;
    check(MPI_File_get_size(fh, &size0), "MPI_File_get_size");
    if (strncmp(file, "concerto:", 9) == 0) {
        check(MPI_File_preallocate(fh, 2 * size0), "MPI_File_preallocate");
        check(MPI_File_get_size(fh, &grown), "MPI_File_get_size");
        check(MPI_File_set_size(fh, size0), "MPI_File_set_size");
        check(MPI_File_get_size(fh, &cut), "MPI_File_get_size");
        check(MPI_File_get_amode(fh, &amode), "MPI_File_get_amode");
        size_bad = grown != 2 * size0 || cut != size0 || amode != (MPI_MODE_CREATE | MPI_MODE_RDWR);
        if (size_bad)
            fprintf(stderr, "rank %d: size %lld, preallocated %lld, cut %lld; amode %d\n", rank,
                    (long long)size0, (long long)grown, (long long)cut, amode);
    }
    check(MPI_File_close(&fh), "MPI_File_close");

    unsigned char *back = calloc(l.memsize + 1, 1);
    open_with(file, MPI_MODE_RDONLY, argv[4], &fh);
    check(MPI_File_set_view(fh, l.disp, MPI_BYTE, l.filetype, "native", MPI_INFO_NULL), "set_view");
    check(MPI_File_read_all(fh, back, l.count, l.memtype, &st), "MPI_File_read_all");
    int read;
    MPI_Get_count(&st, MPI_BYTE, &read);
    long long bad = size_bad, first_bad = -1;
    for (long long i = 0; i < l.bytes; i++)
        if (back[mem_at(name, block, i)] != value(l.offsets[i]) && bad++ == 0) first_bad = i;
    /* the individual file pointer and the view's byte offsets */
    MPI_Offset pos, byte;
    check(MPI_File_get_position(fh, &pos), "MPI_File_get_position");
    check(MPI_File_get_byte_offset(fh, 5, &byte), "MPI_File_get_byte_offset");
    unsigned char four[4];
    check(MPI_File_seek(fh, 3, MPI_SEEK_SET), "MPI_File_seek");
    check(MPI_File_read(fh, four, 4, MPI_BYTE, &st), "MPI_File_read");
    for (int i = 0; i < 4; i++) bad += four[i] != value(l.offsets[3 + i]);
    if (pos != l.bytes || byte != l.offsets[5]) {
        fprintf(stderr, "rank %d: position %lld (not %lld), byte offset of 5 %lld (not %lld)\n", rank,
                (long long)pos, l.bytes, (long long)byte, l.offsets[5]);
        bad++;
    }
    /* the hints in effect name the strategy asked for */
    MPI_Info used;
    char strategy[64] = "", cb_nodes[64] = "";
    int flag = 0, nodes_flag = 0;
    check(MPI_File_get_info(fh, &used), "MPI_File_get_info");
    MPI_Info_get(used, "concerto_strategy", sizeof strategy - 1, strategy, &flag);
    MPI_Info_get(used, "cb_nodes", sizeof cb_nodes - 1, cb_nodes, &nodes_flag);
    MPI_Info_free(&used);
    if (strncmp(file, "concerto:", 9) == 0 && (!flag || strcmp(strategy, argv[4]))) {
        fprintf(stderr, "rank %d: concerto_strategy in effect is \"%s\", not %s\n", rank, strategy, argv[4]);
        bad++;
    }
    /* as ROMIO reports it: the aggregators, every rank unless the hint said fewer */
    if (strncmp(file, "concerto:", 9) == 0 && (!nodes_flag || atoi(cb_nodes) != procs)) {
        fprintf(stderr, "rank %d: cb_nodes in effect is \"%s\", not %d\n", rank, cb_nodes, procs);
        bad++;
    }
    /* and the whole file through the default view, independently, on rank 0 */
    MPI_Offset size;
    check(MPI_File_get_size(fh, &size), "MPI_File_get_size");
    if (rank == 0) {
        unsigned char *all = malloc(size + 1);
        check(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL), "set_view");
        check(MPI_File_read_at(fh, 0, all, (int)size, MPI_BYTE, &st), "MPI_File_read_at");
        for (MPI_Offset k = 0; k < size; k++)
            if (all[k] != value(k) && bad++ == 0) first_bad = k;
        free(all);
    } else {
        check(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL), "set_view");
    }
    check(MPI_File_close(&fh), "MPI_File_close");
    if (l.filetype != MPI_BYTE) MPI_Type_free(&l.filetype);
    if (l.memtype != MPI_BYTE && l.memtype != MPI_INT) MPI_Type_free(&l.memtype);
    if (bad || written != l.bytes || read != l.bytes)
        fprintf(stderr, "rank %d: %s %s->%s: %lld bad bytes (first at %lld), wrote %d read %d of %lld\n",
                rank, name, argv[3], argv[4], bad, first_bad, written, read, l.bytes);
    long long all_bad = 0, mine = bad + (written != l.bytes) + (read != l.bytes);
    MPI_Allreduce(&mine, &all_bad, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && !all_bad)
        printf("ok %s %s->%s %d ranks, file %lld bytes\n", name, argv[3], argv[4], procs, (long long)size);
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
