// Package ft is the NPB FT kernel (time integration of the 3-D diffusion equation
// ∂u/∂t = α∇²u on a periodic nx×ny×nz grid by forward and inverse 3-D FFTs, [NPB]): the class
// parameters and official checksums, the pieces a run is made of for any block of z-planes or
// y-rows of the grid (initial conditions, the evolution factors, evolve, the 1-D FFTs along x, y
// and z, the checksum's share), and the serial reference run.
//
// The 1-D transforms are gonum's radix-2 FFT (gonum.org/v1/gonum/dsp/fourier, complex128),
// unnormalized both ways as NPB's cfftz; the checksum divides by nx·ny·nz as NPB's does. The sign of the
// exponent in the forward transform is the opposite of NPB's, which leaves every checksum
// unchanged: the evolution factor is even in each wave number.
//
// Source: [NPB] NPB 3.4 FT (ft.f: compute_initial_conditions, compute_indexmap, evolve, fft,
// checksum, the class table of set_class and the reference checksums of verify); the
// specification in NAS report RNR-94-007 §2.6 (kernel FT).
package ft

import (
	"errors"
	"fmt"
	"math"
	"math/cmplx"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Errors.
var (
	// ErrRange is returned for parameters out of range (an extent that is not a power of two,
	// a negative iteration count).
	ErrRange = errors.New("ft: parameters out of range")
	// ErrShape is returned when a block does not fit its grid (a slice too short for its
	// extents, an offset beyond the grid, a transform along a dimension the block cuts).
	ErrShape = errors.New("ft: block does not fit the grid")
)

// Epsilon bounds the relative error |sum − sum_ref| / |sum_ref| of every checksum.
const Epsilon = 1e-12

// Alpha is the diffusion constant α of the PDE (ft_data.f's alpha).
const Alpha = 1e-6

// Params are the class parameters of FT.
type Params struct {
	Class      npb.Class
	NX, NY, NZ int // grid extents; x varies fastest in memory
	NIter      int // time steps, one checksum each
	// Ref are the official checksums of steps 1..len(Ref) (verify's csum_ref).
	Ref []complex128
}

var classes = map[npb.Class]Params{
	npb.ClassS: {npb.ClassS, 64, 64, 64, 6, []complex128{
		complex(5.546087004964e+02, 4.845363331978e+02),
		complex(5.546385409189e+02, 4.865304269511e+02),
		complex(5.546148406171e+02, 4.883910722336e+02),
		complex(5.545423607415e+02, 4.901273169046e+02),
		complex(5.544255039624e+02, 4.917475857993e+02),
		complex(5.542683411902e+02, 4.932597244941e+02),
	}},
	npb.ClassW: {npb.ClassW, 128, 128, 32, 6, []complex128{
		complex(5.673612178944e+02, 5.293246849175e+02),
		complex(5.631436885271e+02, 5.282149986629e+02),
		complex(5.594024089970e+02, 5.270996558037e+02),
		complex(5.560698047020e+02, 5.260027904925e+02),
		complex(5.530898991250e+02, 5.249400845633e+02),
		complex(5.504159734538e+02, 5.239212247086e+02),
	}},
	npb.ClassA: {npb.ClassA, 256, 256, 128, 6, []complex128{
		complex(5.046735008193e+02, 5.114047905510e+02),
		complex(5.059412319734e+02, 5.098809666433e+02),
		complex(5.069376896287e+02, 5.098144042213e+02),
		complex(5.077892868474e+02, 5.101336130759e+02),
		complex(5.085233095391e+02, 5.104914655194e+02),
		complex(5.091487099959e+02, 5.107917842803e+02),
	}},
	npb.ClassB: {npb.ClassB, 512, 256, 256, 20, []complex128{
		complex(5.177643571579e+02, 5.077803458597e+02),
		complex(5.154521291263e+02, 5.088249431599e+02),
		complex(5.146409228649e+02, 5.096208912659e+02),
		complex(5.142378756213e+02, 5.101023387619e+02),
		complex(5.139626667737e+02, 5.103976610617e+02),
		complex(5.137423460082e+02, 5.105948019802e+02),
		complex(5.135547056878e+02, 5.107404165783e+02),
		complex(5.133910925466e+02, 5.108576573661e+02),
		complex(5.132470705390e+02, 5.109577278523e+02),
		complex(5.131197729984e+02, 5.110460304483e+02),
		complex(5.130070319283e+02, 5.111252433800e+02),
		complex(5.129070537032e+02, 5.111968077718e+02),
		complex(5.128182883502e+02, 5.112616233064e+02),
		complex(5.127393733383e+02, 5.113203605551e+02),
		complex(5.126691062020e+02, 5.113735928093e+02),
		complex(5.126064276004e+02, 5.114218460548e+02),
		complex(5.125504076570e+02, 5.114656139760e+02),
		complex(5.125002331720e+02, 5.115053595966e+02),
		complex(5.124551951846e+02, 5.115415130407e+02),
		complex(5.124146770029e+02, 5.115744692211e+02),
	}},
}

// ParamsFor returns the parameters of class c, or npb.ErrClass.
func ParamsFor(c npb.Class) (Params, error) {
	p, ok := classes[c]
	if !ok {
		return Params{}, fmt.Errorf("ft class %s: %w", c, npb.ErrClass)
	}
	p.Ref = append([]complex128(nil), p.Ref...)
	return p, nil
}

// Validate checks that the extents are powers of two (NPB's cfftz, and the radix-2 transforms
// here, need them) and NIter ≥ 0. Errors: ErrRange.
func (p Params) Validate() error {
	pow2 := func(n int) bool { return n >= 1 && n&(n-1) == 0 }
	if !pow2(p.NX) || !pow2(p.NY) || !pow2(p.NZ) || p.NIter < 0 {
		return fmt.Errorf("ft: grid %dx%dx%d, niter %d: %w", p.NX, p.NY, p.NZ, p.NIter, ErrRange)
	}
	return nil
}

// Total returns the number of grid points nx·ny·nz as a float64 (NPB's ntotal_f).
func (p Params) Total() float64 { return float64(p.NX) * float64(p.NY) * float64(p.NZ) }

// Mops returns NPB's Mop/s for FT: N·(14.8157 + 7.19641·ln N + (5.23518 + 7.21113·ln N)·niter)
// floating-point operations (N = nx·ny·nz) divided by seconds, in millions.
func (p Params) Mops(seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	n := p.Total()
	ln := math.Log(n)
	return 1e-6 * n * (14.8157 + 7.19641*ln + (5.23518+7.21113*ln)*float64(p.NIter)) / seconds
}

// Check compares the checksums of steps 1..len(sums) with the official ones: it returns whether
// the run verifies (as many checksums as the class has steps, every one within Epsilon) and the
// largest relative error over the steps that have a reference (NaN compares as a failure).
func (p Params) Check(sums []complex128) (bool, float64) {
	ok := len(sums) == len(p.Ref)
	worst := 0.0
	for i, s := range sums {
		if i >= len(p.Ref) {
			break
		}
		e := cmplx.Abs((s - p.Ref[i]) / p.Ref[i])
		if !(e <= Epsilon) {
			ok = false
		}
		if e > worst || math.IsNaN(e) {
			worst = e
		}
	}
	return ok, worst
}

// Result is the outcome of an FT run.
type Result struct {
	Params   Params
	Sums     []complex128 // checksum of every step
	Seconds  float64      // timed section
	Verified bool
	RelErr   float64 // largest |sum − ref| / |ref| over the steps
}

// Mops returns the result's Mop/s by NPB's operation count.
func (r Result) Mops() float64 { return r.Params.Mops(r.Seconds) }

// Report returns the NPB report block for the result.
func (r Result) Report(ranks int) npb.Report {
	p := r.Params
	extra := []string{fmt.Sprintf("Error = %.13E", r.RelErr)}
	if n := len(r.Sums); n > 0 {
		extra = append([]string{fmt.Sprintf("Checksum = %.12E %.12E", real(r.Sums[n-1]), imag(r.Sums[n-1]))}, extra...)
	}
	return npb.Report{
		Name: "FT", Class: p.Class, Size: fmt.Sprintf("%dx%dx%d", p.NX, p.NY, p.NZ),
		Iterations: p.NIter, Ranks: ranks, Seconds: r.Seconds, Mops: r.Mops(),
		OpType: "floating point", Verified: r.Verified, Extra: extra,
	}
}

// StepLine is NPB's progress line for the checksum of step it.
func StepLine(it int, sum complex128) string {
	return fmt.Sprintf(" T = %4d     Checksum = %22.12E%22.12E\n", it, real(sum), imag(sum))
}
