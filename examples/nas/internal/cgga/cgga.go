// Package cgga is the NPB CG kernel on goarmci's Global Arrays layer.
//
// The vectors x, z, p, q, r are 1-D global arrays of NA float64, block-distributed by rows
// (NGA_Create). Each rank generates the matrix rows of its block (the generator is deterministic,
// see cg.MakeA) and keeps them in CSR. Vector updates work on the local block (NGA_Access); dot
// products are local sums combined with GA_Dgop "+" (GopSum).
//
// The matrix-vector product needs the whole of p, since random rows touch nearly every column.
// Each rank keeps the whole of p: per iteration the ranks all-gather their blocks of r, each
// followed by the rank's part of the dot product r·r (globalarray.AllGather, MPI_Allgatherv in a
// GA program), sum the parts in rank order, and update every block of p from r as its owner would
// (cg.UpdateP, so every copy of p holds the owner's bits). That one all-gather is the iteration's
// second reduction and its exchange of p in one round; with the reduction of p·q an iteration
// costs two rounds of messages instead of three. Once per outer iteration the whole of z is
// gathered for the residual. Every block travels once to every rank, with no GA_Sync and no wait
// for acknowledgments, as NPB-MPI's exchanges do, and no rank waits for another's answer to a Get
// while that one computes.
//
// Source: NPB 3.x CG (conj_grad, main loop); GA's NGA_Create/NGA_Access/GA_Dgop/GA_Sync.
package cgga

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/goarmci/goarmci/examples/nas/internal/cg"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/rma"
)

// ErrLayout is returned when the vectors of one rank are not distributed alike.
var ErrLayout = errors.New("cgga: vectors distributed differently")

// solver is one rank's part of the distributed CG.
type solver struct {
	rt   *rma.Runtime
	p    cg.Params
	m    *cg.Matrix
	vecs [5]*globalarray.Array[float64] // x, z, p, q, r
	x    []float64                      // local blocks (NGA_Access)
	z    []float64
	pl   []float64
	q    []float64
	r    []float64
	full []float64 // the whole of p (conjGrad's iterations) or z (gather)
	red  [2]float64
	// first and last bound this rank's block; offs[k] is rank k's first element (offs[np] = NA)
	first, last int
	offs        []int
	// rbuf holds every rank's block of r followed by its part of r·r: rank k's at roffs[k], its
	// part at roffs[k+1]-1 (gatherR)
	rbuf  []float64
	roffs []int
}

