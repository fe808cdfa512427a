// Package mg is the NPB MG kernel (V-cycle multigrid for the discrete Poisson problem ∇²u = v on
// a periodic n×n×n grid, [NPB]): the class parameters and official verification values, the
// grid kernels resid, psinv, rprj3, interp, norm2u3 and comm3 on a block with a ghost layer of
// width 1, the charge generator zran3 for any block, and the serial reference run.
//
// Source: [NPB] NPB 3.4 MG (mg.f: mg3P, resid, psinv, rprj3, interp, norm2u3, comm3, zran3,
// power, bubble; the class table of sys/setparams.c); the specification in NAS report
// RNR-94-007 §2.5 (kernel MG).
package mg

import (
	"errors"
	"fmt"
	"math"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Errors.
var (
	// ErrRange is returned for parameters out of range (a grid extent that is not a power of two
	// of at least 4, a negative iteration count).
	ErrRange = errors.New("mg: parameters out of range")
	// ErrShape is returned when grids handed to a kernel do not fit each other (a coarse grid
	// that is not half the fine one, a buffer too small for the extents).
	ErrShape = errors.New("mg: grid shapes do not fit")
)

// Epsilon bounds the relative error |rnm2 − rnm2_ref| / rnm2_ref of the verification.
const Epsilon = 1e-8

// NCharges is the number of +1 and of −1 charges zran3 places (NPB's mm = 10).
const NCharges = 10

// Params are the class parameters of MG.
type Params struct {
	Class  npb.Class
	N      int        // grid extent along each dimension (nx = ny = nz), a power of two
	NIter  int        // timed V-cycles (nit)
	A      [4]float64 // coefficients of the discrete Laplacian A (resid): centre, faces, edges, corners
	C      [4]float64 // coefficients of the smoother S (psinv): NPB's S(a) for S, W, A; S(b) for B
	Verify float64    // official L2 norm of the residual after NIter V-cycles (rnm2)
}

// The operator and smoother coefficients of mg.f (a(0:3), c(0:3)).
var (
	coefA  = [4]float64{-8.0 / 3.0, 0, 1.0 / 6.0, 1.0 / 12.0}
	smootA = [4]float64{-3.0 / 8.0, 1.0 / 32.0, -1.0 / 64.0, 0}  // S(a): classes S, W, A
	smootB = [4]float64{-3.0 / 17.0, 1.0 / 33.0, -1.0 / 61.0, 0} // S(b): class B and above
)

var classes = map[npb.Class]Params{
	npb.ClassS: {npb.ClassS, 32, 4, coefA, smootA, 0.5307707005734e-04},
	npb.ClassW: {npb.ClassW, 128, 4, coefA, smootA, 0.6467329375339e-05},
	npb.ClassA: {npb.ClassA, 256, 4, coefA, smootA, 0.2433365309069e-05},
	npb.ClassB: {npb.ClassB, 256, 20, coefA, smootB, 0.1800564401355e-05},
}

// ParamsFor returns the parameters of class c, or npb.ErrClass.
func ParamsFor(c npb.Class) (Params, error) {
	p, ok := classes[c]
	if !ok {
		return Params{}, fmt.Errorf("mg class %s: %w", c, npb.ErrClass)
	}
	return p, nil
}

// Levels returns lt = log2(N), the number of grid levels: level k has extent 2^k, level lt is
// the finest.
func (p Params) Levels() int {
	lt := 0
	for n := p.N; n > 1; n >>= 1 {
		lt++
	}
	return lt
}

// Validate checks that N is a power of two in [4, 2^10] and NIter ≥ 0. Errors: ErrRange.
func (p Params) Validate() error {
	if p.N < 4 || p.N > 1<<10 || p.N&(p.N-1) != 0 || p.NIter < 0 {
		return fmt.Errorf("mg: n %d, nit %d: %w", p.N, p.NIter, ErrRange)
	}
	return nil
}

// Mops returns NPB's Mop/s for MG: 58·nit·n³ floating-point operations divided by seconds, in
// millions.
func (p Params) Mops(seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	n := float64(p.N)
	return 58e-6 * float64(p.NIter) * n * n * n / seconds
}

// Check returns whether rnm2 matches the official value within Epsilon (relative), and the
// relative error.
func (p Params) Check(rnm2 float64) (bool, float64) {
	err := math.Abs(rnm2-p.Verify) / p.Verify
	return err <= Epsilon, err // NaN compares false
}

// Result is the outcome of an MG run.
type Result struct {
	Params   Params
	RNM2     float64 // L2 norm of the final residual, sqrt(Σ r² / n³)
	RNMU     float64 // its maximum norm, max |r|
	Seconds  float64 // timed section
	Verified bool
	RelErr   float64 // |RNM2 − Verify| / Verify
}

// Mops returns the result's Mop/s by NPB's operation count.
func (r Result) Mops() float64 { return r.Params.Mops(r.Seconds) }

// Report returns the NPB report block for the result.
func (r Result) Report(ranks int) npb.Report {
	n := r.Params.N
	return npb.Report{
		Name: "MG", Class: r.Params.Class, Size: fmt.Sprintf("%dx%dx%d", n, n, n),
		Iterations: r.Params.NIter, Ranks: ranks, Seconds: r.Seconds, Mops: r.Mops(),
		OpType: "floating point", Verified: r.Verified,
		Extra: []string{fmt.Sprintf("L2 Norm = %.13E", r.RNM2), fmt.Sprintf("Error = %.13E", r.RelErr)},
	}
}
