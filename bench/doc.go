// Package bench runs the OSU one-sided microbenchmarks (osu_put_latency, osu_get_bw, ...) and
// their Global Arrays and barrier counterparts on a goarmci job, measures the physical limits
// of the machine beside them (memcpy bandwidth of one core, a plain TCP socket's round trip and
// stream bandwidth), and runs the same definitions written in C against MPI-3 RMA and Global
// Arrays ("peers", bench/peers) for side-by-side tables ([OSU] definitions).
//
// A benchmark runs on every rank of an initialized rma.Runtime (Run); rank 0 (the origin)
// returns the Result, which formats as OSU text, CSV or JSON and plots as PNG. The OSU rules
// apply: warm-up iterations skipped, fewer iterations above 8 KiB, a window of 64 operations
// per synchronization for bandwidth tests, sizes 1 B–4 MiB in powers of two, MB/s = 10^6 B/s.
package bench
