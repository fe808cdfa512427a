package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/bench/progress"
	"github.com/goarmci/goarmci/internal/bootstrap"
	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/rma"
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
	if err := fs.Parse(withoutScenario(args)); err != nil {
		return nil, o, err
	}
	if fs.NArg() > 0 {
		return nil, o, usageError("bench hotspot -sim: unexpected %q", fs.Args())
	}
	ranks, err := intList("np", f.np)
	if err != nil {
		return nil, o, err
	}
	o.Ranks = ranks
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
		return parseFailure(err)
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
			return simFailure(err)
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
	return inBubble(stderr, run)
}

// parseFailure is a -sim command's result for its flags' error: nil for -h, an exit error as
// it is, else a usage error.
func parseFailure(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return usageError("%v", err)
}

// simFailure is a -sim command's result for its simulation's error: bad options are a usage
// error, anything else exits 1.
func simFailure(err error) error {
	if errors.Is(err, bench.ErrOptions) {
		return usageError("%v", err)
	}
	return &exitError{code: 1, err: err}
}

// inBubble runs a -sim command's body in a synctest bubble: the tests' (simBubble), else one of
// a testing main loop started in this process (inTestMain).
func inBubble(stderr io.Writer, run func(bubble func(func())) error) error {
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

const drcUsage = `usage: goarmci bench hotspot -testbed [flags]

The displaced ring (DRC) of [Vishnu07 ch. 3, §7.3] as a real job on the switched testbed (needs
root): -hosts network namespaces whose -rails each meet in a switch (a Linux bridge per rail), a
tbf of -rate on every host's egress of every rail, -ppn ranks per host (this binary, block
placement, started as a Slurm step). Rank i puts to rank (i+d) mod N (d = -d, default -ppn: every
pair crosses hosts) windows of -window ARMCI_NbPut of -size + ARMCI_Fence, -iters timed; each
rank checks the bytes its predecessor put (CRC-32). One job per policy (-policy), with -hot F
another with host -hot-host's rail -hot-rail at 1/F of -rate; -repeat runs each, medians.

Flags:
`

// drcFlags are the command line of `goarmci bench hotspot -testbed` (and of its ranks).
type drcFlags struct {
	hosts, ppn, rails, window, iters, disp, paths, repeat, hotHost, hotRail int
	rate, policies, size, format                                            string
	hot                                                                     float64
	timeout                                                                 time.Duration
	verbose                                                                 bool
	o                                                                       bench.DRCOptions
}

// isTestbed reports whether a scenario command line asks for the DRC on the switched testbed.
func isTestbed(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		return a == "-testbed" || a == "--testbed" || strings.HasPrefix(a, "-testbed=") || strings.HasPrefix(a, "--testbed=")
	})
}

