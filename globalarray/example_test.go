package globalarray_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// Two ranks share a 4×6 array of float64 (NGA_Create): each adds its patch of ones, scaled
// by its rank + 1, over the same middle columns (NGA_Acc), and rank 0 reads the whole array
// (NGA_Get) after GA_Sync.
func Example() {
	ctx := context.Background()
	var owners []string
	var rows [][]float64
	err := rmatest.Start(ctx, 2, func(ctx context.Context, rt *rma.Runtime) error {
		a, err := globalarray.Create[float64](ctx, rt, "A", []int{4, 6}) // zero-filled
		if err != nil {
			return err
		}
		ones := []float64{1, 1, 1, 1, 1, 1, 1, 1} // a 4×2 patch
		lo, hi := []int{0, 2}, []int{3, 3}        // rows 0..3, columns 2..3 (inclusive)
		if err := a.Acc(ctx, lo, hi, ones, []int{2}, float64(rt.Rank()+1)); err != nil {
			return err
		}
		if err := globalarray.Sync(ctx, rt); err != nil {
			return err
		}
		if rt.Rank() == 0 {
			for r := range rt.Size() {
				plo, phi := a.Distribution(r)
				owners = append(owners, fmt.Sprintf("rank %d owns %v..%v", r, plo, phi))
			}
			buf := make([]float64, 4*6)
			if err := a.Get(ctx, []int{0, 0}, []int{3, 5}, buf, []int{6}); err != nil {
				return err
			}
			for i := range 4 {
				rows = append(rows, buf[6*i:6*i+6])
			}
		}
		if err := globalarray.Sync(ctx, rt); err != nil {
			return err
		}
		return a.Destroy(ctx)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range owners {
		fmt.Println(o)
	}
	for _, r := range rows {
		fmt.Println(r)
	}
	// Output:
	// rank 0 owns [0 0]..[3 2]
	// rank 1 owns [0 3]..[3 5]
	// [0 0 3 3 0 0]
	// [0 0 3 3 0 0]
	// [0 0 3 3 0 0]
	// [0 0 3 3 0 0]
}

// A task counter (NGA_Read_inc): three ranks draw task numbers from one shared element until
// the 10 tasks are gone; which rank gets which task depends on timing, the tasks do not.
func ExampleArray_ReadInc() {
	ctx := context.Background()
	var done [10]atomic.Int32
	err := rmatest.Start(ctx, 3, func(ctx context.Context, rt *rma.Runtime) error {
		counter, err := globalarray.Create[int64](ctx, rt, "counter", []int{1}) // zero-filled
		if err != nil {
			return err
		}
		for {
			task, err := counter.ReadInc(ctx, []int{0}, 1)
			if err != nil {
				return err
			}
			if task >= int64(len(done)) {
				break
			}
			done[task].Add(1)
		}
		if err := globalarray.Sync(ctx, rt); err != nil {
			return err
		}
		return counter.Destroy(ctx)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	times := make([]int32, len(done))
	for task := range done {
		times[task] = done[task].Load()
	}
	fmt.Println("times each task was drawn:", times)
	// Output:
	// times each task was drawn: [1 1 1 1 1 1 1 1 1 1]
}
