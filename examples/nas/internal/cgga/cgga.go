// Package cgga is the NPB CG kernel on goarmci's Global Arrays layer.
//
// The vectors x, z, p, q, r are 1-D global arrays of NA float64, block-distributed by rows
// (NGA_Create). Each rank generates the matrix rows of its block (the generator is deterministic,
// see cg.MakeA) and keeps them in CSR. Vector updates work on the local block (NGA_Access); dot
// products are local sums combined with GA_Dgop "+" (GopSum).
//
// The matrix-vector product needs the whole of p, since random rows touch nearly every column. Each
// rank keeps a replica of p: one row of an np × NA global array (NGA_Create_irreg, row k on rank
// k). The blocks travelling over the network are pushed: a rank that has updated its block of p
// Puts it into the replica of every rank it reaches over the network (NGA_NbPut) and one GA_Sync
// makes them complete, so the data travel while their consumers wait in the Sync, as NPB-MPI's
// exchanges do, and no answer to a remote Get waits for a rank that has gone back to computing
// (over tcp a Get is served by the target's reader goroutine, which then competes with the target's
// computation for its core). The blocks of the ranks reached by shared memory are pulled after the
// Sync (NGA_Get of their block of p, a copy from memory this process maps, as fast as a Put and
// without the Sync's wait for it). The two reductions that follow the product keep a rank from
// overwriting its p or a replica while another rank still reads it. The z of the residual (once per
// outer iteration) is gathered with one NGA_Get.
//
// Source: NPB 3.x CG (conj_grad, main loop); GA's NGA_Create/NGA_NbPut/NGA_Get/NGA_Access/
// GA_Dgop/GA_Sync.
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
	full []float64 // the whole of p (this rank's row of pfull) or z, gathered by Get
	red  [2]float64
	// pfull: p replicated, row k on rank k; first and last bound this rank's block
	pfull       *globalarray.Array[float64]
	first, last int
	hs          []*globalarray.Handle
	pushTo      []int    // ranks reached over the network: this rank Puts its block into their replicas
	pullFrom    [][2]int // blocks [lo, hi] of p of the ranks reached by shared memory, Got after the Sync
	lo          []int    // whole-vector patch [0, NA-1]
	hi          []int
}

// Run runs CG of class p on every rank of rt (collective: every rank must call it) and returns
// the result, the same on every rank. If log is not nil the per-iteration ||r|| and zeta lines
// are written to it (pass it on one rank only). Errors: cg.ErrRange for bad parameters (every
// rank returns it before any collective), errors of the GA layer wrapped.
func Run(ctx context.Context, rt *rma.Runtime, p cg.Params, log io.Writer) (res cg.Result, err error) {
	if err := p.Validate(); err != nil {
		return cg.Result{}, err
	}
	s := &solver{rt: rt, p: p, lo: []int{0}, hi: []int{p.NA - 1}}
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
	for k := range rt.Size() {
		switch {
		case k == rt.Rank():
		case rt.TransportTo(k) != "shm":
			s.pushTo = append(s.pushTo, k)
		default:
			if l, h := s.vecs[2].Distribution(k); h[0] >= l[0] {
				s.pullFrom = append(s.pullFrom, [2]int{l[0], h[0]})
			}
		}
	}
	if err := s.createReplica(ctx, p.NA); err != nil {
		return cg.Result{}, err
	}
	defer func() {
		s.pfull.Release()
		if derr := s.pfull.Destroy(ctx); derr != nil && err == nil {
			err = fmt.Errorf("cgga: destroy cg.pfull: %w", derr)
		}
	}()

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

// gather makes every rank's block of v visible (GA_Sync) and Gets the whole vector into s.full.
func (s *solver) gather(ctx context.Context, v *globalarray.Array[float64]) error {
	if err := globalarray.Sync(ctx, s.rt); err != nil {
		return fmt.Errorf("cgga: sync: %w", err)
	}
	if err := v.Get(ctx, s.lo, s.hi, s.full, nil); err != nil {
		return fmt.Errorf("cgga: get: %w", err)
	}
	return nil
}

// createReplica creates pfull (np × NA, row k on rank k) and points s.full at this rank's row.
func (s *solver) createReplica(ctx context.Context, na int) error {
	np := s.rt.Size()
	rows := make([]int, np)
	for k := range rows {
		rows[k] = k
	}
	a, err := globalarray.Create[float64](ctx, s.rt, "cg.pfull", []int{np, na},
		globalarray.Irregular([][]int{rows, {0}}))
	if err != nil {
		return fmt.Errorf("cgga: create cg.pfull: %w", err)
	}
	s.pfull = a
	data, _, err := a.Access()
	if err != nil {
		return fmt.Errorf("cgga: access cg.pfull: %w", err)
	}
	if len(data) < na {
		return fmt.Errorf("%w: cg.pfull local block has %d elements, want %d", ErrLayout, len(data), na)
	}
	s.full = data[:na]
	return nil
}

// spreadP makes this rank's replica hold the whole of p: it copies its own block in, Puts it into
// the replicas of the ranks it reaches over the network, Syncs, and Gets the blocks of the ranks
// it reaches by shared memory.
func (s *solver) spreadP(ctx context.Context) error {
	copy(s.full[s.first:s.last], s.pl)
	s.hs = s.hs[:0]
	var err error
	if s.last > s.first {
		for _, k := range s.pushTo {
			h, perr := s.pfull.NbPut(ctx, []int{k, s.first}, []int{k, s.last - 1}, s.pl, nil)
			if perr != nil {
				err = fmt.Errorf("cgga: put p to rank %d: %w", k, perr)
				break
			}
			s.hs = append(s.hs, h)
		}
	}
	for _, h := range s.hs {
		if werr := h.Wait(ctx); werr != nil && err == nil {
			err = fmt.Errorf("cgga: put p: %w", werr)
		}
	}
	if err != nil {
		return err
	}
	if err := globalarray.Sync(ctx, s.rt); err != nil {
		return fmt.Errorf("cgga: sync: %w", err)
	}
	for _, b := range s.pullFrom {
		if err := s.vecs[2].Get(ctx, []int{b[0]}, []int{b[1]}, s.full[b[0]:b[1]+1], nil); err != nil {
			return fmt.Errorf("cgga: get p: %w", err)
		}
	}
	return nil
}

// conjGrad is NPB's conj_grad on this rank's rows; it returns ||x − A·z||.
func (s *solver) conjGrad(ctx context.Context) (float64, error) {
	copy(s.r, s.x)
	copy(s.pl, s.r)
	clear(s.q)
	clear(s.z)
	v, err := s.sum(ctx, cg.Dot(s.r, s.r))
	if err != nil {
		return 0, err
	}
	rho := v[0]
	for cgit := 1; cgit <= cg.CGItMax; cgit++ {
		if err := s.spreadP(ctx); err != nil {
			return 0, err
		}
		s.m.MulVec(s.full, s.q)
		if v, err = s.sum(ctx, cg.Dot(s.pl, s.q)); err != nil {
			return 0, err
		}
		alpha := rho / v[0]
		rho0 := rho
		if v, err = s.sum(ctx, cg.UpdateZR(alpha, s.z, s.r, s.pl, s.q)); err != nil {
			return 0, err
		}
		rho = v[0]
		cg.UpdateP(rho/rho0, s.pl, s.r)
	}
	if err := s.gather(ctx, s.vecs[1]); err != nil {
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