// Run runs CG of class p on every rank of rt (collective: every rank must call it) and returns
// the result, the same on every rank. If log is not nil the per-iteration ||r|| and zeta lines
// are written to it (pass it on one rank only). Errors: cg.ErrRange for bad parameters (every
// rank returns it before any collective), errors of the GA layer wrapped.
func Run(ctx context.Context, rt *rma.Runtime, p cg.Params, log io.Writer) (res cg.Result, err error) {
	if err := p.Validate(); err != nil {
		return cg.Result{}, err
	}
	s := &solver{rt: rt, p: p}
	names := [5]string{"cg.x", "cg.z", "cg.p", "cg.q", "cg.r"}
	defer func() {
		for i := range s.vecs {
			if s.vecs[i] != nil {
				s.vecs[i].Release()
				if derr := s.vecs[i].Destroy(ctx); derr != nil && err == nil {
					err = fmt.Errorf("cgga: destroy %s: %w", names[i], derr)
				}
			}
		}
	}()
	for i, name := range names {
		a, err := globalarray.Create[float64](ctx, rt, name, []int{p.NA})
		if err != nil {
			return cg.Result{}, fmt.Errorf("cgga: create %s: %w", name, err)
		}
		s.vecs[i] = a
	}
	lo, hi := s.vecs[0].Distribution(rt.Rank())
	first, last := lo[0], hi[0]+1 // last exclusive; a rank owning nothing has lo 0, hi -1
	if last < first {
		first, last = 0, 0
	}
	locals := [5]*[]float64{&s.x, &s.z, &s.pl, &s.q, &s.r}
	for i, a := range s.vecs {
		l, h := a.Distribution(rt.Rank())
		if l[0] != lo[0] || h[0] != hi[0] {
			return cg.Result{}, fmt.Errorf("%w: %s owns [%d,%d], x owns [%d,%d]", ErrLayout, names[i], l[0], h[0], lo[0], hi[0])
		}
		data, _, err := a.Access()
		if err != nil {
			return cg.Result{}, fmt.Errorf("cgga: access %s: %w", names[i], err)
		}
		if len(data) < last-first {
			return cg.Result{}, fmt.Errorf("%w: %s local block has %d elements, want %d", ErrLayout, names[i], len(data), last-first)
		}
		*locals[i] = data[:last-first]
	}
	s.m, err = cg.MakeA(p, first, last)
	if err != nil {
		return cg.Result{}, err
	}
	s.first, s.last = first, last
	s.full = make([]float64, p.NA)
	s.offs = make([]int, rt.Size()+1)
	for k := range rt.Size() {
		l, h := s.vecs[2].Distribution(k)
		s.offs[k+1] = s.offs[k]
		if h[0] >= l[0] {
			if l[0] != s.offs[k] {
				return cg.Result{}, fmt.Errorf("%w: rank %d's block starts at %d, not %d", ErrLayout, k, l[0], s.offs[k])
			}
			s.offs[k+1] = h[0] + 1
		}
	}
	if s.offs[rt.Size()] != p.NA {
		return cg.Result{}, fmt.Errorf("%w: the blocks end at %d, not %d", ErrLayout, s.offs[rt.Size()], p.NA)
	}
	s.rbuf = make([]float64, p.NA+rt.Size())
	s.roffs = make([]int, rt.Size()+1)
	for k := range s.roffs {
		s.roffs[k] = s.offs[k] + k
	}

	nnz := []int64{int64(s.m.NNZ())}
	if err := globalarray.GopSum(ctx, rt, nnz); err != nil {
		return cg.Result{}, fmt.Errorf("cgga: nnz sum: %w", err)
	}

	fill(s.x, 1)
	if _, _, err := s.outer(ctx); err != nil { // untimed: touch all pages
		return cg.Result{}, err
	}
	fill(s.x, 1)
	if err := globalarray.Sync(ctx, rt); err != nil {
		return cg.Result{}, fmt.Errorf("cgga: sync: %w", err)
	}
	var t npb.Timer
	t.Start()
	var zeta, rnorm float64
	for it := 1; it <= p.NIter; it++ {
		zeta, rnorm, err = s.outer(ctx)
		if err != nil {
			return cg.Result{}, err
		}
		if log != nil {
			if it == 1 {
				fmt.Fprintf(log, "\n   iteration           ||r||                 zeta\n")
			}
			fmt.Fprintf(log, "    %5d       %20.14E%20.13f\n", it, rnorm, zeta)
		}
	}
	if err := globalarray.Sync(ctx, rt); err != nil {
		return cg.Result{}, fmt.Errorf("cgga: sync: %w", err)
	}
	t.Stop()
	secs := []float64{t.Seconds()}
	if err := globalarray.GopMax(ctx, rt, secs); err != nil {
		return cg.Result{}, fmt.Errorf("cgga: time max: %w", err)
	}
	// every rank reports rank 0's zeta, so all agree on the verification
	zr := []float64{zeta, rnorm}
	if err := globalarray.Brdcst(ctx, rt, 0, zr); err != nil {
		return cg.Result{}, fmt.Errorf("cgga: broadcast zeta: %w", err)
	}
	ok, rel := p.Verify(zr[0])
	return cg.Result{Params: p, Zeta: zr[0], RNorm: zr[1], Seconds: secs[0], Verified: ok,
		RelErr: rel, NNZ: int(nnz[0])}, nil
}

func fill(v []float64, c float64) {
	for i := range v {
		v[i] = c
	}
}

