package ft

import (
	"fmt"
	"io"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Serial runs the serial reference FT of class p (Timed around Steps on the whole grid). If log
// is not nil, the initialization time and NPB's "T = ... Checksum = ..." lines are written to
// it. Errors: ErrRange.
func Serial(p Params, log io.Writer) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	n := p.NX * p.NY * p.NZ
	u := Block{Data: make([]complex128, n), NZ: p.NZ, NY: p.NY, NX: p.NX}
	state := make([]complex128, n)
	sums, secs, err := Timed(p.NIter, log, func(niter int, log io.Writer) ([]complex128, error) {
		return Steps(p, u, u, state, niter, Exchange{}, log)
	}, nil)
	if err != nil {
		return Result{}, err
	}
	ok, rel := p.Check(sums)
	return Result{Params: p, Sums: sums, Seconds: secs, Verified: ok, RelErr: rel}, nil
}

// Timed is NPB's main program around steps (a run of Steps with niter time steps): one untimed
// pass of the setup and the forward transform, steps(0, nil), to touch the memory; then
// barrier (nil: none) and the timed steps(niter, log). It returns the checksums and the timed
// seconds, and writes the initialization time to log if not nil; errors are those of steps and
// barrier.
func Timed(niter int, log io.Writer, steps func(niter int, log io.Writer) ([]complex128, error), barrier func() error) ([]complex128, float64, error) {
	var tinit npb.Timer
	tinit.Start()
	if _, err := steps(0, nil); err != nil {
		return nil, 0, err
	}
	tinit.Stop()
	if log != nil {
		fmt.Fprintf(log, "\n Initialization time = %12.4f\n\n", tinit.Seconds())
	}
	if barrier != nil {
		if err := barrier(); err != nil {
			return nil, 0, err
		}
	}
	var t npb.Timer
	t.Start()
	sums, err := steps(niter, log)
	t.Stop()
	return sums, t.Seconds(), err
}
