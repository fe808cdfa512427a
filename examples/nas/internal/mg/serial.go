package mg

import (
	"fmt"
	"io"
	"math"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// serialState is the serial reference's working set: u and r at every level (index k = 1..lt,
// extent 2^k), v at the finest.
type serialState struct {
	p    Params
	lt   int
	u, r []Grid
	v    Grid
	w    *Work
}

func newSerial(p Params) *serialState {
	lt := p.Levels()
	s := &serialState{p: p, lt: lt, u: make([]Grid, lt+1), r: make([]Grid, lt+1), w: NewWork(p.N)}
	for k := 1; k <= lt; k++ {
		n := 1 << k
		s.u[k], s.r[k] = NewGrid(n, n, n), NewGrid(n, n, n)
	}
	s.v = NewGrid(p.N, p.N, p.N)
	return s
}

// zran3 sets v to NPB's ten +1 and ten −1 charges, u to zero.
func (s *serialState) init() {
	s.u[s.lt].Zero()
	c := Fill(s.v, s.p.N, 0, 0, 0)
	plus, minus := Select([]Candidates{c})
	Place(s.v, s.p.N, 0, 0, 0, plus, minus)
	Comm3(s.v)
}

// resid is resid(u, v, r) at the finest level with its comm3.
func (s *serialState) resid() {
	Resid(s.u[s.lt], s.v, s.r[s.lt], &s.p.A, s.w)
	Comm3(s.r[s.lt])
}

// mg3P is one V-cycle (NPB's mg3P).
func (s *serialState) mg3P() {
	for k := s.lt; k > 1; k-- {
		Rprj3(s.r[k], s.r[k-1], s.w)
		Comm3(s.r[k-1])
	}
	s.u[1].Zero()
	Psinv(s.r[1], s.u[1], &s.p.C, s.w)
	Comm3(s.u[1])
	for k := 2; k < s.lt; k++ {
		s.u[k].Zero()
		Interp(s.u[k-1], s.u[k], s.w)
		Comm3(s.u[k])
		Resid(s.u[k], s.r[k], s.r[k], &s.p.A, s.w)
		Comm3(s.r[k])
		Psinv(s.r[k], s.u[k], &s.p.C, s.w)
		Comm3(s.u[k])
	}
	Interp(s.u[s.lt-1], s.u[s.lt], s.w)
	Comm3(s.u[s.lt])
	s.resid()
	Psinv(s.r[s.lt], s.u[s.lt], &s.p.C, s.w)
	Comm3(s.u[s.lt])
}

// norm is norm2u3 of the finest residual: rnm2 = sqrt(Σ r² / n³) and max |r|.
func (s *serialState) norm() (rnm2, rnmu float64) {
	sum, mx := Norm2(s.r[s.lt])
	n := float64(s.p.N)
	return math.Sqrt(sum / (n * n * n)), mx
}

// Serial runs the serial reference MG of class p as NPB's main program does: zran3, one
// untimed V-cycle, zran3 again, then the timed section (resid, NIter × (mg3P, resid), norm2u3).
// If log is not nil, the initialization time and NPB's "iter" lines are written to it.
// Errors: ErrRange.
func Serial(p Params, log io.Writer) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	var tinit npb.Timer
	tinit.Start()
	s := newSerial(p)
	s.init()
	s.resid()
	s.mg3P() // one iteration for startup
	s.resid()
	s.init()
	tinit.Stop()
	if log != nil {
		fmt.Fprintf(log, "\n Initialization time: %15.3f seconds\n\n", tinit.Seconds())
	}
	var t npb.Timer
	t.Start()
	s.resid()
	for it := 1; it <= p.NIter; it++ {
		if log != nil && (it == 1 || it == p.NIter || it%5 == 0) {
			fmt.Fprintf(log, "  iter %4d\n", it)
		}
		s.mg3P()
		s.resid()
	}
	rnm2, rnmu := s.norm()
	t.Stop()
	ok, rel := p.Check(rnm2)
	return Result{Params: p, RNM2: rnm2, RNMU: rnmu, Seconds: t.Seconds(), Verified: ok, RelErr: rel}, nil
}
