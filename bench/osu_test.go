package bench_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// runAll runs one benchmark on n in-process ranks and returns rank 0's result.
func runAll(t *testing.T, n int, o bench.Options, opts ...rmatest.Option) *bench.Result {
	t.Helper()
	results := make([]*bench.Result, n)
	rmatest.Run(t, n, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		res, err := bench.Run(ctx, rt, o)
		require.NoError(tb, err)
		results[rt.Rank()] = res
	}, opts...)
	for r := 1; r < n; r++ {
		assert.Nil(t, results[r], "rank %d returns no table", r)
	}
	require.NotNil(t, results[0])
	return results[0]
}

func TestOneSidedBenchmarksProduceOneRowPerSize(t *testing.T) {
	cases := []struct {
		name string
		sync bench.Sync
		min  int
		rows int
	}{
		{"put_latency", bench.SyncFlush, 1, 13},
		{"get_latency", bench.SyncLock, 1, 13},
		{"put_bw", bench.SyncFlush, 1, 13},
		{"get_bw", bench.SyncFence, 1, 13},
		{"put_bibw", "", 1, 13},
		{"put_latency", bench.SyncFence, 1, 13},
		{"acc_latency", "", 8, 10},
		{"fop_latency", "", 8, 1},
		{"cas_latency", bench.SyncLock, 8, 1},
	}
	for _, c := range cases {
		t.Run(c.name+"/"+string(c.sync), func(t *testing.T) {
			res := runAll(t, 2, bench.Options{Name: c.name, Sync: c.sync, Iterations: 3, Skip: 1, Window: 4, MaxSize: 4096})
			require.Len(t, res.Rows, c.rows)
			assert.Equal(t, c.min, res.Rows[0].Size)
			for i, row := range res.Rows {
				require.Len(t, row.Values, 1)
				assert.Greater(t, row.Values[0], 0.0, "size %d", row.Size)
				if i > 0 {
					assert.Equal(t, 2*res.Rows[i-1].Size, row.Size)
				}
			}
			assert.Equal(t, "shm", res.Transport)
		})
	}
}

func TestThirdRankOnlySynchronizes(t *testing.T) {
	res := runAll(t, 3, bench.Options{Name: "put_bw", Sync: bench.SyncFence, Iterations: 2, Skip: 1, Window: 2, MaxSize: 64})
	require.Len(t, res.Rows, 7)
	assert.Equal(t, 3, res.Ranks)
}

func TestUnsupportedAndBadOptions(t *testing.T) {
	rmatest.Run(t, 2, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		_, err := bench.Run(ctx, rt, bench.Options{Name: "get_acc_latency", Iterations: 1})
		assert.ErrorIs(tb, err, bench.ErrUnsupported)
		_, err = bench.Run(ctx, rt, bench.Options{Name: "put_bw", Sync: bench.SyncPSCW})
		assert.ErrorIs(tb, err, bench.ErrSync)
		_, err = bench.Run(ctx, rt, bench.Options{Name: "put_bibw", Sync: bench.SyncLock})
		assert.ErrorIs(tb, err, bench.ErrSync)
		_, err = bench.Run(ctx, rt, bench.Options{Name: "nope"})
		assert.ErrorIs(tb, err, bench.ErrUnknown)
		_, err = bench.Run(ctx, rt, bench.Options{Name: "put_bw", MinSize: 64, MaxSize: 8})
		assert.ErrorIs(tb, err, bench.ErrOptions)
	})
	rmatest.Run(t, 1, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		_, err := bench.Run(ctx, rt, bench.Options{Name: "put_bw"})
		assert.True(tb, errors.Is(err, bench.ErrRanks), "%v", err)
	})
}

func TestBarrierAlgorithms(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		res := runAll(t, n, bench.Options{Name: "barrier", Iterations: 20, Skip: 2})
		require.Len(t, res.Rows, 1)
		assert.Equal(t, n, res.Rows[0].Size)
		assert.Equal(t, []string{"dissemination (us)", "pairwise (us)", "gather-broadcast (us)", "rgm (us)"}, res.Columns)
		for _, v := range res.Rows[0].Values {
			assert.Greater(t, v, 0.0)
		}
		assert.Equal(t, "Ranks", res.KeyLabel)
	}
}

func TestGABenchmarks(t *testing.T) {
	for _, name := range bench.GASuite {
		t.Run(name, func(t *testing.T) {
			res := runAll(t, 2, bench.Options{Name: name, Iterations: 3, Skip: 1, MaxSize: 1024})
			require.NotEmpty(t, res.Rows)
			for _, row := range res.Rows {
				assert.Greater(t, row.Values[0], 0.0)
				assert.Len(t, row.Values, len(res.Columns))
			}
			var b bytes.Buffer
			require.NoError(t, res.WriteText(&b))
			back, err := bench.ParseOSU(&b)
			require.NoError(t, err)
			assert.Equal(t, res.Columns, back.Columns)
		})
	}
}

