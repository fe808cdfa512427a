// Command is is the NPB IS benchmark (integer sort) on goarmci's Global Arrays layer.
//
//	goarmci run -np 4 ./examples/nas/is -class A
//	go run ./examples/nas/is -class W -serial   # the serial reference, no runtime
//
// Rank 0 prints the NPB report (" Class = A", " Ranks = 4", " Verification = SUCCESSFUL",
// " Time in seconds = ...", " Mop/s total = ..."); the exit status is 1 when the verification
// fails, 2 on a usage or runtime error. The kernel is in internal/isga (distributed) and
// internal/is (serial reference).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/goarmci/goarmci/examples/nas/internal/is"
	"github.com/goarmci/goarmci/examples/nas/internal/isga"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/rma"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("is", flag.ContinueOnError)
	fs.SetOutput(stderr)
	class := fs.String("class", "S", "problem class: S, W, A or B")
	serial := fs.Bool("serial", false, "run the serial reference kernel (no runtime, one process)")
	buckets := fs.Bool("buckets", false, "with -serial: rank through NPB's bucket sort (USE_BUCKETS) instead of direct key counts")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := npb.ParseClass(*class)
	if err != nil {
		fmt.Fprintln(stderr, "is:", err)
		return 2
	}
	p, err := is.ParamsFor(c)
	if err != nil {
		fmt.Fprintln(stderr, "is:", err)
		return 2
	}
	if *serial {
		run, mode := is.Serial, "serial reference"
		if *buckets {
			run, mode = is.SerialBuckets, "serial reference, buckets"
		}
		header(stdout, p, 1, mode)
		res, err := run(p)
		if err != nil {
			fmt.Fprintln(stderr, "is:", err)
			return 2
		}
		return report(stdout, res, 1)
	}
	rt, err := rma.Init(ctx, nil)
	if err != nil {
		fmt.Fprintln(stderr, "is: init:", err)
		return 2
	}
	var log io.Writer
	if rt.Rank() == 0 {
		log = stdout
		header(stdout, p, rt.Size(), "Global Arrays")
	}
	res, err := isga.Run(ctx, rt, p, log)
	code := 0
	if err == nil {
		if !res.Verified {
			code = 1
		}
		// rank 0 reports before Finalize's barrier, so no rank exits (and no launcher stops
		// rank 0) before the report is out
		if rt.Rank() == 0 {
			code = report(stdout, res, rt.Size())
		} else {
			for _, f := range res.Failures {
				fmt.Fprintf(stderr, "is: rank %d: %s\n", rt.Rank(), f)
			}
		}
	}
	if ferr := rt.Finalize(ctx); ferr != nil && err == nil {
		err = fmt.Errorf("finalize: %w", ferr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "is: rank %d: %v\n", rt.Rank(), err)
		return 2
	}
	return code
}

func header(w io.Writer, p is.Params, ranks int, mode string) {
	fmt.Fprintf(w, "\n\n NAS Parallel Benchmarks (goarmci, %s) - IS Benchmark\n\n", mode)
	fmt.Fprintf(w, " Size:  %d  (class %s)\n Iterations:  %d\n Ranks:  %d\n", p.NumKeys(), p.Class, is.MaxIterations, ranks)
}

func report(w io.Writer, res is.Result, ranks int) int {
	for _, f := range res.Failures {
		fmt.Fprintln(w, f)
	}
	_ = res.Report(ranks).Print(w)
	if !res.Verified {
		return 1
	}
	return 0
}
