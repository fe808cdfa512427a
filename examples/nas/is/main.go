// Command is is the NPB IS benchmark (integer sort) on goarmci's Global Arrays layer.
//
//	goarmci run -np 4 ./examples/nas/is -class A
//	go run ./examples/nas/is -class W -serial   # the serial reference, no runtime
//
// Rank 0 prints the NPB report (" Class = A", " Ranks = 4", " Verification = SUCCESSFUL",
// " Time in seconds = ...", " Mop/s total = ..."); the exit status is 1 when the verification
// fails, 2 on a usage or runtime error. The kernel is in internal/isga (distributed) and
// internal/is (serial reference); the command shell in internal/driver.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/goarmci/goarmci/examples/nas/internal/driver"
	"github.com/goarmci/goarmci/examples/nas/internal/is"
	"github.com/goarmci/goarmci/examples/nas/internal/isga"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/rma"
)

var kernel = driver.Kernel{Name: "is", Flags: func(fs *flag.FlagSet) func(npb.Class) (driver.Problem, error) {
	buckets := fs.Bool("buckets", false, "with -serial: rank through NPB's bucket sort (USE_BUCKETS) instead of direct key counts")
	return func(c npb.Class) (driver.Problem, error) {
		p, err := is.ParamsFor(c)
		if err != nil {
			return nil, err
		}
		return problem{p: p, buckets: *buckets}, nil
	}
}}

func main() { driver.Main(kernel) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return driver.Run(ctx, kernel, args, stdout, stderr)
}

type problem struct {
	p       is.Params
	buckets bool
}

func (pr problem) Header(w io.Writer, ranks int, mode string) {
	fmt.Fprintf(w, "\n\n NAS Parallel Benchmarks (goarmci, %s) - IS Benchmark\n\n", mode)
	fmt.Fprintf(w, " Size:  %d  (class %s)\n Iterations:  %d\n Ranks:  %d\n", pr.p.NumKeys(), pr.p.Class, is.MaxIterations, ranks)
}

func (pr problem) SerialMode() string {
	if pr.buckets {
		return "serial reference, buckets"
	}
	return "serial reference"
}

func (pr problem) Serial(io.Writer) (driver.Outcome, error) {
	run := is.Serial
	if pr.buckets {
		run = is.SerialBuckets
	}
	res, err := run(pr.p)
	return outcome{res}, err
}

func (pr problem) Parallel(ctx context.Context, rt *rma.Runtime, log io.Writer) (driver.Outcome, error) {
	res, err := isga.Run(ctx, rt, pr.p, log)
	return outcome{res}, err
}

type outcome struct{ r is.Result }

func (o outcome) Verified() bool     { return o.r.Verified }
func (o outcome) Failures() []string { return o.r.Failures }

func (o outcome) Report(w io.Writer, ranks int) {
	for _, f := range o.r.Failures {
		fmt.Fprintln(w, f)
	}
	_ = o.r.Report(ranks).Print(w)
}
