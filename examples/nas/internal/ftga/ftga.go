// Package ftga is the NPB FT kernel on goarmci's Global Arrays layer.
//
// The complex field is held twice as a 3-D global array of dims (z, y, x) = (nz, ny, nx), x
// fastest, in two distributions (NGA_Create_irreg): u in slabs of z-planes, one per rank, where
// every x- and y-line is whole, and v in slabs of y-rows, where every z-line is whole. The 3-D
// FFT transforms x and y in u, redistributes, and transforms z in v (NPB's 1-D layout); the
// inverse runs backwards. The redistribution — NPB's transpose and its MPI_Alltoall — is one
// NGA_Get per rank of its own block of the other distribution, straight into its NGA_Access
// storage: from each other rank a strided patch whose contiguous runs are the x-rows of one
// z-plane in the y-range of the v block (one run per plane), the same bytes and the same number
// of messages as the all-to-all, and no local transposition before or after (the z transform
// reads its lines with a stride instead). One rank holds the whole grid in u
// and transforms it in place (NPB's 0-D layout).
//
// Ordering: a GA_Sync before each redistribution makes every rank's block complete before it
// is read; after the inverse redistribution each step's checksum is a GA_Dgop "+" (of the
// ranks' shares), which no rank leaves before every rank has entered it, so no rank overwrites
// v while another still reads it. The spectrum (NPB's u0) and the evolution factors stay in
// each rank's memory, in v's distribution.
//
// Source: [NPB] NPB 3.4 FT (ft.f: fft, transpose_xy_z / transpose_x_yz of the 1-D layout,
// evolve, checksum); GA's NGA_Create_irreg, NGA_Access, NGA_Get, GA_Sync, GA_Dgop, GA_Brdcst.
package ftga

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/goarmci/goarmci/examples/nas/internal/ft"
	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/rma"
)

// Errors.
var (
	// ErrRanks is returned when there are more ranks than z-planes or y-rows to give them.
	ErrRanks = errors.New("ftga: more ranks than planes of the grid")
	// ErrLayout is returned when a rank's storage does not have the shape of its slab.
	ErrLayout = errors.New("ftga: local block of unexpected shape")
)

// solver is one rank's part of the distributed FT.
type solver struct {
	rt     *rma.Runtime
	p      ft.Params
	ua, va *globalarray.Array[complex128] // va is nil on one rank (v is u)
	ub, vb ft.Block                       // this rank's slab of u and of v, in place
	// this rank's slab of each distribution as a patch of the global array
	ulo, uhi, vlo, vhi []int
	state              []complex128 // the spectrum, in v's distribution
}

// Run runs FT of class p on every rank of rt (collective: every rank must call it) and returns
// the result, the same on every rank. If log is not nil, the initialization time and NPB's
// "T = ... Checksum = ..." lines are written to it (pass it on one rank only). Errors:
// ft.ErrRange for bad parameters and ErrRanks for more ranks than ny or nz (every rank returns
// them before any collective), ErrLayout, errors of the GA layer wrapped.
func Run(ctx context.Context, rt *rma.Runtime, p ft.Params, log io.Writer) (res ft.Result, err error) {
	if err := p.Validate(); err != nil {
		return ft.Result{}, err
	}
	size := rt.Size()
	if size > p.NZ || size > p.NY {
		return ft.Result{}, fmt.Errorf("%w: %d ranks, %d z-planes, %d y-rows", ErrRanks, size, p.NZ, p.NY)
	}
	s := &solver{rt: rt, p: p}
	defer func() {
		if derr := s.destroy(ctx); derr != nil && err == nil {
			err = derr
		}
	}()
	if err := s.setup(ctx); err != nil {
		return ft.Result{}, err
	}

	sums, secs, err := ft.Timed(p.NIter, log, func(niter int, log io.Writer) ([]complex128, error) {
		return s.steps(ctx, niter, log)
	}, func() error {
		if err := globalarray.Sync(ctx, rt); err != nil {
			return fmt.Errorf("ftga: sync: %w", err)
		}
		return nil
	})
	if err != nil {
		return ft.Result{}, err
	}

	slowest := []float64{secs}
	if err := globalarray.GopMax(ctx, rt, slowest); err != nil {
		return ft.Result{}, fmt.Errorf("ftga: time max: %w", err)
	}
	// every rank reports rank 0's checksums, so all agree on the verification
	if err := globalarray.Brdcst(ctx, rt, 0, sums); err != nil {
		return ft.Result{}, fmt.Errorf("ftga: broadcast checksums: %w", err)
	}
	ok, rel := p.Check(sums)
	return ft.Result{Params: p, Sums: sums, Seconds: slowest[0], Verified: ok, RelErr: rel}, nil
}

