package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goarmci/goarmci/bench"
)

const simUsage = `usage: goarmci bench hotspot -sim [flags]

Hot-spot experiments of [Vishnu07 ch. 7-8] on the simulated fat tree (ibv/fabric), all ranks in
this process, timed on the fabric's virtual clock (testing/synctest): DRC (displaced ring, average
per-pair bandwidth in MB/s) or Alltoall (latency of one exchange in us), one row per job size
(-np), one column per configuration (-runs, or -paths with -policy).

Flags:
`

// simFlags are the command line of `goarmci bench hotspot -sim`.
type simFlags struct {
	np, runs, policy, pattern, placement, size, format, plot string
	paths, iters, window, disp, hostsPerLeaf, spines         int
	gbps, hot                                                float64
	shuffle                                                  uint64
	verbose                                                  bool
}

// isSim reports whether a scenario command line asks for the simulation.
func isSim(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		return a == "-sim" || a == "--sim" || strings.HasPrefix(a, "-sim=") || strings.HasPrefix(a, "--sim=")
	})
}

func parseSim(stderr io.Writer, args []string) (*simFlags, bench.SimOptions, error) {
	var f simFlags
	var o bench.SimOptions
	fs := flag.NewFlagSet("goarmci bench hotspot -sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, simUsage)
		fs.PrintDefaults()
	}
	fs.Bool("sim", true, "run on the simulated fat tree (this command)")
	fs.StringVar(&f.np, "np", "24,32,48,64", "job sizes (comma list of ranks)")
	fs.StringVar(&f.runs, "runs", "", "configurations PATHS/POLICY (comma list; default the dissertation's: 1/binding,4/even,2/hsam,4/hsam,8/hsam,4/bss:2,8/bss:2,12/bss:3,4/fragment)")
	fs.IntVar(&f.paths, "paths", 0, "paths per rail of a single configuration (with -policy; overrides -runs)")
	fs.StringVar(&f.policy, "policy", "adaptive", "stripe policy of the single configuration (-paths)")
	fs.StringVar(&f.pattern, "pattern", bench.SimDRC, "drc or alltoall")
	fs.StringVar(&f.placement, "placement", bench.PlaceSeq, "rank placement: seq or random")
	fs.StringVar(&f.size, "size", "", "bytes per put (K = KiB, M = MiB; default drc 256k, alltoall 64k)")
	fs.IntVar(&f.iters, "iters", 0, "timed iterations: drc windows (default 8), alltoall exchanges (default 4)")
	fs.IntVar(&f.window, "window", 0, "drc: non-blocking puts per completion (default 8)")
	fs.IntVar(&f.disp, "d", 0, "drc: displacement (default the hosts per leaf)")
	fs.IntVar(&f.hostsPerLeaf, "hosts-per-leaf", 0, "hosts per leaf switch (default 12)")
	fs.IntVar(&f.spines, "spines", 0, "spine switches (default 12)")
	fs.Float64Var(&f.gbps, "link-rate", 1, "link capacity in GB/s (10^9 B/s)")
	fs.Float64Var(&f.hot, "hot", 0, "divide the rate of rank 0's path-0 leaf->spine link by this (> 1; 0 = no hot spot)")
	fs.Uint64Var(&f.shuffle, "shuffle", 1, "PRNG seed of the random placement")
	fs.StringVar(&f.format, "format", "text", "text, csv or json")
	fs.StringVar(&f.plot, "plot", "", "also plot into this PNG file")
	fs.BoolVar(&f.verbose, "v", false, "report every run's wall time on stderr")
	var rest []string
	for _, a := range args {
		if a != bench.ScenarioHotspot {
			rest = append(rest, a)
		}
	}
	if err := fs.Parse(rest); err != nil {
		return nil, o, err
	}
	if fs.NArg() > 0 {
		return nil, o, usageError("bench hotspot -sim: unexpected %q", fs.Args())
	}
	for s := range strings.SplitSeq(f.np, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, o, usageError("bench hotspot -sim: -np %q", f.np)
		}
		o.Ranks = append(o.Ranks, n)
	}
	var err error
	switch {
	case f.paths > 0:
		o.Runs = []bench.SimRun{{Paths: f.paths, Policy: f.policy}}
	case f.runs != "":
		if o.Runs, err = bench.ParseSimRuns(f.runs); err != nil {
			return nil, o, usageError("%v", err)
		}
	}
	if f.size != "" {
		if o.Size, err = bench.ParseSize(f.size); err != nil {
			return nil, o, usageError("%v", err)
		}
	}
	switch f.format {
	case "text", "osu", "csv", "json":
	default:
		return nil, o, usageError("bench: -format %q (want text, csv or json)", f.format)
	}
	o.Pattern, o.Placement, o.Iters, o.Window, o.Displacement = f.pattern, f.placement, f.iters, f.window, f.disp
	o.HostsPerLeaf, o.Spines, o.LinkRate, o.HotFactor, o.Shuffle = f.hostsPerLeaf, f.spines, int64(f.gbps*1e9), f.hot, f.shuffle
	return &f, o, nil
}

