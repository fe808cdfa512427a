package bench

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/rma"
)

// runAllReduce measures GA_Dgop "+" (globalarray.GopSum: rma.AllReduce of float64 elements,
// armci_msg_dgop; MPI_Allreduce of MPI_DOUBLE with MPI_SUM in place) on all ranks of the job, as
// osu_allreduce does: per message size, rank 0's mean time per call. The calls reduce the same
// buffer again and again, as the peers do; one more call after the timed ones starts from
// element i of rank k holding k+i and is checked: the sum is n·i + n(n−1)/2 (exact in float64).
func runAllReduce(ctx context.Context, rt *rma.Runtime, o Options) ([]Row, error) {
	n, me := rt.Size(), rt.Rank()
	var rows []Row
	for _, size := range o.Sizes() {
		elems := max(size/8, 1)
		buf := make([]float64, elems)
		fill := func() {
			for j := range buf {
				buf[j] = float64(me + j)
			}
		}
		fill()
		iters, skip := o.Counts(Latency, size)
		if err := rt.Barrier(ctx); err != nil {
			return nil, err
		}
		us, err := timeCalls(ctx, rt, o.Settle, iters, skip, func() error { return globalarray.GopSum(ctx, rt, buf) })
		if err != nil {
			return nil, fmt.Errorf("bench: allreduce of %d bytes: %w", size, err)
		}
		fill()
		if err := globalarray.GopSum(ctx, rt, buf); err != nil {
			return nil, fmt.Errorf("bench: allreduce of %d bytes: %w", size, err)
		}
		for j, v := range buf {
			if want := float64(n*j + n*(n-1)/2); v != want {
				return nil, fmt.Errorf("bench: allreduce of %d bytes: element %d is %v, want %v", size, j, v, want)
			}
		}
		rows = append(rows, Row{Size: elems * 8, Values: []float64{us}})
	}
	return rows, nil
}
