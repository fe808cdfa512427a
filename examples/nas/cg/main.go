// Command cg is the NPB CG benchmark (conjugate gradient) on goarmci's Global Arrays layer.
//
//	goarmci run -np 4 ./examples/nas/cg -class A
//	go run ./examples/nas/cg -class W -serial   # the serial reference, no runtime
//
// Rank 0 prints the NPB report (" Class = A", " Ranks = 4", " Verification = SUCCESSFUL",
// " Time in seconds = ...", " Mop/s total = ...", " Zeta = ..."); the exit status is 1 when the
// verification fails, 2 on a usage or runtime error. -niter N shortens the run (and fails the
// verification unless N is the class's iteration count). The kernel is in internal/cgga (distributed)
// and internal/cg (serial reference); the command shell in internal/driver.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/goarmci/goarmci/examples/nas/internal/cg"
	"github.com/goarmci/goarmci/examples/nas/internal/cgga"
	"github.com/goarmci/goarmci/examples/nas/internal/driver"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/rma"
)

var kernel = driver.Kernel{Name: "cg", Flags: func(fs *flag.FlagSet) func(npb.Class) (driver.Problem, error) {
	niter := driver.IterFlag(fs, "outer iterations")
	return func(c npb.Class) (driver.Problem, error) {
		p, err := cg.ParamsFor(c)
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

type problem struct{ p cg.Params }

func (pr problem) Header(w io.Writer, ranks int, mode string) {
	fmt.Fprintf(w, "\n\n NAS Parallel Benchmarks (goarmci, %s) - CG Benchmark\n\n", mode)
	fmt.Fprintf(w, " Size: %11d\n Iterations: %5d\n Ranks: %5d\n", pr.p.NA, pr.p.NIter, ranks)
}

func (pr problem) SerialMode() string { return "serial reference" }

func (pr problem) Serial(stdout io.Writer) (driver.Outcome, error) {
	res, err := cg.Serial(pr.p, stdout)
	return outcome{res}, err
}

func (pr problem) Parallel(ctx context.Context, rt *rma.Runtime, log io.Writer) (driver.Outcome, error) {
	res, err := cgga.Run(ctx, rt, pr.p, log)
	return outcome{res}, err
}

type outcome struct{ r cg.Result }

func (o outcome) Verified() bool     { return o.r.Verified }
func (o outcome) Failures() []string { return nil }

func (o outcome) Report(w io.Writer, ranks int) {
	if o.r.Verified {
		fmt.Fprintf(w, " VERIFICATION SUCCESSFUL\n")
	} else {
		fmt.Fprintf(w, " VERIFICATION FAILED\n The correct zeta is %.13E\n", o.r.Params.ZetaVerify)
	}
	_ = o.r.Report(ranks).Print(w)
}
