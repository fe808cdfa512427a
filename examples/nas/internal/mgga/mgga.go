// Package mgga is the NPB MG kernel on goarmci's Global Arrays layer.
//
// Each level k of the V-cycle (grid extent n = 2^k) holds u and r (and the finest level v) as
// 3-D global arrays of dims (z, y, x) = (n, n, n) with ghost cells of width 1 in every dimension
// (NGA_Create_ghosts_irreg): NPB's own ghost layer, the indices 0 and n+1 of its u(0:n+1, ...),
// is the GA ghost layer, and NPB's comm3 (periodic boundary exchange, edges and corners
// included) is GA_Update_ghosts, whose periodic wrap at the array's edges is MG's periodic
// boundary. The stencils (resid, psinv, rprj3, interp, package mg) run on each rank's storage
// from NGA_Access_ghosts with its leading dimensions, so they allocate nothing.
//
// Distribution: NPB's process grid (a power-of-two number of active ranks P = 2^p; 2^(p/3)
// blocks along x, 2^((p − p/3)/2) along y, the rest along z; ranks beyond P own nothing but
// join every collective) with equal blocks at every level (NGA_Create_irreg), so that the
// coarse block of a rank lies under its fine block: rprj3 and interp then need only the ghost
// layer. A level is distributed when every block has at least two points along every dimension
// and the grid is larger than Config.Replicate; the coarser levels are computed whole and
// replicated on every rank: the residual of the coarsest distributed level is gathered with one
// NGA_Get of the whole array, the bottom of the V-cycle runs serially on every rank, and each
// rank interpolates its own block of the coarsest distributed level from the replicated
// correction. The finest level is always distributed: the run needs blocks of at least two
// points along every dimension there (ErrRanks otherwise).
//
// Source: [NPB] NPB 3.4 MG (mg.f: setup's process grid, mg3P, zran3, norm2u3); GA's
// NGA_Create_ghosts_irreg, NGA_Access_ghosts, GA_Update_ghosts, NGA_Get, GA_Dgop.
package mgga

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/goarmci/goarmci/examples/nas/internal/mg"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/rma"
)

// Errors.
var (
	// ErrRanks is returned when the grid is too small for the process grid (fewer than two
	// points per block along some dimension of the finest level).
	ErrRanks = errors.New("mgga: too many ranks for the grid")
	// ErrLayout is returned when a rank's storage does not have the shape the process grid
	// gives it.
	ErrLayout = errors.New("mgga: local block of unexpected shape")
)

// DefaultReplicate is Config.Replicate's default: grids of up to 8³ points are cheaper to
// compute whole on every rank than to exchange ghost cells for.
const DefaultReplicate = 8

// Config tunes the distributed run.
type Config struct {
	// Replicate is the largest grid extent computed replicated on every rank (levels too small
	// to cut into blocks of two points are replicated whatever it says; the finest level is
	// always distributed). 0 means DefaultReplicate; −1 replicates only what must be.
	Replicate int
}

// ProcGrid returns NPB MG's process grid for size ranks, as (z, y, x) blocks: P = 2^p active
// ranks (the largest power of two ≤ size), 2^(p/3) blocks along x, 2^((p−p/3)/2) along y and
// the rest along z.
func ProcGrid(size int) [3]int {
	p := 0
	for 2<<p <= size {
		p++
	}
	dx := p / 3
	dy := (p - dx) / 2
	return [3]int{1 << (p - dx - dy), 1 << dy, 1 << dx}
}

// level is one grid level of this rank.
type level struct {
	n      int
	ua, ra *globalarray.Array[float64] // nil on replicated levels
	u, r   mg.Grid                     // this rank's block with ghosts, or the whole grid if replicated
	coarse mg.Grid                     // view of level k−1's u under this block (interp's source)
	lo     [3]int                      // global (z, y, x) of the block's first point
}

// solver is one rank's part of the distributed MG.
type solver struct {
	rt   *rma.Runtime
	p    mg.Params
	pg   [3]int
	lt   int     // finest level
	low  int     // coarsest distributed level
	lv   []level // 1..lt
	va   *globalarray.Array[float64]
	v    mg.Grid
	full mg.Grid // the whole residual of level low, gathered (low > 1)
	w    *mg.Work
	idle bool // this rank owns no block
	red  [1]float64
	// the whole-array patch of level low and the gather buffer's leading dimensions
	glo, ghi, gld []int
}

