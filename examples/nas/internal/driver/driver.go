// Package driver is the command-line shell every NAS kernel of this tree shares: flags (-class,
// -serial, -sim, the kernel's own), the serial reference, the Global Arrays run under rma.Init or
// on N ranks of this process over the simulated network ibv/fabric (-sim N), the
// NPB header and report on rank 0 (before Finalize's barrier, so no launcher stops rank 0 before
// its report is out), and NPB's exit statuses: 0 verified, 1 verification failed, 2 usage or
// runtime error.
package driver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// Kernel is one kernel's part: Flags registers its own flags on fs and returns the function that
// builds a Problem for the parsed class once the flags are parsed.
type Kernel struct {
	Name  string // command name, e.g. "cg"
	Flags func(fs *flag.FlagSet) func(npb.Class) (Problem, error)
}

// Problem is one class of a kernel, ready to run.
type Problem interface {
	// Header prints the NPB banner for ranks ranks; mode names the implementation.
	Header(w io.Writer, ranks int, mode string)
	// SerialMode names the serial reference's variant; Serial runs it (no runtime, one
	// process), writing its progress to stdout.
	SerialMode() string
	Serial(stdout io.Writer) (Outcome, error)
	// Parallel runs the Global Arrays version on rt; log is rank 0's progress output (nil on the
	// other ranks).
	Parallel(ctx context.Context, rt *rma.Runtime, log io.Writer) (Outcome, error)
}

// Outcome is a finished run.
type Outcome interface {
	Verified() bool
	// Report prints the verification lines and the NPB report.
	Report(w io.Writer, ranks int)
	// Failures are the rank's own verification failures, printed to its stderr when rank 0
	// does not report them.
	Failures() []string
}

// Run parses args and runs the kernel; it returns the exit status.
func Run(ctx context.Context, k Kernel, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(k.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	class := fs.String("class", "S", "problem class: S, W, A or B")
	serial := fs.Bool("serial", false, "run the serial reference kernel (no runtime, one process)")
	cpuprofile := fs.String("cpuprofile", "", "write each rank's CPU profile of the timed kernel to `FILE`.rankN (FILE with -serial)")
	sim := fs.Int("sim", 0, "run `N` ranks in this process on the simulated network ibv/fabric (one node each), no launcher")
	prepare := k.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: %v\n", k.Name, err)
		return 2
	}
	c, err := npb.ParseClass(*class)
	if err != nil {
		return fail(err)
	}
	p, err := prepare(c)
	if err != nil {
		return fail(err)
	}
	if *serial {
		p.Header(stdout, 1, p.SerialMode())
		stopProfile, err := startProfile(*cpuprofile)
		if err != nil {
			return fail(err)
		}
		out, err := p.Serial(stdout)
		stopProfile()
		if err != nil {
			return fail(err)
		}
		return report(stdout, out, 1)
	}
	if *sim < 0 {
		return fail(fmt.Errorf("-sim %d: want a positive number of ranks", *sim))
	}
	if *sim > 0 {
		return simulate(ctx, k, p, *sim, *cpuprofile, stdout, stderr)
	}
	rt, err := rma.Init(ctx, nil)
	if err != nil {
		return fail(fmt.Errorf("init: %w", err))
	}
	var log io.Writer
	if rt.Rank() == 0 {
		log = stdout
		p.Header(stdout, rt.Size(), "Global Arrays")
	}
	name := *cpuprofile
	if name != "" {
		name = fmt.Sprintf("%s.rank%d", name, rt.Rank())
	}
	stopProfile, err := startProfile(name)
	if err != nil {
		_ = rt.Finalize(ctx)
		return fail(err)
	}
	out, err := p.Parallel(ctx, rt, log)
	stopProfile()
	code := 0
	if err == nil {
		if rt.Rank() == 0 {
			code = report(stdout, out, rt.Size())
		} else if !out.Verified() {
			code = 1
			for _, f := range out.Failures() {
				fmt.Fprintf(stderr, "%s: rank %d: %s\n", k.Name, rt.Rank(), f)
			}
		}
	}
	if ferr := rt.Finalize(ctx); ferr != nil && err == nil {
		err = fmt.Errorf("finalize: %w", ferr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: rank %d: %v\n", k.Name, rt.Rank(), err)
		return 2
	}
	return code
}

// simulate runs p on n ranks of this process over ibv/fabric (rmatest.StartFabric): the same
// Parallel as a real job's ranks, rank 0 printing the header and the report. The CPU profile, if
// any, is the whole process's.
func simulate(ctx context.Context, k Kernel, p Problem, n int, cpuprofile string, stdout, stderr io.Writer) int {
	stopProfile, err := startProfile(cpuprofile)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", k.Name, err)
		return 2
	}
	var mu sync.Mutex // stderr and code, written by every rank
	code := 0
	err = rmatest.StartFabric(ctx, n, fabric.Config{}, func(ctx context.Context, rt *rma.Runtime) error {
		var log io.Writer
		if rt.Rank() == 0 {
			log = stdout
			p.Header(stdout, rt.Size(), "Global Arrays, simulated fabric")
		}
		out, err := p.Parallel(ctx, rt, log)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if rt.Rank() == 0 {
			code = max(code, report(stdout, out, rt.Size()))
		} else if !out.Verified() {
			code = max(code, 1)
			for _, f := range out.Failures() {
				fmt.Fprintf(stderr, "%s: rank %d: %s\n", k.Name, rt.Rank(), f)
			}
		}
		return nil
	})
	stopProfile()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", k.Name, err)
		return 2
	}
	return code
}

// startProfile starts a CPU profile into the file name (nothing when name is empty) and returns
// the function that stops it.
func startProfile(name string) (stop func(), err error) {
	if name == "" {
		return func() {}, nil
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func report(w io.Writer, out Outcome, ranks int) int {
	out.Report(w, ranks)
	if !out.Verified() {
		return 1
	}
	return 0
}

// Main runs the kernel as a command: os.Args, stdout and stderr, interrupted by SIGINT or
// SIGTERM (the context ends; the runtime's blocking calls return), then exits with the status.
func Main(k Kernel) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, k, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// IterFlag defines -niter on fs: what (e.g. "V-cycles") to run instead of the class's count, for
// quick runs whose verification then fails. The function it returns sets *n to the flag's value
// when one was given, and refuses a negative one.
func IterFlag(fs *flag.FlagSet, what string) func(n *int) error {
	niter := fs.Int("niter", 0, what+" instead of the class's (for quick runs; the verification then fails)")
	return func(n *int) error {
		if *niter < 0 {
			return errors.New("-niter must be positive")
		}
		if *niter > 0 {
			*n = *niter
		}
		return nil
	}
}
