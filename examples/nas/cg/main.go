// Command cg is the NPB CG benchmark (conjugate gradient) on goarmci's Global Arrays layer.
//
//	goarmci run -np 4 ./examples/nas/cg -class A
//	go run ./examples/nas/cg -class W -serial   # the serial reference, no runtime
//
// Rank 0 prints the NPB report (" Class = A", " Ranks = 4", " Verification = SUCCESSFUL",
// " Time in seconds = ...", " Mop/s total = ...", " Zeta = ..."); the exit status is 1 when the
// verification fails, 2 on a usage or runtime error. -niter N shortens the run (and fails the
// verification unless N is the class's iteration count). The kernel is in internal/cgga (distributed)
// and internal/cg (serial reference).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/goarmci/goarmci/examples/nas/internal/cg"
	"github.com/goarmci/goarmci/examples/nas/internal/cgga"
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
	fs := flag.NewFlagSet("cg", flag.ContinueOnError)
	fs.SetOutput(stderr)
	class := fs.String("class", "S", "problem class: S, W, A or B")
	serial := fs.Bool("serial", false, "run the serial reference kernel (no runtime, one process)")
	niter := fs.Int("niter", 0, "outer iterations instead of the class's (for quick runs; the verification then fails)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := npb.ParseClass(*class)
	if err != nil {
		fmt.Fprintln(stderr, "cg:", err)
		return 2
	}
	p, err := cg.ParamsFor(c)
	if err != nil {
		fmt.Fprintln(stderr, "cg:", err)
		return 2
	}
	if *niter < 0 {
		fmt.Fprintln(stderr, "cg: -niter must be positive")
		return 2
	}
	if *niter > 0 {
		p.NIter = *niter
	}
	if *serial {
		header(stdout, p, 1, "serial reference")
		res, err := cg.Serial(p, stdout)
		if err != nil {
			fmt.Fprintln(stderr, "cg:", err)
			return 2
		}
		return report(stdout, res, 1)
	}
	rt, err := rma.Init(ctx, nil)
	if err != nil {
		fmt.Fprintln(stderr, "cg: init:", err)
		return 2
	}
	var log io.Writer
	if rt.Rank() == 0 {
		log = stdout
		header(stdout, p, rt.Size(), "Global Arrays")
	}
	res, err := cgga.Run(ctx, rt, p, log)
	code := 0
	if err == nil {
		if !res.Verified {
			code = 1
		}
		// rank 0 reports before Finalize's barrier, so no rank exits (and no launcher stops
		// rank 0) before the report is out
		if rt.Rank() == 0 {
			code = report(stdout, res, rt.Size())
		}
	}
	if ferr := rt.Finalize(ctx); ferr != nil && err == nil {
		err = fmt.Errorf("finalize: %w", ferr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cg: rank %d: %v\n", rt.Rank(), err)
		return 2
	}
	return code
}

func header(w io.Writer, p cg.Params, ranks int, mode string) {
	fmt.Fprintf(w, "\n\n NAS Parallel Benchmarks (goarmci, %s) - CG Benchmark\n\n", mode)
	fmt.Fprintf(w, " Size: %11d\n Iterations: %5d\n Ranks: %5d\n", p.NA, p.NIter, ranks)
}

func report(w io.Writer, res cg.Result, ranks int) int {
	if res.Verified {
		fmt.Fprintf(w, " VERIFICATION SUCCESSFUL\n")
	} else {
		fmt.Fprintf(w, " VERIFICATION FAILED\n The correct zeta is %.13E\n", res.Params.ZetaVerify)
	}
	_ = res.Report(ranks).Print(w)
	if !res.Verified {
		return 1
	}
	return 0
}