// Run runs MG of class p on every rank of rt (collective: every rank must call it) and returns
// the result, the same on every rank. If log is not nil, the initialization time and NPB's
// "iter" lines are written to it (pass it on one rank only). Errors: mg.ErrRange for bad
// parameters and ErrRanks for a grid too small for the ranks (every rank returns them before any
// collective), ErrLayout, errors of the GA layer wrapped.
func Run(ctx context.Context, rt *rma.Runtime, p mg.Params, cfg Config, log io.Writer) (res mg.Result, err error) {
	if err := p.Validate(); err != nil {
		return mg.Result{}, err
	}
	s := &solver{rt: rt, p: p, pg: ProcGrid(rt.Size()), lt: p.Levels(), w: mg.NewWork(p.N)}
	for _, b := range s.pg {
		if p.N < 2*b {
			return mg.Result{}, fmt.Errorf("%w: %d³ points on %v blocks (z, y, x)", ErrRanks, p.N, s.pg)
		}
	}
	repl := cfg.Replicate
	if repl == 0 {
		repl = DefaultReplicate
	}
	s.low = s.lt
	for k := s.lt - 1; k >= 1; k-- {
		n := 1 << k
		if n <= repl || n < 2*max(s.pg[0], s.pg[1], s.pg[2]) {
			break
		}
		s.low = k
	}
	defer func() {
		if derr := s.destroy(ctx); derr != nil && err == nil {
			err = derr
		}
	}()
	if err := s.setup(ctx); err != nil {
		return mg.Result{}, err
	}

	var tinit npb.Timer
	tinit.Start()
	if err := s.zran3(ctx); err != nil {
		return mg.Result{}, err
	}
	if err := s.resid(ctx); err != nil {
		return mg.Result{}, err
	}
	if err := s.mg3P(ctx); err != nil { // one iteration for startup
		return mg.Result{}, err
	}
	if err := s.resid(ctx); err != nil {
		return mg.Result{}, err
	}
	s.lv[s.lt].u.Zero()
	if err := s.zran3(ctx); err != nil {
		return mg.Result{}, err
	}
	tinit.Stop()
	if log != nil {
		fmt.Fprintf(log, "\n Initialization time: %15.3f seconds\n\n", tinit.Seconds())
	}
	if err := globalarray.Sync(ctx, rt); err != nil {
		return mg.Result{}, fmt.Errorf("mgga: sync: %w", err)
	}

	var t npb.Timer
	t.Start()
	if err := s.resid(ctx); err != nil {
		return mg.Result{}, err
	}
	for it := 1; it <= p.NIter; it++ {
		if log != nil && (it == 1 || it == p.NIter || it%5 == 0) {
			fmt.Fprintf(log, "  iter %4d\n", it)
		}
		if err := s.mg3P(ctx); err != nil {
			return mg.Result{}, err
		}
		if err := s.resid(ctx); err != nil {
			return mg.Result{}, err
		}
	}
	rnm2, rnmu, err := s.norm(ctx)
	if err != nil {
		return mg.Result{}, err
	}
	t.Stop()

	secs := []float64{t.Seconds()}
	if err := globalarray.GopMax(ctx, rt, secs); err != nil {
		return mg.Result{}, fmt.Errorf("mgga: time max: %w", err)
	}
	// every rank reports rank 0's norms, so all agree on the verification
	nr := []float64{rnm2, rnmu}
	if err := globalarray.Brdcst(ctx, rt, 0, nr); err != nil {
		return mg.Result{}, fmt.Errorf("mgga: broadcast norm: %w", err)
	}
	ok, rel := p.Check(nr[0])
	return mg.Result{Params: p, RNM2: nr[0], RNMU: nr[1], Seconds: secs[0], Verified: ok, RelErr: rel}, nil
}

// setup creates the distributed arrays (u and r of levels low..lt, v), takes this rank's views
// of them, and allocates the replicated levels and the gather buffer.
func (s *solver) setup(ctx context.Context) error {
	s.lv = make([]level, s.lt+1)
	for k := 1; k <= s.lt; k++ {
		l := &s.lv[k]
		l.n = 1 << k
		if k < s.low {
			l.u, l.r = mg.NewGrid(l.n, l.n, l.n), mg.NewGrid(l.n, l.n, l.n)
			continue
		}
		var err error
		if l.ua, l.u, err = s.create(ctx, fmt.Sprintf("mg.u%d", k), l.n, &l.lo); err != nil {
			return err
		}
		if l.ra, l.r, err = s.create(ctx, fmt.Sprintf("mg.r%d", k), l.n, &l.lo); err != nil {
			return err
		}
	}
	var lo [3]int
	var err error
	if s.va, s.v, err = s.create(ctx, "mg.v", s.p.N, &lo); err != nil {
		return err
	}
	top := &s.lv[s.lt]
	s.idle = top.u.Empty()
	for k := max(s.low, 2); k <= s.lt && !s.idle; k++ {
		l := &s.lv[k]
		m1, m2, m3 := l.u.N1/2, l.u.N2/2, l.u.N3/2
		if k-1 >= s.low {
			l.coarse = s.lv[k-1].u
		} else { // the replicated grid's storage index of global point G is G+1: start at the ghost before lo/2
			l.coarse = s.lv[k-1].u.Sub(l.lo[0]/2, l.lo[1]/2, l.lo[2]/2, m1, m2, m3)
		}
		if l.coarse.N1 != m1 || l.coarse.N2 != m2 || l.coarse.N3 != m3 {
			return fmt.Errorf("%w: level %d block %dx%dx%d over a coarse block %dx%dx%d", ErrLayout,
				k, l.u.N1, l.u.N2, l.u.N3, l.coarse.N1, l.coarse.N2, l.coarse.N3)
		}
	}
	if s.low > 1 {
		n := 1 << s.low
		s.full = mg.NewGrid(n, n, n)
		s.glo, s.ghi, s.gld = []int{0, 0, 0}, []int{n - 1, n - 1, n - 1}, []int{n + 2, n + 2}
	}
	return nil
}

