package ft

import (
	"fmt"
	"io"
)

// Exchange is what a distributed run adds to Steps: ToV fills the caller's v block from the u
// blocks of every rank (the forward transpose), ToU the u block from the v blocks (the inverse
// one), and Sum replaces a step's checksum share in sum[0] by the sum of every rank's share.
// The zero Exchange is the serial run's: u and v are the same block, the share is the sum.
type Exchange struct {
	ToV, ToU func() error
	Sum      func(sum []complex128) error
}

// Steps is the body of FT on one rank, as NPB times it: the evolution factors of the v block,
// the initial conditions of the u block, the transforms' plans, the forward 3-D FFT (x and y in
// u, ex.ToV, z in v) into state (the spectrum, v's length), then niter steps of evolve (into v),
// inverse 3-D FFT (z in v, ex.ToU, y and x in u) and checksum (u's share, ex.Sum). The u block
// holds whole x- and y-lines, the v block whole x- and z-lines; serially both are the whole grid
// and the same block. It returns the checksums and writes NPB's "T = ... Checksum = ..." lines to
// log if not nil. Errors: ErrShape, ErrRange, the exchange's errors.
func Steps(p Params, u, v Block, state []complex128, niter int, ex Exchange, log io.Writer) ([]complex128, error) {
	if len(state) < v.Len() {
		return nil, fmt.Errorf("ft: spectrum of %d elements for a block of %d: %w", len(state), v.Len(), ErrShape)
	}
	tw, err := Twiddle(v, p)
	if err != nil {
		return nil, err
	}
	if err := InitialConditions(u, p); err != nil {
		return nil, err
	}
	t, err := NewFFT(p)
	if err != nil {
		return nil, err
	}
	forward := []func() error{
		func() error { return t.X(u, Forward) },
		func() error { return t.Y(u, Forward) },
		ex.ToV,
		func() error { return t.Z(v, Forward) },
	}
	inverse := []func() error{
		func() error { return t.Z(v, Inverse) },
		ex.ToU,
		func() error { return t.Y(u, Inverse) },
		func() error { return t.X(u, Inverse) },
	}
	if err := run(forward); err != nil {
		return nil, err
	}
	copy(state, v.Data[:v.Len()])
	sums := make([]complex128, niter)
	for it := 1; it <= niter; it++ {
		Evolve(state, tw, v.Data)
		if err := run(inverse); err != nil {
			return nil, err
		}
		if sums[it-1], err = Checksum(u, p); err != nil {
			return nil, err
		}
		if ex.Sum != nil {
			if err := ex.Sum(sums[it-1 : it]); err != nil {
				return nil, err
			}
		}
		if log != nil {
			fmt.Fprint(log, StepLine(it, sums[it-1]))
		}
	}
	return sums, nil
}

// run calls the non-nil functions of fs in order, stopping at the first error.
func run(fs []func() error) error {
	for _, f := range fs {
		if f == nil {
			continue
		}
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}
