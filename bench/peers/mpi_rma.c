/* mpi_rma: the OSU one-sided definitions with MPI-3 RMA, the goarmci benchmark's peer.
 *
 *   mpirun -np 2 mpi_rma NAME [-win allocate|create] [-sync lock|flush|fence|pscw]
 *          [-min-size B] [-max-size B] [-iterations N] [-skip N] [-window N]
 *   mpirun -np N mpi_rma barrier [-iterations N] [-skip N]
 *   mpirun -np N mpi_rma allreduce [-min-size B] [-max-size B] [-iterations N] [-skip N]
 *
 * NAME: put_latency get_latency put_bw get_bw put_bibw acc_latency fop_latency cas_latency
 * get_acc_latency. Rank 0 is the origin, rank 1 the target; other ranks only take part in
 * fences. Output: OSU text on rank 0. Accumulates use MPI_DOUBLE/MPI_SUM (sizes from 8 B), the
 * atomics MPI_LONG_LONG, as goarmci's definitions (bench/osu.go).
 *
 * barrier: MPI_Barrier on all ranks of the job, OSU style (10000 iterations after 100 warm-ups
 * unless -iterations/-skip), rank 0's mean time per barrier in µs, one row keyed by the number
 * of ranks (as goarmci's barrier benchmark). No window is created.
 *
 * allreduce: MPI_Allreduce(MPI_IN_PLACE) of MPI_DOUBLE with MPI_SUM on all ranks, osu_allreduce
 * style, per size from 8 B to 1 MiB: rank 0's mean time per call in µs (goarmci: GA_Dgop "+"). */
#include <mpi.h>

#include "common.h"

static opts_t o;
static int rank, nproc;
static MPI_Win win;
static char *sbuf, *rbuf;
static long long cmpv;
static MPI_Group peer_group; /* the other rank of the pair, for PSCW */

enum { LAT, BW };

static void op(const char *name, long size, int to) {
    if (!strcmp(name, "put_latency") || !strcmp(name, "put_bw") || !strcmp(name, "put_bibw"))
        MPI_Put(sbuf, (int)size, MPI_CHAR, to, 0, (int)size, MPI_CHAR, win);
    else if (!strcmp(name, "get_latency") || !strcmp(name, "get_bw"))
        MPI_Get(rbuf, (int)size, MPI_CHAR, to, 0, (int)size, MPI_CHAR, win);
    else if (!strcmp(name, "acc_latency"))
        MPI_Accumulate(sbuf, (int)(size / 8), MPI_DOUBLE, to, 0, (int)(size / 8), MPI_DOUBLE, MPI_SUM, win);
    else if (!strcmp(name, "get_acc_latency"))
        MPI_Get_accumulate(sbuf, (int)(size / 8), MPI_DOUBLE, rbuf, (int)(size / 8), MPI_DOUBLE, to, 0,
                           (int)(size / 8), MPI_DOUBLE, MPI_SUM, win);
    else if (!strcmp(name, "fop_latency")) {
        long long one = 1;
        MPI_Fetch_and_op(&one, rbuf, MPI_LONG_LONG, to, 0, MPI_SUM, win);
    } else if (!strcmp(name, "cas_latency")) {
        long long swap = cmpv + 1;
        MPI_Compare_and_swap(&swap, &cmpv, rbuf, MPI_LONG_LONG, to, 0, win);
    }
}