// create makes one n×n×n level array with ghost width 1 on NPB's process grid and returns it
// with this rank's view (empty on a rank that owns nothing) and its block's lower corner in lo.
func (s *solver) create(ctx context.Context, name string, n int, lo *[3]int) (*globalarray.Array[float64], mg.Grid, error) {
	starts := make([][]int, 3)
	for d, b := range s.pg {
		for i := 0; i < b; i++ {
			starts[d] = append(starts[d], i*n/b)
		}
	}
	a, err := globalarray.Create[float64](ctx, s.rt, name, []int{n, n, n},
		globalarray.Irregular(starts), globalarray.Ghosts(1, 1, 1))
	if err != nil {
		return nil, mg.Grid{}, fmt.Errorf("mgga: create %s: %w", name, err)
	}
	data, dims, ld, err := a.AccessGhosts()
	if err != nil {
		_ = a.Destroy(ctx)
		return nil, mg.Grid{}, fmt.Errorf("mgga: access %s: %w", name, err)
	}
	// the access lasts until destroy: the kernels work in place on the storage
	if len(data) == 0 {
		return a, mg.Grid{}, nil
	}
	g := mg.Grid{Data: data, N1: dims[2] - 2, N2: dims[1] - 2, N3: dims[0] - 2, S2: ld[1], S3: ld[0] * ld[1]}
	l, h := a.Distribution(s.rt.Rank())
	for d := range 3 {
		lo[d] = l[d]
		if h[d]-l[d]+1 != n/s.pg[d] || dims[d] != n/s.pg[d]+2 {
			err = fmt.Errorf("%w: %s block [%v, %v] with storage %v on %v blocks", ErrLayout, name, l, h, dims, s.pg)
		}
	}
	if err == nil {
		err = g.Validate()
	}
	if err != nil {
		a.Release()
		_ = a.Destroy(ctx)
		return nil, mg.Grid{}, err
	}
	return a, g, nil
}

// destroy ends the accesses and frees the distributed arrays (collective).
func (s *solver) destroy(ctx context.Context) error {
	var first error
	free := func(a *globalarray.Array[float64]) {
		if a == nil {
			return
		}
		a.Release()
		if err := a.Destroy(ctx); err != nil && first == nil {
			first = fmt.Errorf("mgga: destroy: %w", err)
		}
	}
	for k := len(s.lv) - 1; k >= 1; k-- {
		free(s.lv[k].ua)
		free(s.lv[k].ra)
	}
	free(s.va)
	return first
}

// comm is comm3 on a distributed array: GA_Update_ghosts.
func (s *solver) comm(ctx context.Context, a *globalarray.Array[float64]) error {
	if err := a.UpdateGhosts(ctx); err != nil {
		return fmt.Errorf("mgga: comm3: %w", err)
	}
	return nil
}

// zran3 sets v to NPB's charges: each rank draws its block of the random field and offers its
// ten largest and ten smallest values; one GA_Dgop "+" over a slot per rank gathers the
// candidates, every rank picks the same global ten of each and places those in its block;
// GA_Update_ghosts fills v's ghost cells.
func (s *solver) zran3(ctx context.Context) error {
	top := &s.lv[s.lt]
	c := mg.Fill(s.v, s.p.N, top.lo[0], top.lo[1], top.lo[2])
	const per = 4 * mg.NCharges // (value, index+1) of every max and min candidate
	buf := make([]float64, per*s.rt.Size())
	if !s.idle {
		slot := buf[per*s.rt.Rank():]
		for k := range mg.NCharges {
			slot[4*k] = c.Max[k].Value
			slot[4*k+1] = float64(c.Max[k].Index + 1)
			slot[4*k+2] = c.Min[k].Value
			slot[4*k+3] = float64(c.Min[k].Index + 1)
		}
	}
	if err := globalarray.GopSum(ctx, s.rt, buf); err != nil {
		return fmt.Errorf("mgga: zran3 candidates: %w", err)
	}
	all := make([]mg.Candidates, s.rt.Size())
	for r := range all {
		slot := buf[per*r:]
		for k := range mg.NCharges {
			all[r].Max[k] = mg.Charge{Value: slot[4*k], Index: int(slot[4*k+1]) - 1}
			all[r].Min[k] = mg.Charge{Value: slot[4*k+2], Index: int(slot[4*k+3]) - 1}
		}
	}
	plus, minus := mg.Select(all)
	mg.Place(s.v, s.p.N, top.lo[0], top.lo[1], top.lo[2], plus, minus)
	return s.comm(ctx, s.va)
}

