package rma_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// pair starts two ranks in this process; rank 0 runs op b.N times against rank 1, which waits.
func pair(b *testing.B, tr rma.Transport, size int, op func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, buf []byte) error) {
	g := rmatest.NewGroup(2)
	ctx := context.Background()
	job := fmt.Sprintf("bench%d", size)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt, err := rma.Init(ctx, &rma.Config{Bootstrap: g.Member(r), Transport: tr, HostID: "bench", Job: job})
			if err != nil {
				errs[r] = err
				return
			}
			defer rt.Finalize(ctx)
			seg, err := rt.Malloc(ctx, size)
			if err != nil {
				errs[r] = err
				return
			}
			if r == 0 {
				buf := make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := op(ctx, rt, seg, buf); err != nil {
						errs[r] = err
						break
					}
				}
				b.StopTimer()
			}
			if err := rt.Barrier(ctx); err != nil && errs[r] == nil {
				errs[r] = err
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPut(b *testing.B) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		for _, size := range []int{8, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%d", tr, size), func(b *testing.B) {
				pair(b, tr, size, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, buf []byte) error {
					return rt.Put(ctx, buf, seg, 1, 0)
				})
			})
		}
	}
}

func BenchmarkGet(b *testing.B) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		for _, size := range []int{8, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%d", tr, size), func(b *testing.B) {
				pair(b, tr, size, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, buf []byte) error {
					return rt.Get(ctx, seg, 1, 0, buf)
				})
			})
		}
	}
}

func BenchmarkAccFloat64(b *testing.B) {
	for _, size := range []int{8, 1 << 16} {
		b.Run(fmt.Sprintf("shm/%d", size), func(b *testing.B) {
			pair(b, rma.TransportShm, size, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, buf []byte) error {
				return rt.Acc(ctx, rma.AccFloat64, 1, buf, seg, 1, 0)
			})
		})
	}
}

// BenchmarkNbPutWindow is OSU put_bw's inner loop: a window of 64 ARMCI_NbPut of one size to the
// same offset, their Waits, then ARMCI_Fence. One op is one window.
func BenchmarkNbPutWindow(b *testing.B) {
	const window = 64
	for _, size := range []int{8, 64 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("shm/%d", size), func(b *testing.B) {
			hs := make([]*rma.Handle, 0, window)
			pair(b, rma.TransportShm, size, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, buf []byte) error {
				hs = hs[:0]
				for range window {
					h, err := rt.NbPut(ctx, buf, seg, 1, 0)
					if err != nil {
						return err
					}
					hs = append(hs, h)
				}
				for _, h := range hs {
					if err := h.Wait(ctx); err != nil {
						return err
					}
				}
				return rt.Fence(ctx, 1)
			})
			b.SetBytes(int64(size) * window)
		})
	}
}