func TestGADgemm(t *testing.T) {
	for _, n := range []int{1, 3} {
		res := runAll(t, n, bench.Options{Name: "ga_dgemm", Iterations: 1, MinSize: 32, MaxSize: 256})
		assert.Equal(t, "N", res.KeyLabel)
		assert.Equal(t, []string{bench.ColGFlops}, res.Columns)
		require.Len(t, res.Rows, 3, "sizes 64..256: 32 is below the smallest n")
		for i, row := range res.Rows {
			assert.Equal(t, 64<<i, row.Size)
			assert.Greater(t, row.Values[0], 0.0)
		}
	}
	iters, skip := bench.Options{}.Counts(bench.Flops, 2048)
	assert.Equal(t, []int{3, 1}, []int{iters, skip})
}

func TestBaselineColumns(t *testing.T) {
	res := runAll(t, 2, bench.Options{Name: "put_bw", Iterations: 2, Skip: 1, Window: 2, MaxSize: 1024, Baseline: true})
	assert.Equal(t, []string{bench.ColBandwidth, bench.ColMemcpy, bench.ColTCPStream}, res.Columns)
	for _, row := range res.Rows {
		require.Len(t, row.Values, 3)
		assert.Greater(t, row.Values[1], 0.0, "memcpy at %d", row.Size)
		assert.Greater(t, row.Values[2], 0.0, "tcp at %d", row.Size)
	}
	res = runAll(t, 2, bench.Options{Name: "put_latency", Iterations: 2, Skip: 1, MaxSize: 16, Baseline: true})
	assert.Equal(t, []string{bench.ColLatency, bench.ColSocketRTT}, res.Columns)
	for _, row := range res.Rows {
		assert.Greater(t, row.Values[1], 0.0)
	}
}

func TestWindowAPIEverySyncMode(t *testing.T) {
	cases := []struct {
		name string
		sync bench.Sync
		win  string
		rows int
	}{
		{"put_latency", bench.SyncFlush, "allocate", 4},
		{"put_latency", bench.SyncPSCW, "create", 4},
		{"get_latency", bench.SyncLock, "allocate", 4},
		{"get_latency", bench.SyncFence, "create", 4},
		{"put_bw", bench.SyncPSCW, "allocate", 4},
		{"get_bw", bench.SyncLock, "create", 4},
		{"put_bw", bench.SyncFence, "allocate", 4},
		{"put_bw", bench.SyncFlush, "allocate", 4},
		{"put_bibw", bench.SyncPSCW, "allocate", 4},
		{"put_bibw", bench.SyncFence, "create", 4},
		{"acc_latency", bench.SyncFlush, "allocate", 1},
		{"get_acc_latency", bench.SyncFlush, "allocate", 1},
		{"get_acc_latency", bench.SyncPSCW, "create", 1},
		{"fop_latency", bench.SyncFence, "allocate", 1},
		{"cas_latency", bench.SyncFlush, "allocate", 1},
	}
	for _, c := range cases {
		t.Run(c.name+"/"+string(c.sync)+"/"+c.win, func(t *testing.T) {
			res := runAll(t, 2, bench.Options{Name: c.name, Sync: c.sync, API: bench.APIWindow, Win: c.win,
				Iterations: 3, Skip: 1, Window: 4, MaxSize: 8})
			require.Len(t, res.Rows, c.rows)
			assert.Contains(t, res.Title, "windows")
			for _, row := range res.Rows {
				assert.Greater(t, row.Values[0], 0.0, "size %d", row.Size)
			}
		})
	}
	// A third rank takes part in the fences only, and stays out of PSCW.
	for _, s := range []bench.Sync{bench.SyncFence, bench.SyncPSCW} {
		res := runAll(t, 3, bench.Options{Name: "put_bw", Sync: s, API: bench.APIWindow, Iterations: 2, Skip: 1, Window: 2, MaxSize: 4})
		assert.Len(t, res.Rows, 3)
	}
}

// TestAllReduceBenchmark: one row per size from 8 B, over shared memory and over tcp (3 ranks:
// recursive doubling with a fold), each rank checking the sums of a call (runAllReduce).
func TestAllReduceBenchmark(t *testing.T) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		t.Run(string(tr), func(t *testing.T) {
			res := runAll(t, 3, bench.Options{Name: "allreduce", Iterations: 5, Skip: 1, MaxSize: 4096}, rmatest.Transport(tr))
			var sizes []int
			for _, row := range res.Rows {
				sizes = append(sizes, row.Size)
				require.Len(t, row.Values, 1)
				assert.Greater(t, row.Values[0], 0.0)
			}
			assert.Equal(t, []int{8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}, sizes)
			assert.Equal(t, []string{bench.ColLatency}, res.Columns)
		})
	}
}