// simBubble, when set, runs a function inside a synctest bubble instead of a testing.Main of
// this process (this command's tests set it: a test binary cannot start testing.Main again).
var simBubble func(f func())

// runHotspotSim is `goarmci bench hotspot -sim`.
func runHotspotSim(stdout, stderr io.Writer, args []string) error {
	f, o, err := parseSim(stderr, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		var ee *exitError
		if errors.As(err, &ee) {
			return err
		}
		return usageError("%v", err)
	}
	start := time.Now()
	if f.verbose {
		o.Progress = func(n int, run bench.SimRun, wall time.Duration) {
			fmt.Fprintf(stderr, "goarmci: bench hotspot -sim: %d ranks, %s: %.1f s\n", n, run.Name(), wall.Seconds())
		}
	}
	run := func(bubble func(func())) error {
		// not the command's signal context: a bubble must not wait on channels from outside it
		res, err := bench.HotspotSim(context.Background(), o, bubble)
		if err != nil {
			if errors.Is(err, bench.ErrOptions) {
				return usageError("%v", err)
			}
			return &exitError{code: 1, err: err}
		}
		res.Run = bench.CurrentRun()
		res.Header = append(res.Header, fmt.Sprintf("Wall time: %.1f s", time.Since(start).Seconds()))
		if err := res.Write(stdout, f.format); err != nil {
			return err
		}
		if f.plot != "" {
			if err := renderPlots(stderr, []bench.PlotRequest{{Path: f.plot, Result: res}}); err != nil {
				return &exitError{code: 1, err: fmt.Errorf("bench: plot: %w", err)}
			}
		}
		return nil
	}
	if simBubble != nil {
		return run(simBubble)
	}
	return inTestMain(stderr, run)
}

// inTestMain runs body with a bubble of testing/synctest, which needs a *testing.T: it starts the
// testing package's main loop in this process with one test whose function is body, and ends the
// process with body's exit code when it returns (testing.Main would print its verdict on
// standard output; os.Exit skips that). Only a command may do this, and only as its last act.
func inTestMain(stderr io.Writer, body func(bubble func(func())) error) error {
	testing.Init()
	_ = flag.CommandLine.Parse(nil) // the testing flags at their defaults, not the command's
	test := func(t *testing.T) {
		err := body(func(f func()) { synctest.Test(t, func(*testing.T) { f() }) })
		code := 0
		if err != nil {
			code = 1
			var ee *exitError
			if errors.As(err, &ee) {
				code = ee.code
				err = ee.err
			}
			if err != nil {
				fmt.Fprintf(stderr, "goarmci: %v\n", err)
			}
		}
		os.Exit(code)
	}
	match := func(string, string) (bool, error) { return true, nil }
	testing.Main(match, []testing.InternalTest{{Name: "HotspotSim", F: test}}, nil, nil)
	return nil // not reached: testing.Main exits
}
