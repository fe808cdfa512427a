package rma_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// Every rank puts a value into the next rank's part of a segment (ARMCI_Put), waits at the
// barrier, reads what it received in its own part, and gets (ARMCI_Get) what it put.
func Example() {
	ctx := context.Background()
	received := make([]uint64, 2)
	readBack := make([]uint64, 2)
	err := rmatest.Start(ctx, 2, func(ctx context.Context, rt *rma.Runtime) error {
		seg, err := rt.Malloc(ctx, 8) // ARMCI_Malloc: 8 bytes on every rank
		if err != nil {
			return err
		}
		next := (rt.Rank() + 1) % rt.Size()
		src := binary.NativeEndian.AppendUint64(nil, uint64(100+rt.Rank()))
		if err := rt.Put(ctx, src, seg, next, 0); err != nil { // src may be reused at once
			return err
		}
		if err := rt.Barrier(ctx); err != nil { // every Put is complete at its target
			return err
		}
		received[rt.Rank()] = binary.NativeEndian.Uint64(seg.Local())
		dst := make([]byte, 8)
		if err := rt.Get(ctx, seg, next, 0, dst); err != nil {
			return err
		}
		readBack[rt.Rank()] = binary.NativeEndian.Uint64(dst)
		if err := rt.Barrier(ctx); err != nil {
			return err
		}
		return seg.Free(ctx) // collective, as ARMCI_Free
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for rank := range received {
		fmt.Printf("rank %d received %d, read %d back from rank %d\n", rank, received[rank], readBack[rank], (rank+1)%2)
	}
	// Output:
	// rank 0 received 101, read 100 back from rank 1
	// rank 1 received 100, read 101 back from rank 0
}

// Three ranks add scaled float64 vectors into rank 0's part (ARMCI_Acc: dst += scale·src,
// atomic per element), then rank 0 reads the sums.
func ExampleRuntime_Acc() {
	ctx := context.Background()
	var sums []float64
	err := rmatest.Start(ctx, 3, func(ctx context.Context, rt *rma.Runtime) error {
		seg, err := rt.Malloc(ctx, 2*8)
		if err != nil {
			return err
		}
		src := make([]byte, 0, 16)
		for _, v := range []float64{1, 10} {
			src = binary.NativeEndian.AppendUint64(src, math.Float64bits(v))
		}
		scale := complex(float64(rt.Rank()+1), 0) // 1, 2, 3
		if err := rt.Acc(ctx, rma.AccFloat64, scale, src, seg, 0, 0); err != nil {
			return err
		}
		if err := rt.Barrier(ctx); err != nil {
			return err
		}
		if rt.Rank() == 0 {
			local := seg.Local()
			for i := range 2 {
				sums = append(sums, math.Float64frombits(binary.NativeEndian.Uint64(local[8*i:])))
			}
		}
		if err := rt.Barrier(ctx); err != nil {
			return err
		}
		return seg.Free(ctx)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sums) // (1+2+3)·[1 10]
	// Output:
	// [6 60]
}

// A shared counter on rank 0: every rank takes 5 tickets with a remote fetch-and-add
// (ARMCI_Rmw); the ticket values each rank gets depend on timing, their total does not.
func ExampleRuntime_Rmw() {
	ctx := context.Background()
	var final int64
	var taken atomic.Int64
	err := rmatest.Start(ctx, 4, func(ctx context.Context, rt *rma.Runtime) error {
		seg, err := rt.Malloc(ctx, 8)
		if err != nil {
			return err
		}
		for range 5 {
			if _, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 0, 0, 1); err != nil {
				return err
			}
			taken.Add(1)
		}
		if err := rt.Barrier(ctx); err != nil {
			return err
		}
		if rt.Rank() == 0 {
			final = int64(binary.NativeEndian.Uint64(seg.Local()))
		}
		if err := rt.Barrier(ctx); err != nil {
			return err
		}
		return seg.Free(ctx)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("counter %d after %d fetch-and-adds\n", final, taken.Load())
	// Output:
	// counter 20 after 20 fetch-and-adds
}
