/* ga_bench: the goarmci GA and ARMCI benchmark definitions with Global Arrays 5.8 (and the
 * ARMCI under it), the goarmci benchmark's peer.
 *
 *   mpirun -np 2 ga_bench NAME [-min-size B] [-max-size B] [-iterations N] [-skip N] [-window N]
 *
 * GA (bench/ga.go): ga_put ga_get ga_acc (NGA_Put/Get/Acc of a square-ish 2-D patch of doubles
 * owned by rank 1 in a (1024·np)×1024 array), ga_read_inc (NGA_Read_inc of a C_LONG element of
 * rank 1), ga_sync (GA_Sync), barrier (GA_Sync as ga_sync, on any number of ranks, the row keyed
 * by the number of ranks, beside goarmci's barrier and MPI_Barrier), ga_dgemm (GA_Dgemm 'N','N'
 * of n×n doubles, n = the powers of two in -min-size..-max-size, default 64..2048, any number of
 * ranks; GFLOP/s = 2n³/t/1e9, t the mean of -iterations products, default 3, after 1 untimed).
 * allreduce: GA_Dgop "+" of n doubles in place on all ranks, osu_allreduce style, per size
 * from 8 B to 1 MiB (rank 0's mean time per call).
 * ARMCI (bench/osu.go with
 * -sync flush): put_latency get_latency (ARMCI_Put/Get + ARMCI_Fence), put_bw get_bw
 * (ARMCI_NbPut/NbGet x window + ARMCI_WaitAll + ARMCI_Fence), acc_latency (ARMCI_Acc
 * ARMCI_ACC_DBL), fop_latency (ARMCI_Rmw FETCH_AND_ADD_LONG). Output: OSU text on rank 0. */
#include <mpi.h>
#include <armci.h>
#include <ga.h>
#include <macdecls.h>

#include "common.h"

static opts_t o;
static int me, nproc;

static void patch_shape(long elems, long bcols, long *rows, long *cols) {
    long r = 1;
    while (r * r * 4 <= elems) r *= 2;
    long c = elems / r;
    if (c > bcols) { c = bcols; r = elems / c; }
    *rows = r;
    *cols = c;
}

static void ga_patch(const char *name, long lo_s, long hi_s) {
    int dims[2] = {1024 * nproc, 1024};
    int g = NGA_Create(C_DBL, 2, dims, "bench_patch", NULL);
    int blo[2], bhi[2];
    NGA_Distribution(g, 1, blo, bhi);
    long brows = bhi[0] - blo[0] + 1, bcols = bhi[1] - blo[1] + 1;
    double *buf = malloc(sizeof(double) * (hi_s / 8 > 0 ? hi_s / 8 : 1));
    for (long i = 0; i < hi_s / 8; i++) buf[i] = 1;
    double one = 1;
    const char *title = !strcmp(name, "ga_put") ? "# GA NGA_Put Latency Test" :
                        !strcmp(name, "ga_get") ? "# GA NGA_Get Latency Test" : "# GA NGA_Acc Latency Test";
    if (me == 0) {
        printf("%s (peer: Global Arrays %d.%d)\n", title, GA_VERSION_MAJOR, GA_VERSION_MINOR);
        printf("%-10s%18s%18s\n", "# Size", "Latency (us)", "Bandwidth (MB/s)");
    }
    for (long size = 8; size <= hi_s; size *= 2) {
        if (size < lo_s) continue;
        long pr, pc;
        patch_shape(size / 8, bcols, &pr, &pc);
        if (pr > brows) break;
        int lo[2] = {blo[0], blo[1]}, hi[2] = {blo[0] + (int)pr - 1, blo[1] + (int)pc - 1}, ld[1] = {(int)pc};
        int iters, skip;
        counts(&o, 0, size, &iters, &skip);
        GA_Sync();
        double t0 = 0, lat = 0;
        if (me == 0) {
            for (int i = 0; i < skip + iters; i++) {
                if (i == skip) t0 = MPI_Wtime();
                if (!strcmp(name, "ga_put")) NGA_Put(g, lo, hi, buf, ld);
                else if (!strcmp(name, "ga_get")) NGA_Get(g, lo, hi, buf, ld);
                else NGA_Acc(g, lo, hi, buf, ld, &one);
            }
            lat = (MPI_Wtime() - t0) * 1e6 / iters;
        }
        GA_Sync();
        if (me == 0) {
            printf("%-10ld%18.2f%18.2f\n", size, lat, (double)size / lat);
            fflush(stdout);
        }
    }
    free(buf);
    GA_Destroy(g);
}