static double latency(const char *name, long size) {
    int iters, skip;
    counts(&o, 0, size, &iters, &skip);
    double t0 = 0;
    int peer = rank == 0 ? 1 : 0;
    if (!strcmp(o.sync, "fence")) {
        MPI_Win_fence(0, win);
        for (int i = 0; i < skip + iters; i++) {
            if (i == skip) t0 = MPI_Wtime();
            if (rank == 0) op(name, size, peer);
            MPI_Win_fence(0, win);
            if (rank == 1) op(name, size, peer);
            MPI_Win_fence(0, win);
        }
        return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
    }
    if (!strcmp(o.sync, "pscw")) {
        if (rank > 1) return 0;
        for (int i = 0; i < skip + iters; i++) {
            if (i == skip) t0 = MPI_Wtime();
            if (rank == 0) {
                MPI_Win_start(peer_group, 0, win);
                op(name, size, peer);
                MPI_Win_complete(win);
                MPI_Win_post(peer_group, 0, win);
                MPI_Win_wait(win);
            } else {
                MPI_Win_post(peer_group, 0, win);
                MPI_Win_wait(win);
                MPI_Win_start(peer_group, 0, win);
                op(name, size, peer);
                MPI_Win_complete(win);
            }
        }
        return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
    }
    if (rank != 0) return 0;
    int lock = !strcmp(o.sync, "lock");
    if (!lock) MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
    for (int i = 0; i < skip + iters; i++) {
        if (i == skip) t0 = MPI_Wtime();
        if (lock) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
            op(name, size, 1);
            MPI_Win_unlock(1, win);
        } else {
            op(name, size, 1);
            MPI_Win_flush(1, win);
        }
        if (!strcmp(name, "cas_latency")) cmpv = *(long long *)rbuf;
    }
    double t = (MPI_Wtime() - t0) * 1e6 / iters;
    if (!lock) MPI_Win_unlock(1, win);
    return t;
}

/* window_ops issues the operations of one window to peer; put_bibw's operation j puts bytes
 * [j*size, (j+1)*size) of sbuf to the same place of the peer's window, as osu_put_bibw. */
static void window_ops(const char *name, long size, int peer) {
    int bi = !strcmp(name, "put_bibw");
    for (int j = 0; j < o.window; j++) {
        if (bi)
            MPI_Put(sbuf + j * size, (int)size, MPI_CHAR, peer, j * size, (int)size, MPI_CHAR, win);
        else
            op(name, size, peer);
    }
}

static double bandwidth(const char *name, long size) {
    int iters, skip;
    counts(&o, 1, size, &iters, &skip);
    int bi = !strcmp(name, "put_bibw");
    int active = rank == 0 || (bi && rank == 1);
    int peer = rank == 0 ? 1 : 0;
    int fence = !strcmp(o.sync, "fence"), lock = !strcmp(o.sync, "lock"), pscw = !strcmp(o.sync, "pscw");
    double t0 = 0;
    if (pscw) {
        for (int i = 0; i < skip + iters; i++) {
            if (i == skip) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            if (rank > 1) continue;
            if (bi || rank == 1) MPI_Win_post(peer_group, 0, win);
            if (active) {
                MPI_Win_start(peer_group, 0, win);
                window_ops(name, size, peer);
                MPI_Win_complete(win);
            }
            if (bi || rank == 1) MPI_Win_wait(win);
        }
        double t = MPI_Wtime() - t0;
        double bytes = (double)size * o.window * iters * (bi ? 2 : 1);
        return bytes / t / 1e6;
    }
    if (fence) MPI_Win_fence(0, win);
    if (!fence && !lock && active) MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
    for (int i = 0; i < skip + iters; i++) {
        if (i == skip) {
            if (bi && !fence) MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (fence && bi) MPI_Win_fence(0, win); /* osu_put_bibw: fence, the window, fence */
        if (active) {
            if (lock) MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
            window_ops(name, size, peer);
            if (lock) MPI_Win_unlock(peer, win);
            else if (!fence) MPI_Win_flush(peer, win);
        }
        if (fence) MPI_Win_fence(0, win);
    }
    if (bi && !fence) MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    if (!fence && !lock && active) MPI_Win_unlock(peer, win);
    double bytes = (double)size * o.window * iters * (bi ? 2 : 1);
    return bytes / t / 1e6;
}

static void barrier(void) {
    int iters, skip;
    counts(&o, 0, 0, &iters, &skip);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = 0;
    for (int i = 0; i < skip + iters; i++) {
        if (i == skip) t0 = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
    }
    double t = (MPI_Wtime() - t0) * 1e6 / iters;
    if (rank == 0) {
        printf("# OSU MPI_Barrier Latency Test\n# Operation: MPI_Barrier on MPI_COMM_WORLD, rank 0's mean time\n");
        printf("%-10s%18s\n", "# Ranks", "Latency (us)");
        printf("%-10d%18.2f\n", nproc, t);
        fflush(stdout);
    }
}

static void mpi_allreduce(double *buf, int n) { MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); }
static void mpi_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

