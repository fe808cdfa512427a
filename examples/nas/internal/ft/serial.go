package ft

import (
	"fmt"
	"io"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Serial runs the serial reference FT of class p as NPB's main program does: one untimed pass
// of the setup and the forward transform (to touch the memory), then the timed section: the
// evolution factors, the initial conditions, the transforms' plans, the forward 3-D FFT, and
// NIter steps of evolve, inverse 3-D FFT and checksum. If log is not nil, the initialization
// time and NPB's "T = ... Checksum = ..." lines are written to it. Errors: ErrRange.
func Serial(p Params, log io.Writer) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	n := p.NX * p.NY * p.NZ
	u := Block{Data: make([]complex128, n), NZ: p.NZ, NY: p.NY, NX: p.NX}
	state := make([]complex128, n)
	var tinit npb.Timer
	tinit.Start()
	if _, err := Steps(p, u, u, state, 0, Exchange{}, nil); err != nil {
		return Result{}, err
	}
	tinit.Stop()
	if log != nil {
		fmt.Fprintf(log, "\n Initialization time = %12.4f\n\n", tinit.Seconds())
	}
	var t npb.Timer
	t.Start()
	sums, err := Steps(p, u, u, state, p.NIter, Exchange{}, log)
	if err != nil {
		return Result{}, err
	}
	t.Stop()
	ok, rel := p.Check(sums)
	return Result{Params: p, Sums: sums, Seconds: t.Seconds(), Verified: ok, RelErr: rel}, nil
}