static void ga_scalar(const char *name) {
    int iters, skip;
    counts(&o, 0, 8, &iters, &skip);
    double t0 = 0, lat = 0;
    long key = 8;
    int bar = !strcmp(name, "barrier"), sync = bar || !strcmp(name, "ga_sync");
    if (sync) {
        key = bar ? nproc : 0;
        GA_Sync();
        for (int i = 0; i < skip + iters; i++) {
            if (i == skip) t0 = MPI_Wtime();
            GA_Sync();
        }
        lat = (MPI_Wtime() - t0) * 1e6 / iters;
    } else {
        int dims[1] = {nproc};
        int g = NGA_Create(C_LONG, 1, dims, "bench_counter", NULL);
        GA_Zero(g);
        int sub[1] = {1};
        if (me == 0) {
            for (int i = 0; i < skip + iters; i++) {
                if (i == skip) t0 = MPI_Wtime();
                NGA_Read_inc(g, sub, 1);
            }
            lat = (MPI_Wtime() - t0) * 1e6 / iters;
        }
        GA_Sync();
        GA_Destroy(g);
    }
    if (me == 0) {
        printf("%s (peer: Global Arrays %d.%d)\n",
               sync ? "# GA GA_Sync Latency Test" : "# GA NGA_Read_inc Latency Test",
               GA_VERSION_MAJOR, GA_VERSION_MINOR);
        printf("%-10s%18s\n", bar ? "# Ranks" : "# Size", "Latency (us)");
        printf("%-10ld%18.2f\n", key, lat);
    }
}

/* ga_dgemm: three n×n C_DBL arrays of GA's regular distribution, A = 1 and B = 0.5 (GA_Fill),
 * GA_Sync, then skip untimed and iters timed GA_Dgemm('N', 'N', n, n, n, 1, A, B, 0, C) between
 * GA_Syncs; rank 0 checks C[0][0] = n/2 and prints 2n³/t/1e9 per n. GA_Dgemm takes its
 * panel buffers from MA (stops with "MA not yet initialized" without MA_init): 4M doubles of
 * stack and of heap per rank. */
static void ga_dgemm(long lo_n, long hi_n) {
    int iters = o.iterations > 0 ? o.iterations : 3, skip = o.skip > 0 ? o.skip : 1;
    if (!MA_init(C_DBL, 4 << 20, 4 << 20)) GA_Error("ga_dgemm: MA_init failed", 0);
    if (me == 0) {
        printf("# GA GA_Dgemm Test (peer: Global Arrays %d.%d)\n", GA_VERSION_MAJOR, GA_VERSION_MINOR);
        printf("%-10s%18s\n", "# N", "GFLOP/s");
    }
    for (long n = 1; n <= hi_n; n *= 2) {
        if (n < lo_n) continue;
        int dims[2] = {(int)n, (int)n};
        int a = NGA_Create(C_DBL, 2, dims, "bench_a", NULL);
        int b = NGA_Create(C_DBL, 2, dims, "bench_b", NULL);
        int c = NGA_Create(C_DBL, 2, dims, "bench_c", NULL);
        double va = 1, vb = 0.5;
        GA_Fill(a, &va);
        GA_Fill(b, &vb);
        GA_Zero(c);
        GA_Sync();
        double t0 = 0;
        for (int i = 0; i < skip + iters; i++) {
            if (i == skip) {
                GA_Sync();
                t0 = MPI_Wtime();
            }
            GA_Dgemm('N', 'N', (int)n, (int)n, (int)n, 1.0, a, b, 0.0, c);
        }
        GA_Sync();
        double t = (MPI_Wtime() - t0) / iters;
        if (me == 0) {
            int lo[2] = {0, 0}, ld[1] = {1};
            double c00 = 0;
            NGA_Get(c, lo, lo, &c00, ld);
            if (c00 != 0.5 * (double)n) {
                fprintf(stderr, "ga_bench: ga_dgemm n=%ld: C[0][0] = %g, want %g\n", n, c00, 0.5 * (double)n);
                GA_Error("ga_dgemm: wrong product", 0);
            }
            printf("%-10ld%18.2f\n", n, 2.0 * n * n * n / t / 1e9);
            fflush(stdout);
        }
        GA_Sync();
        GA_Destroy(c);
        GA_Destroy(b);
        GA_Destroy(a);
    }
}