int main(int argc, char **argv) {
    parse_opts(argc, argv, &o);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nproc);
    if (!strcmp(o.name, "barrier")) {
        barrier();
        MPI_Finalize();
        return 0;
    }
    if (!strcmp(o.name, "allreduce")) {
        allreduce_sweep(&o, rank, "MPI_Allreduce(MPI_IN_PLACE), MPI_DOUBLE, MPI_SUM", o.min_size > 8 ? o.min_size : 8,
                        o.max_size > 0 && o.max_size < (1L << 20) ? o.max_size : 1L << 20, mpi_allreduce, mpi_barrier, MPI_Wtime);
        MPI_Finalize();
        return 0;
    }
    struct { const char *name, *title; int kind; long min, max; const char *sync; } specs[] = {
        {"put_latency", "# OSU MPI_Put Latency Test", LAT, 1, MAX_MESSAGE, "flush"},
        {"get_latency", "# OSU MPI_Get Latency Test", LAT, 1, MAX_MESSAGE, "flush"},
        {"put_bw", "# OSU MPI_Put Bandwidth Test", BW, 1, MAX_MESSAGE, "flush"},
        {"get_bw", "# OSU MPI_Get Bandwidth Test", BW, 1, MAX_MESSAGE, "flush"},
        {"put_bibw", "# OSU MPI_Put Bi-directional Bandwidth Test", BW, 1, MAX_MESSAGE, "fence"},
        {"acc_latency", "# OSU MPI_Accumulate latency Test", LAT, 8, MAX_MESSAGE, "flush"},
        {"get_acc_latency", "# OSU MPI_Get_accumulate latency Test", LAT, 8, MAX_MESSAGE, "flush"},
        {"fop_latency", "# OSU MPI_Fetch_and_op latency Test", LAT, 8, 8, "flush"},
        {"cas_latency", "# OSU MPI_Compare_and_swap latency Test", LAT, 8, 8, "flush"},
    };
    int k = -1;
    for (int i = 0; i < (int)(sizeof specs / sizeof specs[0]); i++)
        if (!strcmp(specs[i].name, o.name)) k = i;
    if (k < 0 || nproc < 2) {
        if (rank == 0) fprintf(stderr, "mpi_rma: unknown benchmark %s or fewer than 2 ranks\n", o.name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (!o.sync[0]) o.sync = specs[k].sync;
    long lo = o.min_size > specs[k].min ? o.min_size : specs[k].min;
    long hi = (o.max_size > 0 && o.max_size < specs[k].max) ? o.max_size : specs[k].max;
    long wbytes = hi < 8 ? 8 : hi;
    if (!strcmp(o.name, "put_bibw")) wbytes *= o.window; /* consecutive places per window */
    sbuf = malloc(wbytes);
    rbuf = malloc(wbytes);
    fill_source(sbuf, wbytes);
    memset(rbuf, 0x5a, wbytes);
    void *base;
    if (!strcmp(o.win, "create")) {
        base = malloc(wbytes);
        memset(base, 0, wbytes);
        MPI_Win_create(base, wbytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    } else {
        MPI_Win_allocate(wbytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
        memset(base, 0, wbytes);
    }
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int other = rank == 0 ? 1 : 0;
    MPI_Group_incl(world, 1, &other, &peer_group);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char sync[64];
        snprintf(sync, sizeof sync, "%s", !strcmp(o.sync, "lock") ? "MPI_Win_lock/unlock" :
                 !strcmp(o.sync, "fence") ? "MPI_Win_fence" :
                 !strcmp(o.sync, "pscw") ? "MPI_Win_post/start/complete/wait" : "MPI_Win_flush");
        char cols[32];
        snprintf(cols, sizeof cols, "%18s", specs[k].kind == LAT ? "Latency (us)" : "Bandwidth (MB/s)");
        header(specs[k].title, !strcmp(o.win, "create") ? "MPI_Win_create" : "MPI_Win_allocate", sync, cols);
    }
    for (long size = 1; size <= hi; size *= 2) {
        if (size < lo) continue;
        MPI_Barrier(MPI_COMM_WORLD);
        double v = specs[k].kind == LAT ? latency(o.name, size) : bandwidth(o.name, size);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%-10ld%18.2f\n", size, v);
            fflush(stdout);
        }
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
