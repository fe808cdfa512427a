package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/goarmci/goarmci/rma"
)

// RunRails measures, from rank 0 to rank 1, put and get bandwidth at every size of o.Sizes and
// put and get latency at every size of o.LatSizes, over whatever rails and policy the runtime
// was initialized with (GOARMCI_RAILS, GOARMCI_STRIPE_POLICY): the rail-scaling benchmark of
// [Vishnu07 ch. 4] (multi-rail), 7 (adaptive striping) and 8 (BSS). Bandwidth: windows of
// o.Window ARMCI_NbPut (ARMCI_NbGet) of one size, each completed by waiting the handles and
// ARMCI_Fence, until o.Bytes moved after one warm-up window; MB/s = 10^6 B/s. Latency: blocking
// ARMCI_Put + ARMCI_Fence, ARMCI_Get; µs per operation. Columns ColPutBW, ColGetBW, ColPutLat,
// ColGetLat; a value not measured at a size is 0.
//
// Collective over a job of at least 2 ranks; rank 0 returns the Result, the others nil. Errors:
// ErrOptions, ErrRanks, and rma's errors.
func RunRails(ctx context.Context, rt *rma.Runtime, o ScenarioOptions) (*Result, error) {
	o, err := o.Check(ScenarioRails)
	if err != nil {
		return nil, err
	}
	if rt.Size() < 2 {
		return nil, fmt.Errorf("%w: rails needs 2 ranks, the job has %d", ErrRanks, rt.Size())
	}
	sizes := slices.Clone(o.Sizes)
	for _, s := range o.LatSizes {
		if !slices.Contains(sizes, s) {
			sizes = append(sizes, s)
		}
	}
	slices.Sort(sizes)
	maxSize := slices.Max(sizes)
	seg, err := rt.Malloc(ctx, o.Window*maxSize)
	if err != nil {
		return nil, err
	}
	defer seg.Free(ctx)
	buf := make([]byte, maxSize)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	me := rt.Rank()
	hs := make([]*rma.Handle, 0, o.Window)
	window := func(get bool, size int) error {
		hs = hs[:0]
		for k := 0; k < o.Window; k++ {
			var h *rma.Handle
			var err error
			if get {
				h, err = rt.NbGet(ctx, seg, target, k*size, buf[:size])
			} else {
				h, err = rt.NbPut(ctx, buf[:size], seg, target, k*size)
			}
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
		return rt.Fence(ctx, target)
	}
	bw := func(get bool, size int) (float64, error) {
		if err := window(get, size); err != nil { // warm-up: streams, adaptive weights
			return 0, err
		}
		n := max(2, o.Bytes/(size*o.Window))
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if err := window(get, size); err != nil {
				return 0, err
			}
		}
		return float64(size) * float64(o.Window*n) / time.Since(t0).Seconds() / 1e6, nil
	}
	lat := func(get bool, size int) (float64, error) {
		op := func() error {
			if get {
				return rt.Get(ctx, seg, target, 0, buf[:size])
			}
			if err := rt.Put(ctx, buf[:size], seg, target, 0); err != nil {
				return err
			}
			return rt.Fence(ctx, target)
		}
		n := min(1000, max(10, o.Bytes/(4*size)))
		for i := 0; i < max(2, n/10); i++ {
			if err := op(); err != nil {
				return 0, err
			}
		}
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if err := op(); err != nil {
				return 0, err
			}
		}
		return usPer(time.Since(t0), n), nil
	}
	var rows []Row
	for _, size := range sizes {
		if err := rt.Barrier(ctx); err != nil {
			return nil, err
		}
		row := Row{Size: size, Values: make([]float64, 4)}
		if me == origin {
			if slices.Contains(o.Sizes, size) {
				if row.Values[0], err = bw(false, size); err == nil {
					row.Values[1], err = bw(true, size)
				}
			}
			if err == nil && slices.Contains(o.LatSizes, size) {
				if row.Values[2], err = lat(false, size); err == nil {
					row.Values[3], err = lat(true, size)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("bench: rails size %d: %w", size, err)
			}
		}
		rows = append(rows, row)
	}
	if err := rt.Barrier(ctx); err != nil {
		return nil, err
	}
	if me != origin {
		return nil, nil
	}
	ch := rt.Rails(target)
	res := &Result{
		Name: ScenarioRails, Title: "# goarmci multi-rail Put/Get Test", KeyLabel: "Size",
		Columns:   []string{ColPutBW, ColGetBW, ColPutLat, ColGetLat},
		Rows:      rows,
		Transport: rt.TransportTo(target), Ranks: rt.Size(),
		Header: []string{
			fmt.Sprintf("Rails: %d, policy %s", ch.Len(), policyName(ch.Policy())),
			fmt.Sprintf("Bandwidth: windows of %d ARMCI_NbPut/NbGet + ARMCI_Fence; latency: ARMCI_Put + ARMCI_Fence, ARMCI_Get", o.Window),
		},
	}
	return res, nil
}

func policyName(p string) string {
	if p == "" {
		return "none (one rail)"
	}
	return p
}
