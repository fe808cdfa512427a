/* Shared option parsing and OSU rules of the goarmci benchmark peers (see bench/options.go:
 * the same iteration counts, window and sizes, and the same OSU text layout). */
#ifndef GOARMCI_PEERS_COMMON_H
#define GOARMCI_PEERS_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MESSAGE (4L << 20)
#define LARGE_MESSAGE 8192

typedef struct {
    const char *name;
    const char *win;  /* allocate | create */
    const char *sync; /* lock | flush | fence */
    long min_size, max_size;
    int iterations, skip, window;
} opts_t;

static void parse_opts(int argc, char **argv, opts_t *o) {
    o->name = NULL;
    o->win = "allocate";
    o->sync = "";
    o->min_size = 0;
    o->max_size = 0;
    o->iterations = 0;
    o->skip = 0;
    o->window = 64;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-win") && v) { o->win = v; i++; }
        else if (!strcmp(a, "-sync") && v) { o->sync = v; i++; }
        else if (!strcmp(a, "-min-size") && v) { o->min_size = atol(v); i++; }
        else if (!strcmp(a, "-max-size") && v) { o->max_size = atol(v); i++; }
        else if (!strcmp(a, "-iterations") && v) { o->iterations = atoi(v); i++; }
        else if (!strcmp(a, "-skip") && v) { o->skip = atoi(v); i++; }
        else if (!strcmp(a, "-window") && v) { o->window = atoi(v); i++; }
        else if (a[0] != '-' && !o->name) { o->name = a; }
        else { fprintf(stderr, "peer: unknown argument %s\n", a); exit(2); }
    }
    if (!o->name) { fprintf(stderr, "peer: missing benchmark name\n"); exit(2); }
}

/* fill_source writes the origin buffer as goarmci's benchmark does: every page written, with
 * doubles 1.0 (accumulates add finite, normal numbers). A buffer left as malloc'd zeros (gcc
 * turns malloc+memset(0) into calloc) stays on the kernel's shared zero page: every source page
 * then reads the same 4 KiB from L1 and a large put measures stores only (seen here: Open MPI's
 * put_bw at 4 MiB read 118 GB/s that way, against 62 GB/s for one core's memcpy of real data). */
static void fill_source(void *buf, long n) {
    double one = 1;
    long i = 0;
    for (; i + 8 <= n; i += 8) memcpy((char *)buf + i, &one, 8);
    for (; i < n; i++) ((char *)buf)[i] = 0x3f;
}

/* counts applies the OSU rules: latency 10000/100 (1000/10 above 8 KiB), bandwidth 100/10
 * (20/2 above 8 KiB); explicit -iterations/-skip replace them. */
static void counts(const opts_t *o, int bw, long size, int *iters, int *skip) {
    int large = size > LARGE_MESSAGE;
    if (bw) { *iters = large ? 20 : 100; *skip = large ? 2 : 10; }
    else { *iters = large ? 1000 : 10000; *skip = large ? 10 : 100; }
    if (o->iterations > 0) {
        int s = o->iterations / 10;
        if (s < 1) s = 1;
        if (s < *skip) *skip = s;
        *iters = o->iterations;
    }
    if (o->skip > 0) *skip = o->skip;
}

static void header(const char *title, const char *creation, const char *sync, const char *cols) {
    printf("%s\n", title);
    if (creation) printf("# Window creation: %s\n", creation);
    if (sync) printf("# Synchronization: %s\n", sync);
    printf("%-10s%s\n", "# Size", cols);
}

/* allreduce_sweep is the allreduce benchmark of both peers (osu_allreduce style): per size from
 * 8 B to hi bytes (from lo), reduce(buf, n) sums n doubles in place on every rank, skip untimed
 * and iters timed calls after sync(); rank me prints op's title once and its mean time per call
 * (now() in seconds) per size. */
static void allreduce_sweep(const opts_t *o, int me, const char *op, long lo, long hi,
                            void (*reduce)(double *, int), void (*sync)(void), double (*now)(void)) {
    double *buf = malloc(hi);
    if (me == 0) {
        printf("# OSU MPI_Allreduce Latency Test\n# Operation: %s, rank 0's mean time\n", op);
        printf("%-10s%18s\n", "# Size", "Latency (us)");
    }
    for (long size = 8; size <= hi; size *= 2) {
        if (size < lo) continue;
        int n = (int)(size / 8), iters, skip;
        counts(o, 0, size, &iters, &skip);
        for (int j = 0; j < n; j++) buf[j] = me + j;
        sync();
        double t0 = 0;
        for (int i = 0; i < skip + iters; i++) {
            if (i == skip) t0 = now();
            reduce(buf, n);
        }
        double t = (now() - t0) * 1e6 / iters;
        if (me == 0) {
            printf("%-10ld%18.2f\n", size, t);
            fflush(stdout);
        }
    }
    free(buf);
}

#endif