// sum combines vals over all ranks (GA_Dgop "+").
func (s *solver) sum(ctx context.Context, vals ...float64) ([]float64, error) {
	buf := s.red[:len(vals)]
	copy(buf, vals)
	if err := globalarray.GopSum(ctx, s.rt, buf); err != nil {
		return nil, fmt.Errorf("cgga: dgop: %w", err)
	}
	return buf, nil
}

// gather makes s.full the whole vector whose local block is local (p or z): it copies its own
// block in and all-gathers the others'.
func (s *solver) gather(ctx context.Context, local []float64) error {
	copy(s.full[s.first:s.last], local)
	if err := globalarray.AllGather(ctx, s.rt, s.full, s.offs); err != nil {
		return fmt.Errorf("cgga: %w", err)
	}
	return nil
}

// gatherR all-gathers every rank's block of r with its part of r·r (mine: part) into rbuf and
// returns r·r, the parts summed in rank order (the same bits on every rank).
func (s *solver) gatherR(ctx context.Context, part float64) (float64, error) {
	me := s.rt.Rank()
	copy(s.rbuf[s.roffs[me]:], s.r)
	s.rbuf[s.roffs[me+1]-1] = part
	if err := globalarray.AllGather(ctx, s.rt, s.rbuf, s.roffs); err != nil {
		return 0, fmt.Errorf("cgga: %w", err)
	}
	rr := 0.0
	for k := 1; k < len(s.roffs); k++ {
		rr += s.rbuf[s.roffs[k]-1]
	}
	return rr, nil
}

// updateP sets every block of the whole p from the gathered r: p = r + beta·p (cg.UpdateP, as
// each block's owner computes it), or p = r when first; then my block of p from it.
func (s *solver) updateP(beta float64, first bool) {
	for k := 1; k < len(s.offs); k++ {
		p, r := s.full[s.offs[k-1]:s.offs[k]], s.rbuf[s.roffs[k-1]:s.roffs[k]-1]
		if first {
			copy(p, r)
		} else {
			cg.UpdateP(beta, p, r)
		}
	}
	copy(s.pl, s.full[s.first:s.last])
}

// conjGrad is NPB's conj_grad on this rank's rows; it returns ||x − A·z||.
func (s *solver) conjGrad(ctx context.Context) (float64, error) {
	copy(s.r, s.x)
	clear(s.q)
	clear(s.z)
	rho, err := s.gatherR(ctx, cg.Dot(s.r, s.r))
	if err != nil {
		return 0, err
	}
	s.updateP(0, true)
	var v []float64
	for cgit := 1; cgit <= cg.CGItMax; cgit++ {
		s.m.MulVec(s.full, s.q)
		if v, err = s.sum(ctx, cg.Dot(s.pl, s.q)); err != nil {
			return 0, err
		}
		alpha := rho / v[0]
		rho0 := rho
		if rho, err = s.gatherR(ctx, cg.UpdateZR(alpha, s.z, s.r, s.pl, s.q)); err != nil {
			return 0, err
		}
		s.updateP(rho/rho0, false)
	}
	if err := s.gather(ctx, s.z); err != nil {
		return 0, err
	}
	s.m.MulVec(s.full, s.r)
	if v, err = s.sum(ctx, cg.ResidualSq(s.x, s.r)); err != nil {
		return 0, err
	}
	return math.Sqrt(v[0]), nil
}

// outer is one inverse power iteration: conj_grad, zeta = shift + 1/(x·z), x = z/||z||.
func (s *solver) outer(ctx context.Context) (zeta, rnorm float64, err error) {
	rnorm, err = s.conjGrad(ctx)
	if err != nil {
		return 0, 0, err
	}
	v, err := s.sum(ctx, cg.Dot(s.x, s.z), cg.Dot(s.z, s.z))
	if err != nil {
		return 0, 0, err
	}
	xz, zz := v[0], v[1]
	cg.Scale(1/math.Sqrt(zz), s.x, s.z)
	return s.p.Shift + 1/xz, rnorm, nil
}