// resid is resid(u, v, r) at the finest level with its comm3.
func (s *solver) resid(ctx context.Context) error {
	top := &s.lv[s.lt]
	mg.Resid(top.u, s.v, top.r, &s.p.A, s.w)
	return s.comm(ctx, top.ra)
}

// mg3P is one V-cycle: restriction down the distributed levels, the replicated bottom (or the
// distributed one when every level is distributed), then interpolation, residual and smoothing
// up the distributed levels; every comm3 of NPB is a GA_Update_ghosts.
func (s *solver) mg3P(ctx context.Context) error {
	for k := s.lt; k > s.low; k-- {
		mg.Rprj3(s.lv[k].r, s.lv[k-1].r, s.w)
		if err := s.comm(ctx, s.lv[k-1].ra); err != nil {
			return err
		}
	}
	first := 2
	if s.low > 1 {
		// r of level low is complete: its writers passed the barrier of its last Update_ghosts.
		// No rank writes it again before the next Update_ghosts of u below, after every Get.
		if !s.idle {
			if err := s.lv[s.low].ra.Get(ctx, s.glo, s.ghi, s.full.Data[s.full.Index(1, 1, 1):], s.gld); err != nil {
				return fmt.Errorf("mgga: gather level %d: %w", s.low, err)
			}
			mg.Comm3(s.full)
			s.bottom()
		}
		first = s.low
	} else {
		l := &s.lv[1]
		l.u.Zero()
		mg.Psinv(l.r, l.u, &s.p.C, s.w)
		if err := s.comm(ctx, l.ua); err != nil {
			return err
		}
	}
	for k := first; k <= s.lt; k++ {
		l := &s.lv[k]
		v := s.v
		if k < s.lt {
			l.u.Zero()
			v = l.r
		}
		mg.Interp(l.coarse, l.u, s.w)
		if err := s.comm(ctx, l.ua); err != nil {
			return err
		}
		mg.Resid(l.u, v, l.r, &s.p.A, s.w)
		if err := s.comm(ctx, l.ra); err != nil {
			return err
		}
		mg.Psinv(l.r, l.u, &s.p.C, s.w)
		if err := s.comm(ctx, l.ua); err != nil {
			return err
		}
	}
	return nil
}

// bottom runs the replicated levels low−1 .. 1 .. low−1 of the V-cycle on this rank, from the
// gathered residual of level low, with the serial comm3.
func (s *solver) bottom() {
	w, a, c := s.w, &s.p.A, &s.p.C
	mg.Rprj3(s.full, s.lv[s.low-1].r, w)
	mg.Comm3(s.lv[s.low-1].r)
	for k := s.low - 1; k > 1; k-- {
		mg.Rprj3(s.lv[k].r, s.lv[k-1].r, w)
		mg.Comm3(s.lv[k-1].r)
	}
	l := &s.lv[1]
	l.u.Zero()
	mg.Psinv(l.r, l.u, c, w)
	mg.Comm3(l.u)
	for k := 2; k < s.low; k++ {
		l := &s.lv[k]
		l.u.Zero()
		mg.Interp(s.lv[k-1].u, l.u, w)
		mg.Comm3(l.u)
		mg.Resid(l.u, l.r, l.r, a, w)
		mg.Comm3(l.r)
		mg.Psinv(l.r, l.u, c, w)
		mg.Comm3(l.u)
	}
}

// norm is norm2u3 of the finest residual: local sums, then GA_Dgop "+" and "max".
func (s *solver) norm(ctx context.Context) (rnm2, rnmu float64, err error) {
	sum, mx := mg.Norm2(s.lv[s.lt].r)
	s.red[0] = mx
	if err := globalarray.GopMax(ctx, s.rt, s.red[:]); err != nil {
		return 0, 0, fmt.Errorf("mgga: norm max: %w", err)
	}
	rnmu = s.red[0]
	s.red[0] = sum
	if err := globalarray.GopSum(ctx, s.rt, s.red[:]); err != nil {
		return 0, 0, fmt.Errorf("mgga: norm sum: %w", err)
	}
	n := float64(s.p.N)
	return math.Sqrt(s.red[0] / (n * n * n)), rnmu, nil
}