func parseDRC(stderr io.Writer, args []string) (*drcFlags, error) {
	var f drcFlags
	fs := flag.NewFlagSet("goarmci bench hotspot -testbed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, drcUsage)
		fs.PrintDefaults()
	}
	fs.Bool("testbed", true, "run the DRC as a real job on the switched netns testbed (this command)")
	fs.IntVar(&f.hosts, "hosts", 4, "hosts (network namespaces) of the testbed")
	fs.IntVar(&f.ppn, "ppn", 2, "ranks per host (block placement)")
	fs.IntVar(&f.rails, "rails", 2, "rails (a bridge each), 1..4")
	fs.StringVar(&f.rate, "rate", "400mbit", "tbf rate on every host's egress of every rail (tc syntax); none = unlimited")
	fs.StringVar(&f.policies, "policy", "binding,even,adaptive", "stripe policies (GOARMCI_STRIPE_POLICY specs, comma list)")
	fs.IntVar(&f.paths, "paths", 0, "GOARMCI_PATHS of the ranks (0: the runtime's default)")
	fs.StringVar(&f.size, "size", "256k", "bytes per put (K = KiB, M = MiB)")
	fs.IntVar(&f.window, "window", 8, "non-blocking puts per completion")
	fs.IntVar(&f.iters, "iters", 8, "timed windows (after one untimed)")
	fs.IntVar(&f.disp, "d", 0, "displacement (default -ppn)")
	fs.Float64Var(&f.hot, "hot", 0, "also run every policy with one rail of one host at 1/this of -rate (> 1; 0 = no hot spot)")
	fs.IntVar(&f.hotHost, "hot-host", 0, "host of the hot rail")
	fs.IntVar(&f.hotRail, "hot-rail", -1, "the hot rail (default the last)")
	fs.IntVar(&f.repeat, "repeat", 1, "runs per configuration (the table shows medians)")
	fs.StringVar(&f.format, "format", "text", "text, csv or json")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "wall-clock limit of each job")
	fs.BoolVar(&f.verbose, "v", false, "show every rank's output")
	if err := fs.Parse(withoutScenario(args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError("bench hotspot -testbed: %v", err)
	}
	bad := func(format string, a ...any) (*drcFlags, error) {
		return nil, usageError("bench hotspot -testbed: "+format, a...)
	}
	if fs.NArg() > 0 {
		return bad("unexpected %q", fs.Args())
	}
	size, err := bench.ParseSize(f.size)
	if err != nil {
		return nil, usageError("%v", err)
	}
	if f.disp == 0 {
		f.disp = f.ppn
	}
	if f.hotRail < 0 {
		f.hotRail = f.rails - 1
	}
	switch {
	case f.hosts < 2 || f.hosts > testutil.MaxSwitchedHosts || f.ppn < 1 || f.hosts*f.ppn > 256:
		return bad("-hosts %d -ppn %d (want 2..%d hosts, at most 256 ranks)", f.hosts, f.ppn, testutil.MaxSwitchedHosts)
	case f.rails < 1 || f.rails > 4:
		return bad("-rails %d (want 1..4)", f.rails)
	case size < 1 || size > 16<<20 || f.window < 1 || f.iters < 1 || f.repeat < 1 || f.paths < 0:
		return bad("-size %d, -window %d, -iters %d, -repeat %d, -paths %d out of range", size, f.window, f.iters, f.repeat, f.paths)
	case f.disp < 1 || f.disp%(f.hosts*f.ppn) == 0:
		return bad("-d %d (a multiple of the %d ranks: every rank would put to itself)", f.disp, f.hosts*f.ppn)
	case f.hot != 0 && (f.hot <= 1 || f.hotHost < 0 || f.hotHost >= f.hosts || f.hotRail >= f.rails):
		return bad("-hot %g on host %d rail %d (want > 1, an existing host and rail)", f.hot, f.hotHost, f.hotRail)
	case f.format != "text" && f.format != "csv" && f.format != "json":
		return bad("-format %q (want text, csv or json)", f.format)
	case len(splitList(f.policies)) == 0:
		return bad("-policy %q: no policy", f.policies)
	}
	rates, err := bench.ParseRates(f.rate, f.rails)
	if err != nil {
		return nil, usageError("%v", err)
	}
	if f.hot != 0 && rates[f.hotRail] == "" {
		return bad("-hot needs a -rate on rail %d", f.hotRail)
	}
	f.o = bench.DRCOptions{Size: size, Window: f.window, Iters: f.iters, Displacement: f.disp}
	return &f, nil
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// drcLine is the line each rank prints on standard output.
const drcLine = "DRC rank=%d to=%d from=%d crc32=%08x pair=%f avg=%f min=%f\n"

// runHotspotTestbed is `goarmci bench hotspot -testbed`: a rank of a launched job, or the
// launcher.
func runHotspotTestbed(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	f, err := parseDRC(stderr, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if info, err := bootstrap.Detect(); err == nil && info.Launcher != bootstrap.LauncherSingle {
		return drcRank(ctx, stdout, f)
	}
	tb, err := testutil.OpenSwitchedTestbed(f.hosts, f.rails)
	if errors.Is(err, testutil.ErrNotRoot) || errors.Is(err, testutil.ErrNoNamespaces) {
		fmt.Fprintf(stderr, "goarmci: bench hotspot -testbed: skipped: the switched testbed needs root and network namespaces (%v)\n", err)
		return nil
	}
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench hotspot -testbed: %w", err)}
	}
	defer tb.Close()
	tab, err := drcTestbed(ctx, stderr, tb, f)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench hotspot -testbed: %w", err)}
	}
	tab.Run = bench.CurrentRun()
	return tab.Write(stdout, f.format)
}

