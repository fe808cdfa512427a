package globalarray

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// gaPair starts two shm ranks in this process sharing a float64 array of 256×2048 (GA's
// distribution gives each rank a 256×1024 block) and an int64 counter array of 2 elements; rank 0
// runs op b.N times against rank 1's block while rank 1 waits (with both set, both ranks run op: a
// collective).
func gaPair(b *testing.B, both bool, op func(ctx context.Context, rt *rma.Runtime, a *Array[float64], c *Array[int64]) error) {
	g := rmatest.NewGroup(2)
	defer g.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = gaRank(ctx, b, g, r, both, op)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

func gaRank(ctx context.Context, b *testing.B, g *rmatest.Group, r int, both bool, op func(ctx context.Context, rt *rma.Runtime, a *Array[float64], c *Array[int64]) error) error {
	rt, err := rma.Init(ctx, &rma.Config{Bootstrap: g.Member(r), Transport: rma.TransportShm, HostID: "bench", Job: fmt.Sprintf("gabench%d", benchSeq)})
	if err != nil {
		return err
	}
	defer rt.Finalize(ctx)
	a, err := Create[float64](ctx, rt, "bench", []int{256, 2048})
	if err != nil {
		return err
	}
	c, err := Create[int64](ctx, rt, "counter", []int{2})
	if err != nil {
		return err
	}
	if r == 0 {
		b.ReportAllocs()
		b.ResetTimer()
	}
	if r == 0 || both {
		for i := 0; i < b.N; i++ {
			if err := op(ctx, rt, a, c); err != nil {
				return err
			}
		}
	}
	if r == 0 {
		b.StopTimer()
	}
	if err := a.Destroy(ctx); err != nil {
		return err
	}
	return c.Destroy(ctx)
}

var benchSeq int

// patchBench benchmarks a blocking patch operation of rows×cols doubles in rank 1's block.
func patchBench(b *testing.B, o op) {
	for _, sh := range [][2]int{{1, 1}, {8, 8}, {64, 128}, {128, 1024}, {256, 512}} {
		rows, cols := sh[0], sh[1]
		b.Run(fmt.Sprintf("%dB", rows*cols*8), func(b *testing.B) {
			benchSeq++
			buf := make([]float64, rows*cols)
			b.SetBytes(int64(len(buf) * 8))
			var lo, hi []int
			gaPair(b, false, func(ctx context.Context, _ *rma.Runtime, a *Array[float64], _ *Array[int64]) error {
				if lo == nil {
					lo, _ = a.Distribution(1)
					hi = []int{lo[0] + rows - 1, lo[1] + cols - 1}
				}
				switch o {
				case opPut:
					return a.Put(ctx, lo, hi, buf, nil)
				case opGet:
					return a.Get(ctx, lo, hi, buf, nil)
				}
				return a.Acc(ctx, lo, hi, buf, nil, 1)
			})
		})
	}
}

func BenchmarkPut(b *testing.B) { patchBench(b, opPut) }
func BenchmarkGet(b *testing.B) { patchBench(b, opGet) }
func BenchmarkAcc(b *testing.B) { patchBench(b, opAcc) }

func BenchmarkReadInc(b *testing.B) {
	benchSeq++
	sub := []int{1}
	gaPair(b, false, func(ctx context.Context, _ *rma.Runtime, _ *Array[float64], c *Array[int64]) error {
		_, err := c.ReadInc(ctx, sub, 1)
		return err
	})
}

func BenchmarkSync(b *testing.B) {
	benchSeq++
	gaPair(b, true, func(ctx context.Context, rt *rma.Runtime, _ *Array[float64], _ *Array[int64]) error {
		return Sync(ctx, rt)
	})
}
