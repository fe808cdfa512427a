package globalarray_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

var exampleJobs atomic.Int64

// startRanks runs body on n ranks, goroutines of this process joined by the in-process
// bootstrap of package rmatest (in a real job, rma.Init(ctx, nil) finds its rank, size and
// rendezvous from goarmci run, srun or mpirun), and finalizes them.
func startRanks(ctx context.Context, n int, body func(ctx context.Context, rt *rma.Runtime) error) error {
	g := rmatest.NewGroup(n)
	job := fmt.Sprintf("gaexample-%d-%d", os.Getpid(), exampleJobs.Add(1))
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt, err := rma.Init(ctx, &rma.Config{Bootstrap: g.Member(i), Transport: rma.TransportShm, HostID: "example", Job: job})
			if err != nil {
				errs[i] = err
				g.Close()
				return
			}
			if errs[i] = body(ctx, rt); errs[i] != nil {
				g.Close()
			}
			errs[i] = errors.Join(errs[i], rt.Finalize(ctx))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Two ranks share a 4×6 array of float64 (NGA_Create): each adds its patch of ones, scaled
// by its rank + 1, over the same middle columns (NGA_Acc), and rank 0 reads the whole array
// (NGA_Get) after GA_Sync.
func Example() {
	ctx := context.Background()
	var owners []string
	var rows [][]float64
	err := startRanks(ctx, 2, func(ctx context.Context, rt *rma.Runtime) error {
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
	err := startRanks(ctx, 3, func(ctx context.Context, rt *rma.Runtime) error {
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
