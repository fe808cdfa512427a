package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/rma"
)

// GA benchmark array: float64, gaRows·size rows of gaCols columns, GA's regular distribution,
// so with 2 ranks each owns a 1024×1024 (or 2048×512) block of 8 MiB.
const (
	gaRowsPerRank = 1024
	gaCols        = 1024
)

// PatchShape returns the rows × cols of the square-ish patch of elems elements (a power of two)
// that the GA benchmarks move: rows = 2^⌊log2(elems)/2⌋, cols = elems/rows, narrowed to at most
// blockCols columns. The C peer (bench/peers/ga_bench.c) uses the same rule.
func PatchShape(elems, blockCols int) (rows, cols int) {
	rows = 1
	for rows*rows*4 <= elems {
		rows *= 2
	}
	cols = elems / rows
	if cols > blockCols {
		cols = blockCols
		rows = elems / cols
	}
	return rows, cols
}

// runGA runs one of the GA benchmarks: rank 0 moves patches of the block owned by rank 1.
func runGA(ctx context.Context, rt *rma.Runtime, o Options, s Spec) ([]Row, error) {
	me := rt.Rank()
	switch s.Name {
	case "ga_sync":
		iters, skip := o.Counts(Latency, 0)
		us, err := timeCalls(ctx, rt, o.Settle, iters, skip, func() error { return globalarray.Sync(ctx, rt) })
		if err != nil {
			return nil, err
		}
		return []Row{{Size: 0, Values: []float64{us}}}, nil
	case "ga_dgemm":
		return runDgemm(ctx, rt, o)
	case "ga_read_inc":
		a, err := globalarray.Create[int64](ctx, rt, "bench_counter", []int{rt.Size()})
		if err != nil {
			return nil, err
		}
		defer a.Destroy(ctx)
		iters, skip := o.Counts(Latency, 8)
		if err := settleRanks(ctx, rt, o.Settle); err != nil {
			return nil, err
		}
		var v float64
		if me == origin {
			sub := []int{target}
			var t0 time.Time
			for i := range skip + iters {
				if i == skip {
					t0 = time.Now()
				}
				if _, err := a.ReadInc(ctx, sub, 1); err != nil {
					return nil, err
				}
			}
			v = usPer(time.Since(t0), iters)
		}
		if err := a.Sync(ctx); err != nil {
			return nil, err
		}
		return []Row{{Size: 8, Values: []float64{v}}}, nil
	}
	a, err := globalarray.Create[float64](ctx, rt, "bench_patch", []int{gaRowsPerRank * rt.Size(), gaCols})
	if err != nil {
		return nil, err
	}
	defer a.Destroy(ctx)
	blo, bhi := a.Distribution(target)
	brows, bcols := bhi[0]-blo[0]+1, bhi[1]-blo[1]+1
	buf := make([]float64, max(o.MaxSize/8, 1))
	for i := range buf {
		buf[i] = 1
	}
	var rows []Row
	for _, size := range o.Sizes() {
		elems := size / 8
		pr, pc := PatchShape(elems, bcols)
		if pr > brows {
			break // the target's block is too small for this patch
		}
		lo := []int{blo[0], blo[1]}
		hi := []int{blo[0] + pr - 1, blo[1] + pc - 1}
		b := buf[:elems]
		iters, skip := o.Counts(Latency, size)
		if err := a.Sync(ctx); err != nil {
			return nil, err
		}
		if err := settleRanks(ctx, rt, o.Settle); err != nil {
			return nil, err
		}
		var lat float64
		if me == origin {
			var t0 time.Time
			for i := range skip + iters {
				if i == skip {
					t0 = time.Now()
				}
				switch s.Name {
				case "ga_put":
					err = a.Put(ctx, lo, hi, b, nil)
				case "ga_get":
					err = a.Get(ctx, lo, hi, b, nil)
				default:
					err = a.Acc(ctx, lo, hi, b, nil, 1)
				}
				if err != nil {
					return nil, fmt.Errorf("bench: %s size %d: %w", s.Name, size, err)
				}
			}
			lat = usPer(time.Since(t0), iters)
		}
		if err := a.Sync(ctx); err != nil {
			return nil, err
		}
		bw := 0.0
		if lat > 0 {
			bw = float64(size) / lat // bytes/µs = MB/s
		}
		rows = append(rows, Row{Size: size, Values: []float64{lat, bw}})
	}
	return rows, nil
}

// runDgemm times globalarray.Gemm (GA_Dgemm 'N', 'N') as the C peer does: for each n of
// o.Sizes(), three n×n float64 arrays of GA's regular distribution, A = 1 and B = 0.5
// (GA_Fill), GA_Sync, then skip untimed and iters timed products C = A·B between GA_Syncs. Rank
// 0 checks C[0][0] = n/2 and reports 2n³/t/1e9 GFLOP/s, t the mean time of a product.
func runDgemm(ctx context.Context, rt *rma.Runtime, o Options) ([]Row, error) {
	var rows []Row
	for _, n := range o.Sizes() {
		v, err := dgemmOnce(ctx, rt, o, n)
		if err != nil {
			return nil, fmt.Errorf("bench: ga_dgemm n %d: %w", n, err)
		}
		rows = append(rows, Row{Size: n, Values: []float64{v}})
	}
	return rows, nil
}

func dgemmOnce(ctx context.Context, rt *rma.Runtime, o Options, n int) (float64, error) {
	var m [3]*globalarray.Array[float64]
	for i, name := range []string{"bench_a", "bench_b", "bench_c"} {
		a, err := globalarray.Create[float64](ctx, rt, name, []int{n, n})
		if err != nil {
			return 0, err
		}
		defer a.Destroy(ctx)
		m[i] = a
	}
	a, b, c := m[0], m[1], m[2]
	if err := a.Fill(ctx, 1); err != nil {
		return 0, err
	}
	if err := b.Fill(ctx, 0.5); err != nil {
		return 0, err
	}
	if err := c.Zero(ctx); err != nil {
		return 0, err
	}
	if err := c.Sync(ctx); err != nil {
		return 0, err
	}
	iters, skip := o.Counts(Flops, n)
	var t0 time.Time
	for i := range skip + iters {
		if i == skip {
			if err := c.Sync(ctx); err != nil {
				return 0, err
			}
			t0 = time.Now()
		}
		if err := globalarray.Gemm(ctx, false, false, 1, a, b, 0, c); err != nil {
			return 0, err
		}
	}
	if err := c.Sync(ctx); err != nil {
		return 0, err
	}
	t := time.Since(t0).Seconds() / float64(iters)
	var v float64
	if rt.Rank() == origin {
		c00 := []float64{0}
		if err := c.Get(ctx, []int{0, 0}, []int{0, 0}, c00, nil); err != nil {
			return 0, err
		}
		if want := 0.5 * float64(n); c00[0] != want {
			return 0, fmt.Errorf("C[0][0] = %g, want %g", c00[0], want)
		}
		v = 2 * float64(n) * float64(n) * float64(n) / t / 1e9
	}
	return v, c.Sync(ctx)
}
