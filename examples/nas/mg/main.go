// Command mg is the NPB MG benchmark (V-cycle multigrid on a periodic 3-D grid, [NPB]) on
// goarmci's Global Arrays layer, with ghost cells for NPB's boundary exchange.
//
//	goarmci run -np 4 ./examples/nas/mg -class A
//	go run ./examples/nas/mg -class W -serial   # the serial reference, no runtime
//
// Rank 0 prints the NPB report (" Class = A", " Ranks = 4", " Verification = SUCCESSFUL",
// " Time in seconds = ...", " Mop/s total = ...", " L2 Norm = ..."); the exit status is 1 when
// the verification fails, 2 on a usage or runtime error. -niter N shortens the run (and fails the
// verification unless N is the class's iteration count); -replicate N sets the largest grid
// extent computed whole on every rank rather than distributed (see internal/mgga). The kernel is
// in internal/mgga (distributed) and internal/mg (serial reference and stencils); the command
// shell in internal/driver.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/goarmci/goarmci/examples/nas/internal/driver"
	"github.com/goarmci/goarmci/examples/nas/internal/mg"
	"github.com/goarmci/goarmci/examples/nas/internal/mgga"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/rma"
)

var kernel = driver.Kernel{Name: "mg", Flags: func(fs *flag.FlagSet) func(npb.Class) (driver.Problem, error) {
	niter := driver.IterFlag(fs, "V-cycles")
	repl := fs.Int("replicate", mgga.DefaultReplicate, "largest grid `extent` computed replicated on every rank (-1: only the levels too small to distribute)")
	return func(c npb.Class) (driver.Problem, error) {
		p, err := mg.ParamsFor(c)
		if err != nil {
			return nil, err
		}
		if err := niter(&p.NIter); err != nil {
			return nil, err
		}
		if *repl == 0 || *repl < -1 {
			return nil, errors.New("-replicate must be a grid extent or -1")
		}
		return problem{p, mgga.Config{Replicate: *repl}}, nil
	}
}}

func main() { driver.Main(kernel) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return driver.Run(ctx, kernel, args, stdout, stderr)
}

type problem struct {
	p   mg.Params
	cfg mgga.Config
}

func (pr problem) Header(w io.Writer, ranks int, mode string) {
	n := pr.p.N
	fmt.Fprintf(w, "\n\n NAS Parallel Benchmarks (goarmci, %s) - MG Benchmark\n\n", mode)
	fmt.Fprintf(w, " Size: %4dx%4dx%4d  (class %s)\n Iterations: %4d\n Ranks: %6d\n", n, n, n, pr.p.Class, pr.p.NIter, ranks)
}

func (pr problem) SerialMode() string { return "serial reference" }

func (pr problem) Serial(stdout io.Writer) (driver.Outcome, error) {
	res, err := mg.Serial(pr.p, stdout)
	return outcome{res}, err
}

func (pr problem) Parallel(ctx context.Context, rt *rma.Runtime, log io.Writer) (driver.Outcome, error) {
	res, err := mgga.Run(ctx, rt, pr.p, pr.cfg, log)
	return outcome{res}, err
}

type outcome struct{ r mg.Result }

func (o outcome) Verified() bool     { return o.r.Verified }
func (o outcome) Failures() []string { return nil }

func (o outcome) Report(w io.Writer, ranks int) {
	fmt.Fprintf(w, "\n Benchmark completed\n")
	if o.r.Verified {
		fmt.Fprintf(w, " VERIFICATION SUCCESSFUL\n")
	} else {
		fmt.Fprintf(w, " VERIFICATION FAILED\n The correct L2 Norm is %.13E\n", o.r.Params.Verify)
	}
	_ = o.r.Report(ranks).Print(w)
}
