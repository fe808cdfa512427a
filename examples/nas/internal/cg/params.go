// Package cg is the NPB CG kernel (conjugate gradient, inverse power method on a random sparse
// symmetric positive definite matrix): the class parameters, the matrix generator makea (with
// sprnvc, vecset and sparse) for any block of rows, the building blocks of conj_grad, and the
// serial reference run with the official verification.
//
// Source: NPB 3.x CG (cg.f90: makea, sprnvc, vecset, sparse, conj_grad); the specification in
// NAS report RNR-94-007 §2.4 (kernel CG).
package cg

import (
	"fmt"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Constants common to every class.
const (
	// RCond is the condition number target of the generated matrix (NPB's rcond = 0.1).
	RCond = 0.1
	// CGItMax is the number of conjugate gradient iterations per outer iteration (cgitmax).
	CGItMax = 25
	// Epsilon bounds the relative error |zeta - zeta_verify| / zeta_verify.
	Epsilon = 1e-10
)

// Params are the class parameters of CG.
type Params struct {
	Class      npb.Class
	NA         int     // matrix order (rows = columns)
	NonZer     int     // nonzeros per generated sparse vector
	NIter      int     // outer (inverse power) iterations
	Shift      float64 // eigenvalue shift
	ZetaVerify float64 // official zeta after NIter iterations
}

var classes = map[npb.Class]Params{
	npb.ClassS: {npb.ClassS, 1400, 7, 15, 10, 8.5971775078648},
	npb.ClassW: {npb.ClassW, 7000, 8, 15, 12, 10.362595087124},
	npb.ClassA: {npb.ClassA, 14000, 11, 15, 20, 17.130235054029},
	npb.ClassB: {npb.ClassB, 75000, 13, 75, 60, 22.712745482631},
}

// ParamsFor returns the parameters of class c, or npb.ErrClass.
func ParamsFor(c npb.Class) (Params, error) {
	p, ok := classes[c]
	if !ok {
		return Params{}, fmt.Errorf("cg class %s: %w", c, npb.ErrClass)
	}
	return p, nil
}

// Validate checks that the parameters describe a runnable problem: NA ≥ 1, 1 ≤ NonZer ≤ NA
// (sprnvc draws NonZer distinct positions out of NA and could never finish otherwise), NA below
// 2^30, NIter ≥ 0. Errors: ErrRange.
func (p Params) Validate() error {
	if p.NA <= 0 || p.NA >= 1<<30 || p.NonZer <= 0 || p.NonZer > p.NA || p.NIter < 0 {
		return fmt.Errorf("cg: na %d, nonzer %d, niter %d: %w", p.NA, p.NonZer, p.NIter, ErrRange)
	}
	return nil
}

// Mops returns NPB's Mop/s for CG: 2·niter·na·(3 + nonzer(nonzer+1) + 25(5 + nonzer(nonzer+1)) + 3)
// floating-point operations, divided by seconds, in millions.
func (p Params) Mops(seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	nz := float64(p.NonZer) * float64(p.NonZer+1)
	return 1e-6 * 2 * float64(p.NIter) * float64(p.NA) * (3 + nz + 25*(5+nz) + 3) / seconds
}

// Verify returns whether zeta matches the official value within Epsilon (relative), and the
// relative error.
func (p Params) Verify(zeta float64) (bool, float64) {
	err := (zeta - p.ZetaVerify) / p.ZetaVerify
	if err < 0 {
		err = -err
	}
	return err <= Epsilon, err // NaN compares false
}
