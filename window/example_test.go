package window_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
	"github.com/goarmci/goarmci/window"
)

// Active target: between two fences (MPI_Win_fence) every rank puts its rank number into
// slot rank of rank 0's window; after the closing fence rank 0 sees every value.
func Example() {
	ctx := context.Background()
	var slots []uint64
	err := rmatest.Start(ctx, 3, func(ctx context.Context, rt *rma.Runtime) error {
		w, err := window.Allocate(ctx, rt, 8*rt.Size(), 8) // MPI_Win_allocate: 3 slots of 8 bytes
		if err != nil {
			return err
		}
		if err := w.Fence(ctx, window.ModeNoPrecede); err != nil { // opens the epoch
			return err
		}
		val := binary.NativeEndian.AppendUint64(nil, uint64(10*(rt.Rank()+1)))
		if err := w.Put(ctx, val, 0, rt.Rank()); err != nil { // target 0, displacement rank·8 bytes
			return err
		}
		if err := w.Fence(ctx, window.ModeNoSucceed); err != nil { // completes every Put
			return err
		}
		if rt.Rank() == 0 {
			local := w.Local()
			for i := range rt.Size() {
				slots = append(slots, binary.NativeEndian.Uint64(local[8*i:]))
			}
		}
		return w.Free(ctx)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(slots)
	// Output:
	// [10 20 30]
}

// Passive target: each rank locks rank 0's window (MPI_Win_lock, no action by rank 0),
// accumulates into one float64 (MPI_Accumulate with MPI_SUM) and unlocks, which completes
// the operation at the target.
func ExampleWindow_Accumulate() {
	ctx := context.Background()
	var total float64
	err := rmatest.Start(ctx, 4, func(ctx context.Context, rt *rma.Runtime) error {
		w, err := window.Allocate(ctx, rt, 8, 8)
		if err != nil {
			return err
		}
		x := binary.NativeEndian.AppendUint64(nil, math.Float64bits(0.5*float64(rt.Rank()+1)))
		if err := w.Lock(ctx, window.LockShared, 0, 0); err != nil { // accumulates may share the lock
			return err
		}
		if err := w.Accumulate(ctx, x, window.Float64, 0, 0, window.OpSum); err != nil {
			return err
		}
		if err := w.Unlock(ctx, 0); err != nil {
			return err
		}
		if err := rt.Barrier(ctx); err != nil { // every rank has unlocked
			return err
		}
		if rt.Rank() == 0 {
			total = math.Float64frombits(binary.NativeEndian.Uint64(w.Local()))
		}
		return w.Free(ctx)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(total) // 0.5 + 1 + 1.5 + 2
	// Output:
	// 5
}