// cuts returns the first index of each of parts near-equal blocks of n.
func cuts(n, parts int) []int {
	s := make([]int, parts)
	for i := range s {
		s[i] = i * n / parts
	}
	return s
}

// setup creates u (z-slabs) and, on more than one rank, v (y-slabs), and takes this rank's
// slab of each in place.
func (s *solver) setup(ctx context.Context) error {
	p, size := s.p, s.rt.Size()
	dims := []int{p.NZ, p.NY, p.NX}
	var err error
	if s.ua, s.ub, s.ulo, s.uhi, err = s.create(ctx, "ft.u", dims, [][]int{cuts(p.NZ, size), {0}, {0}}); err != nil {
		return err
	}
	if size == 1 {
		s.vb, s.vlo, s.vhi = s.ub, s.ulo, s.uhi
	} else if s.va, s.vb, s.vlo, s.vhi, err = s.create(ctx, "ft.v", dims, [][]int{{0}, cuts(p.NY, size), {0}}); err != nil {
		return err
	}
	s.state = make([]complex128, s.vb.Len())
	return nil
}

// create makes one distribution of the field and returns it with this rank's block in place
// (accessed until destroy) and the block's bounds.
func (s *solver) create(ctx context.Context, name string, dims []int, starts [][]int) (*globalarray.Array[complex128], ft.Block, []int, []int, error) {
	a, err := globalarray.Create[complex128](ctx, s.rt, name, dims, globalarray.Irregular(starts))
	if err != nil {
		return nil, ft.Block{}, nil, nil, fmt.Errorf("ftga: create %s: %w", name, err)
	}
	data, ld, err := a.Access()
	if err != nil {
		_ = a.Destroy(ctx)
		return nil, ft.Block{}, nil, nil, fmt.Errorf("ftga: access %s: %w", name, err)
	}
	lo, hi := a.Distribution(s.rt.Rank())
	b := ft.Block{Data: data, NZ: hi[0] - lo[0] + 1, NY: hi[1] - lo[1] + 1, NX: hi[2] - lo[2] + 1, Z0: lo[0], Y0: lo[1]}
	if lo[2] != 0 || b.NX != dims[2] || len(ld) != 2 || ld[0] != b.NY || ld[1] != b.NX || len(data) < b.Len() {
		a.Release()
		_ = a.Destroy(ctx)
		return nil, ft.Block{}, nil, nil, fmt.Errorf("%w: %s block [%v, %v], leading dimensions %v, %d elements", ErrLayout, name, lo, hi, ld, len(data))
	}
	return a, b, lo, hi, nil
}

// destroy ends the accesses and frees the arrays (collective).
func (s *solver) destroy(ctx context.Context) error {
	var first error
	for _, a := range []*globalarray.Array[complex128]{s.va, s.ua} {
		if a == nil {
			continue
		}
		a.Release()
		if err := a.Destroy(ctx); err != nil && first == nil {
			first = fmt.Errorf("ftga: destroy: %w", err)
		}
	}
	return first
}

// redistribute fills this rank's block of the distribution dst (bounds lo, hi) from the array
// src after a GA_Sync: NGA_Get of the block into its own storage.
func (s *solver) redistribute(ctx context.Context, src *globalarray.Array[complex128], dst ft.Block, lo, hi []int) error {
	if err := src.Sync(ctx); err != nil {
		return fmt.Errorf("ftga: sync: %w", err)
	}
	if err := src.Get(ctx, lo, hi, dst.Data[:dst.Len()], nil); err != nil {
		return fmt.Errorf("ftga: transpose: %w", err)
	}
	return nil
}

// steps runs ft.Steps on this rank's blocks with the redistributions and the checksum's
// GA_Dgop.
func (s *solver) steps(ctx context.Context, niter int, log io.Writer) ([]complex128, error) {
	ex := ft.Exchange{Sum: func(sum []complex128) error {
		if err := globalarray.GopSum(ctx, s.rt, sum); err != nil {
			return fmt.Errorf("ftga: checksum: %w", err)
		}
		return nil
	}}
	if s.va != nil {
		ex.ToV = func() error { return s.redistribute(ctx, s.ua, s.vb, s.vlo, s.vhi) }
		ex.ToU = func() error { return s.redistribute(ctx, s.va, s.ub, s.ulo, s.uhi) }
	}
	return ft.Steps(s.p, s.ub, s.vb, s.state, niter, ex, log)
}
