package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/window"
)

// interleaveOps is the number of puts, and of gets, per epoch of RunInterleave ([Vishnu07 §5.3.4]:
// 16 + 16).
const interleaveOps = 16

// RunInterleave is the interleaving test of [Vishnu07 §5.3.4] on MPI-2 windows (package window):
// per fence epoch rank 0 issues 16 MPI_Put and 16 MPI_Get of one size to
// rank 1 (different displacements), then MPI_Win_fence; once with the window's reordering
// policy off (window.Reorder(false): issued in program order, puts then gets) and once on
// (interleaved, so both directions of a full-duplex link carry data at once). MB/s counts the
// bytes of both directions, 10^6 B/s; epochs until o.Bytes moved after one warm-up epoch.
// Columns "Reorder off (MB/s)", "Reorder on (MB/s)" and "On/off"; one row per size of o.Sizes.
//
// Collective (every rank fences every epoch); rank 0 returns the Result, the others nil.
// Errors: ErrOptions, ErrRanks, and the window's and rma's errors.
func RunInterleave(ctx context.Context, rt *rma.Runtime, o ScenarioOptions) (*Result, error) {
	o, err := o.Check(ScenarioInterleave)
	if err != nil {
		return nil, err
	}
	if rt.Size() < 2 {
		return nil, fmt.Errorf("%w: interleave needs 2 ranks, the job has %d", ErrRanks, rt.Size())
	}
	sizes := slices.Clone(o.Sizes)
	slices.Sort(sizes)
	maxSize := slices.Max(sizes)
	bufs := make([][]byte, 2*interleaveOps)
	for k := range bufs {
		bufs[k] = make([]byte, maxSize)
	}
	me := rt.Rank()
	var rows []Row
	for _, size := range sizes {
		row := Row{Size: size, Values: make([]float64, 3)}
		for i, reorder := range []bool{false, true} {
			v, err := interleaveOnce(ctx, rt, bufs, size, o.Bytes, reorder)
			if err != nil {
				return nil, fmt.Errorf("bench: interleave size %d reorder %v: %w", size, reorder, err)
			}
			row.Values[i] = v
		}
		if row.Values[0] > 0 {
			row.Values[2] = row.Values[1] / row.Values[0]
		}
		rows = append(rows, row)
	}
	if me != origin {
		return nil, nil
	}
	return &Result{
		Name: ScenarioInterleave, Title: "# goarmci MPI_Put/MPI_Get Interleaving Test", KeyLabel: "Size",
		Columns: []string{colReorderOff, colReorderOn, colRatio}, Rows: rows,
		Transport: rt.TransportTo(target), Ranks: rt.Size(),
		Header: []string{
			fmt.Sprintf("Rails: %d, policy %s", rt.Rails(target).Len(), policyName(rt.Rails(target).Policy())),
			fmt.Sprintf("Epoch: %d MPI_Put + %d MPI_Get of one size, MPI_Win_fence (window.Allocate); MB/s of both directions", interleaveOps, interleaveOps),
		},
	}, nil
}

// interleaveOnce allocates a window with the reordering policy on or off and times the epochs.
func interleaveOnce(ctx context.Context, rt *rma.Runtime, bufs [][]byte, size, budget int, reorder bool) (float64, error) {
	w, err := window.Allocate(ctx, rt, 2*interleaveOps*size, 1, window.Reorder(reorder))
	if err != nil {
		return 0, err
	}
	defer w.Free(ctx)
	if err := w.Fence(ctx, window.ModeNoPrecede); err != nil {
		return 0, err
	}
	epoch := func() error {
		if rt.Rank() == origin {
			for k := 0; k < interleaveOps; k++ {
				if err := w.Put(ctx, bufs[k][:size], target, k*size); err != nil {
					return err
				}
			}
			for k := interleaveOps; k < 2*interleaveOps; k++ {
				if err := w.Get(ctx, bufs[k][:size], target, k*size); err != nil {
					return err
				}
			}
		}
		return w.Fence(ctx, 0)
	}
	if err := epoch(); err != nil { // warm-up
		return 0, err
	}
	n := max(2, budget/(2*interleaveOps*size))
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := epoch(); err != nil {
			return 0, err
		}
	}
	el := time.Since(t0)
	if err := w.Fence(ctx, window.ModeNoSucceed); err != nil {
		return 0, err
	}
	return float64(2*interleaveOps*size*n) / el.Seconds() / 1e6, nil
}
