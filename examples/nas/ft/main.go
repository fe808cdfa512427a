// Command ft is the NPB FT benchmark (a 3-D diffusion PDE solved by forward and inverse 3-D
// FFTs, [NPB]) on goarmci's Global Arrays layer, the transposes being NGA_Gets between two
// slab distributions of the field.
//
//	goarmci run -np 4 ./examples/nas/ft -class A
//	go run ./examples/nas/ft -class W -serial   # the serial reference, no runtime
//
// Rank 0 prints NPB's "T = ... Checksum = ..." line of every step and the NPB report (" Class =
// A", " Ranks = 4", " Verification = SUCCESSFUL", " Time in seconds = ...", " Mop/s total =
// ...", " Checksum = ..."); the exit status is 1 when the verification fails, 2 on a usage or
// runtime error. -niter N shortens the run (and fails the verification unless N is the class's
// step count). The kernel is in internal/ftga (distributed) and internal/ft (serial reference,
// FFTs, initial conditions, checksum); the command shell in internal/driver.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/goarmci/goarmci/examples/nas/internal/driver"
	"github.com/goarmci/goarmci/examples/nas/internal/ft"
	"github.com/goarmci/goarmci/examples/nas/internal/ftga"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/rma"
)

var kernel = driver.Kernel{Name: "ft", Flags: func(fs *flag.FlagSet) func(npb.Class) (driver.Problem, error) {
	niter := driver.IterFlag(fs, "time steps")
	return func(c npb.Class) (driver.Problem, error) {
		p, err := ft.ParamsFor(c)
		if err != nil {
			return nil, err
		}
		if err := niter(&p.NIter); err != nil {
			return nil, err
		}
		return problem{p}, nil
	}
}}

func main() { driver.Main(kernel) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return driver.Run(ctx, kernel, args, stdout, stderr)
}

type problem struct{ p ft.Params }

func (pr problem) Header(w io.Writer, ranks int, mode string) {
	p := pr.p
	fmt.Fprintf(w, "\n\n NAS Parallel Benchmarks (goarmci, %s) - FT Benchmark\n\n", mode)
	fmt.Fprintf(w, " Size: %4dx%4dx%4d  (class %s)\n Iterations: %4d\n Ranks: %6d\n", p.NX, p.NY, p.NZ, p.Class, p.NIter, ranks)
}

func (pr problem) SerialMode() string { return "serial reference" }

func (pr problem) Serial(stdout io.Writer) (driver.Outcome, error) {
	res, err := ft.Serial(pr.p, stdout)
	return outcome{res}, err
}

func (pr problem) Parallel(ctx context.Context, rt *rma.Runtime, log io.Writer) (driver.Outcome, error) {
	res, err := ftga.Run(ctx, rt, pr.p, log)
	return outcome{res}, err
}

type outcome struct{ r ft.Result }

func (o outcome) Verified() bool     { return o.r.Verified }
func (o outcome) Failures() []string { return nil }

func (o outcome) Report(w io.Writer, ranks int) {
	fmt.Fprintf(w, "\n Benchmark completed\n")
	if o.r.Verified {
		fmt.Fprintf(w, " VERIFICATION SUCCESSFUL\n")
	} else {
		fmt.Fprintf(w, " VERIFICATION FAILED\n")
		if k := min(len(o.r.Sums), len(o.r.Params.Ref)); k > 0 {
			ref := o.r.Params.Ref[k-1]
			fmt.Fprintf(w, " The correct checksum of step %d is %.12E %.12E\n", k, real(ref), imag(ref))
		}
	}
	_ = o.r.Report(ranks).Print(w)
}