// drcRank is one rank's part: RunDRC and its line.
func drcRank(ctx context.Context, stdout io.Writer, f *drcFlags) error {
	rt, err := rma.Init(ctx, &rma.Config{})
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench: %w", err)}
	}
	r, err := bench.RunDRC(ctx, rt, f.o)
	if err != nil {
		_ = rt.Finalize(ctx)
		return &exitError{code: 1, err: err}
	}
	if err := rt.Finalize(ctx); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench: %w", err)}
	}
	fmt.Fprintf(stdout, drcLine, rt.Rank(), r.To, r.From, r.Sum, r.PairMBs, r.AvgMBs, r.MinMBs)
	return nil
}

// drcTestbed runs every (repeat, policy, hot) job on tb and returns the table of medians.
func drcTestbed(ctx context.Context, stderr io.Writer, tb *testutil.Testbed, f *drcFlags) (*bench.Table, error) {
	rates, _ := bench.ParseRates(f.rate, f.rails)
	for h := range f.hosts {
		for r, rate := range rates {
			if err := tb.Rate(h, r, rate); err != nil {
				return nil, err
			}
		}
	}
	hots := []bool{false}
	hotRate := ""
	if f.hot > 0 {
		hots = append(hots, true)
		old, _ := bench.ParseRate(rates[f.hotRail])
		hotRate = fmt.Sprintf("%dkbit", int(old*8e3/f.hot))
	}
	pols := splitList(f.policies)
	prog := progress.New(stderr, "goarmci: bench hotspot -testbed", "jobs", f.repeat*len(pols)*len(hots))
	defer prog.End()
	logw := prog.Writer(stderr)
	// avg[policy][hot] and min[policy][hot]: one value per repeat.
	avg := make([][][]float64, len(pols))
	low := make([][][]float64, len(pols))
	for rep := range f.repeat {
		for i, pol := range pols {
			if avg[i] == nil {
				avg[i], low[i] = make([][]float64, len(hots)), make([][]float64, len(hots))
			}
			for j, hot := range hots {
				name := pol
				if hot {
					name += ", hot rail"
				}
				prog.Start(name)
				if hot {
					if err := tb.Rate(f.hotHost, f.hotRail, hotRate); err != nil {
						return nil, err
					}
				}
				r, err := drcJob(ctx, logw, tb, f, pol)
				if hot { // restore the rate whatever happened
					if rerr := tb.Rate(f.hotHost, f.hotRail, rates[f.hotRail]); rerr != nil && err == nil {
						err = rerr
					}
				}
				if err != nil {
					return nil, fmt.Errorf("policy %s (run %d): %w", name, rep+1, err)
				}
				avg[i][j], low[i][j] = append(avg[i][j], r.AvgMBs), append(low[i][j], r.MinMBs)
				prog.Step(fmt.Sprintf("%s: %.2f MB/s per pair", name, r.AvgMBs))
			}
		}
	}
	n := f.hosts * f.ppn
	tab := &bench.Table{
		Name: "drc", Key: "Policy",
		Title: fmt.Sprintf("# goarmci DRC on the switched testbed: %d hosts x %d ranks, %d rails (average per-pair bandwidth, MB/s) [Vishnu07 §7.3]", f.hosts, f.ppn, f.rails),
		Header: []string{
			fmt.Sprintf("Testbed: %d hosts (network namespaces), %d rails each through a Linux bridge, tbf %s per rail on each host's egress", f.hosts, f.rails, f.rate),
			fmt.Sprintf("DRC: %d ranks (block placement), rank i puts to rank (i+%d) mod %d; windows of %d ARMCI_NbPut of %s + ARMCI_Fence, %d timed; data checked (CRC-32)",
				n, f.disp, n, f.window, sizeName(f.o.Size), f.iters),
			fmt.Sprintf("Medians of %d runs per configuration", f.repeat),
		},
		Columns: []string{"Avg pair (MB/s)", "Min pair (MB/s)"},
	}
	if f.paths > 0 {
		tab.Header = append(tab.Header, fmt.Sprintf("GOARMCI_PATHS=%d", f.paths))
	}
	if f.hot > 0 {
		tab.Header = append(tab.Header, fmt.Sprintf("Hot: host %d's rail %d egress at %s (1/%g of %s)", f.hotHost, f.hotRail, hotRate, f.hot, rates[f.hotRail]))
		tab.Columns = append(tab.Columns, "Hot avg (MB/s)", "Hot min (MB/s)", "Hot/unthrottled %")
	}
	for i, pol := range pols {
		row := bench.TableRow{Key: pol, Values: []float64{median(avg[i][0]), median(low[i][0])}}
		if f.hot > 0 {
			h := median(avg[i][1])
			row.Values = append(row.Values, h, median(low[i][1]), 100*h/row.Values[0])
		}
		tab.Rows = append(tab.Rows, row)
	}
	return tab, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// drcJob runs one DRC job of f.ppn ranks per host of tb with policy and returns rank 0's
// result; a rank that fails ends the job (the others would wait for it in a barrier).
func drcJob(ctx context.Context, logw io.Writer, tb *testutil.Testbed, f *drcFlags, policy string) (bench.DRCResult, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		return bench.DRCResult{}, err
	}
	seq := int(jobSeq.Add(1))
	n := f.hosts * f.ppn
	rdv := fmt.Sprintf("%s:%d", tb.Hosts[0].Addrs[f.rails-1], 34000+(os.Getpid()*7+seq*13)%3000)
	args := []string{"bench", bench.ScenarioHotspot, "-testbed", "-hosts", strconv.Itoa(f.hosts), "-ppn", strconv.Itoa(f.ppn),
		"-rails", strconv.Itoa(f.rails), "-size", strconv.Itoa(f.o.Size), "-window", strconv.Itoa(f.window),
		"-iters", strconv.Itoa(f.iters), "-d", strconv.Itoa(f.disp)}
	outs := make([]lockedBuffer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for rank := range n {
		h := rank / f.ppn
		c := tb.Command(ctx, h, exe, args...)
		c.Env = append(scenarioEnv(), "SLURM_PROCID="+strconv.Itoa(rank), "SLURM_NTASKS="+strconv.Itoa(n),
			fmt.Sprintf("SLURM_JOB_ID=%d%03d", 8000+os.Getpid()%1000, seq), "SLURM_STEP_ID=0",
			"SLURM_LOCALID="+strconv.Itoa(rank%f.ppn), "SLURM_NODEID="+strconv.Itoa(h),
			fmt.Sprintf("SLURM_TASKS_PER_NODE=%d(x%d)", f.ppn, f.hosts),
			"GOARMCI_RDV="+rdv, "GOARMCI_RAILS="+strings.Join(tb.Hosts[h].Addrs, ","), "GOARMCI_STRIPE_POLICY="+policy)
		if f.paths > 0 {
			c.Env = append(c.Env, "GOARMCI_PATHS="+strconv.Itoa(f.paths))
		}
		c.Stdout, c.Stderr = &outs[rank], &outs[rank]
		if err := c.Start(); err != nil {
			cancel() // the started ranks end with the context
			wg.Wait()
			return bench.DRCResult{}, fmt.Errorf("rank %d: %w", rank, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[rank] = c.Wait(); errs[rank] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	if f.verbose {
		for rank := range outs {
			fmt.Fprintf(logw, "[%d] %s", rank, strings.ReplaceAll(strings.TrimRight(outs[rank].String(), "\n"), "\n", fmt.Sprintf("\n[%d] ", rank))+"\n")
		}
	}
	for rank, err := range errs {
		if err != nil {
			return bench.DRCResult{}, fmt.Errorf("rank %d: %w\n%s", rank, err, truncate([]byte(outs[rank].String()), 2000))
		}
	}
	var r bench.DRCResult
	var rank int
	line := outs[0].String()
	if i := strings.Index(line, "DRC rank="); i >= 0 {
		line = line[i:]
	}
	if _, err := fmt.Sscanf(line, drcLine, &rank, &r.To, &r.From, &r.Sum, &r.PairMBs, &r.AvgMBs, &r.MinMBs); err != nil || rank != 0 {
		return r, fmt.Errorf("no result from rank 0 (%v): %q", err, truncate([]byte(outs[0].String()), 400))
	}
	return r, nil
}

// withoutScenario is args without the scenario's name (hotspot), which may stand among the flags.
func withoutScenario(args []string) []string { return without(args, bench.ScenarioHotspot) }

// without returns args without the words equal to name (the benchmark's name, which may stand
// among its flags).
func without(args []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == name })
}