static void armci(const char *name, long lo_s, long hi_s) {
    int bw = !strcmp(name, "put_bw") || !strcmp(name, "get_bw");
    int acc = !strcmp(name, "acc_latency"), fop = !strcmp(name, "fop_latency");
    int put = !strcmp(name, "put_latency") || !strcmp(name, "put_bw");
    int get = !strcmp(name, "get_latency") || !strcmp(name, "get_bw");
    if (!bw && !acc && !fop && !put && !get) {
        if (me == 0) fprintf(stderr, "ga_bench: unknown benchmark %s\n", name);
        GA_Terminate();
        MPI_Finalize();
        exit(2);
    }
    if (acc || fop) { if (lo_s < 8) lo_s = 8; }
    if (fop) lo_s = hi_s = 8;
    void **ptrs = malloc(sizeof(void *) * nproc);
    ARMCI_Malloc(ptrs, hi_s < 8 ? 8 : hi_s);
    char *buf = ARMCI_Malloc_local(hi_s < 8 ? 8 : hi_s);
    fill_source(buf, hi_s < 8 ? 8 : hi_s);
    double scale = 1;
    const char *title = put ? (bw ? "# OSU MPI_Put Bandwidth Test" : "# OSU MPI_Put Latency Test") :
                        get ? (bw ? "# OSU MPI_Get Bandwidth Test" : "# OSU MPI_Get Latency Test") :
                        acc ? "# OSU MPI_Accumulate latency Test" : "# OSU MPI_Fetch_and_op latency Test";
    if (me == 0) {
        printf("%s (peer: ARMCI of Global Arrays %d.%d)\n", title, GA_VERSION_MAJOR, GA_VERSION_MINOR);
        printf("# Window creation: ARMCI_Malloc\n# Synchronization: ARMCI_Fence\n");
        printf("%-10s%18s\n", "# Size", bw ? "Bandwidth (MB/s)" : "Latency (us)");
    }
    for (long size = 1; size <= hi_s; size *= 2) {
        if (size < lo_s) continue;
        int iters, skip;
        counts(&o, bw, size, &iters, &skip);
        ARMCI_Barrier();
        double t0 = 0, v = 0;
        if (me == 0) {
            char *dst = ptrs[1];
            for (int i = 0; i < skip + iters; i++) {
                if (i == skip) t0 = MPI_Wtime();
                if (bw) {
                    for (int j = 0; j < o.window; j++) {
                        if (put) ARMCI_NbPut(buf, dst, (int)size, 1, NULL);
                        else ARMCI_NbGet(dst, buf, (int)size, 1, NULL);
                    }
                    ARMCI_WaitAll();
                } else if (put) ARMCI_Put(buf, dst, (int)size, 1);
                else if (get) ARMCI_Get(dst, buf, (int)size, 1);
                else if (acc) ARMCI_Acc(ARMCI_ACC_DBL, &scale, buf, dst, (int)size, 1);
                else { long old; ARMCI_Rmw(ARMCI_FETCH_AND_ADD_LONG, &old, dst, 1, 1); }
                ARMCI_Fence(1);
            }
            double t = MPI_Wtime() - t0;
            v = bw ? (double)size * o.window * iters / t / 1e6 : t * 1e6 / iters;
        }
        ARMCI_Barrier();
        if (me == 0) {
            printf("%-10ld%18.2f\n", size, v);
            fflush(stdout);
        }
    }
    ARMCI_Free_local(buf);
    ARMCI_Free(ptrs[me]);
    free(ptrs);
}

static void ga_dgop(double *buf, int n) { GA_Dgop(buf, n, "+"); }

int main(int argc, char **argv) {
    parse_opts(argc, argv, &o);
    MPI_Init(&argc, &argv);
    GA_Initialize();
    me = GA_Nodeid();
    nproc = GA_Nnodes();
    if (nproc < 2 && strcmp(o.name, "barrier") && strcmp(o.name, "ga_dgemm") && strcmp(o.name, "allreduce")) {
        if (me == 0) fprintf(stderr, "ga_bench: needs 2 ranks\n");
        GA_Terminate();
        MPI_Finalize();
        return 2;
    }
    long lo = o.min_size > 0 ? o.min_size : 1;
    long hi = o.max_size > 0 && o.max_size < MAX_MESSAGE ? o.max_size : MAX_MESSAGE;
    if (!strcmp(o.name, "ga_dgemm")) {
        ga_dgemm(o.min_size > 0 ? o.min_size : 64, o.max_size > 0 && o.max_size < 2048 ? o.max_size : 2048);
    } else if (!strncmp(o.name, "ga_", 3)) {
        if (!strcmp(o.name, "ga_read_inc") || !strcmp(o.name, "ga_sync")) ga_scalar(o.name);
        else ga_patch(o.name, lo < 8 ? 8 : lo, hi);
    } else if (!strcmp(o.name, "barrier")) {
        ga_scalar(o.name);
    } else if (!strcmp(o.name, "allreduce")) {
        allreduce_sweep(&o, me, "GA_Dgop \"+\"", lo < 8 ? 8 : lo, hi < (1L << 20) ? hi : 1L << 20, ga_dgop, GA_Sync, MPI_Wtime);
    } else {
        armci(o.name, lo, hi);
    }
    GA_Terminate();
    MPI_Finalize();
    return 0;
}
