package cg

import (
	"fmt"
	"io"
	"math"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Result is the outcome of a CG run.
type Result struct {
	Params   Params
	Zeta     float64 // zeta after the last outer iteration
	RNorm    float64 // ||x − A·z|| of the last conj_grad
	Seconds  float64 // timed section (the NIter outer iterations)
	Verified bool
	RelErr   float64 // |zeta − ZetaVerify| / ZetaVerify
	NNZ      int     // stored nonzeros (all ranks)
}

// Mops returns the result's Mop/s by NPB's operation count.
func (r Result) Mops() float64 { return r.Params.Mops(r.Seconds) }

// Report returns the NPB report block for the result.
func (r Result) Report(ranks int) npb.Report {
	return npb.Report{
		Name: "CG", Class: r.Params.Class, Size: fmt.Sprint(r.Params.NA),
		Iterations: r.Params.NIter, Ranks: ranks, Seconds: r.Seconds, Mops: r.Mops(),
		OpType: "floating point", Verified: r.Verified,
		Extra: []string{fmt.Sprintf("Zeta = %.13E", r.Zeta), fmt.Sprintf("Error = %.13E", r.RelErr)},
	}
}

// Dot returns Σ a[j]·b[j] summed in index order.
func Dot(a, b []float64) float64 {
	b = b[:len(a)]
	s := 0.0
	for j, v := range a {
		s += v * b[j]
	}
	return s
}

// UpdateZR does z += alpha·p and r −= alpha·q and returns r·r (the fused loop of conj_grad).
func UpdateZR(alpha float64, z, r, p, q []float64) float64 {
	r = r[:len(z)]
	p = p[:len(z)]
	q = q[:len(z)]
	rho := 0.0
	for j := range z {
		z[j] += alpha * p[j]
		r[j] -= alpha * q[j]
		rho += r[j] * r[j]
	}
	return rho
}

// UpdateP does p = r + beta·p.
func UpdateP(beta float64, p, r []float64) {
	r = r[:len(p)]
	for j := range p {
		p[j] = r[j] + beta*p[j]
	}
}

// ResidualSq returns Σ (x[j] − az[j])².
func ResidualSq(x, az []float64) float64 {
	az = az[:len(x)]
	s := 0.0
	for j := range x {
		d := x[j] - az[j]
		s += d * d
	}
	return s
}

// Scale does dst = s·src.
func Scale(s float64, dst, src []float64) {
	src = src[:len(dst)]
	for j := range dst {
		dst[j] = s * src[j]
	}
}

// serialState is the serial reference's working set.
type serialState struct {
	m             *Matrix
	x, z, p, q, r []float64
}

// conjGrad is NPB's conj_grad on the whole matrix; it returns ||x − A·z||.
func (s *serialState) conjGrad() float64 {
	copy(s.r, s.x)
	copy(s.p, s.r)
	clear(s.q)
	clear(s.z)
	rho := Dot(s.r, s.r)
	for cgit := 1; cgit <= CGItMax; cgit++ {
		s.m.MulVec(s.p, s.q)
		d := Dot(s.p, s.q)
		alpha := rho / d
		rho0 := rho
		rho = UpdateZR(alpha, s.z, s.r, s.p, s.q)
		beta := rho / rho0
		UpdateP(beta, s.p, s.r)
	}
	s.m.MulVec(s.z, s.r)
	return math.Sqrt(ResidualSq(s.x, s.r))
}

// Serial runs the serial reference CG of class p: makea, one untimed outer iteration, reset,
// then NIter timed outer iterations (conj_grad; zeta = shift + 1/(x·z); x = z/||z||). If log is
// not nil, the per-iteration ||r|| and zeta lines are written to it.
func Serial(p Params, log io.Writer) (Result, error) {
	m, err := MakeA(p, 0, p.NA)
	if err != nil {
		return Result{}, err
	}
	n := p.NA
	s := &serialState{m: m, x: make([]float64, n), z: make([]float64, n), p: make([]float64, n),
		q: make([]float64, n), r: make([]float64, n)}
	outerIter := func() (zeta, rnorm float64) {
		rnorm = s.conjGrad()
		xz := Dot(s.x, s.z)
		zz := Dot(s.z, s.z)
		Scale(1/math.Sqrt(zz), s.x, s.z)
		return p.Shift + 1/xz, rnorm
	}
	for j := range s.x {
		s.x[j] = 1
	}
	outerIter() // untimed: touch all pages
	for j := range s.x {
		s.x[j] = 1
	}
	var t npb.Timer
	t.Start()
	var zeta, rnorm float64
	for it := 1; it <= p.NIter; it++ {
		zeta, rnorm = outerIter()
		if log != nil {
			if it == 1 {
				fmt.Fprintf(log, "\n   iteration           ||r||                 zeta\n")
			}
			fmt.Fprintf(log, "    %5d       %20.14E%20.13f\n", it, rnorm, zeta)
		}
	}
	t.Stop()
	ok, rel := p.Verify(zeta)
	return Result{Params: p, Zeta: zeta, RNorm: rnorm, Seconds: t.Seconds(), Verified: ok,
		RelErr: rel, NNZ: m.NNZ()}, nil
}
