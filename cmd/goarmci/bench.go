package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/bench/progress"
	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/internal/bootstrap"
	"github.com/goarmci/goarmci/rma"
)

// childFlag tells a rank started by `goarmci bench` to print its results as JSON for the
// launching command instead of formatting them.
const childFlag = "-child-json"

// benchUsage is the usage text of goarmci bench, listing every benchmark.
func benchUsage() string {
	var b strings.Builder
	b.WriteString(`usage: goarmci bench NAME [flags]
       goarmci bench compare NAME [flags]
       goarmci bench npb -npb-dir DIR [flags]   (goarmci bench npb -h)
       goarmci bench list

Without a launcher, bench starts -np ranks of itself on this host (as goarmci run does); under
goarmci run, srun or mpirun it runs as one rank of that job and rank 0 prints the table.
compare runs goarmci and every C peer of bench/peers that can be built here (Open MPI and
MPICH one-sided, Global Arrays/ARMCI), alternating, and prints the medians side by side with
goarmci's ratio to each; npb runs goarmci's NAS kernels beside NPB-MPI programs you built.
-plot FILE.png draws the table with goarmci-plot (a separate command:
go install github.com/goarmci/goarmci/cmd/goarmci-plot@latest).

Benchmarks (NAME):
`)
	for _, l := range benchList() {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("\nFlags (single or double dash):\n")
	return b.String()
}

// benchList is one line per benchmark: its name and what it measures.
func benchList() []string {
	var out []string
	for _, s := range bench.Specs() {
		out = append(out, fmt.Sprintf("%-16s %s", s.Name, strings.TrimPrefix(s.Title, "# ")))
	}
	out = append(out, fmt.Sprintf("%-16s %s", "ga", "all of "+strings.Join(bench.GASuite, ", ")))
	for _, n := range bench.ScenarioNames() {
		out = append(out, fmt.Sprintf("%-16s %s", n, "scenario on the multi-rail netns testbed (root; goarmci bench "+n+" -h)"))
	}
	out = append(out,
		fmt.Sprintf("%-16s %s", "barrier -sim", "barrier algorithms at 2..1024 ranks on the simulated fabric (goarmci bench barrier -sim -h)"),
		fmt.Sprintf("%-16s %s", bench.ScaleQPSetup+" -sim", "queue pair setup vs job size, eager and on demand (simulated fabric)"),
		fmt.Sprintf("%-16s %s", bench.ScaleAPM+" -sim", "APM arm and migration vs queue pairs, put latency meanwhile (fabric devices)"),
		fmt.Sprintf("%-16s %s", bench.ScaleMemory+" -sim", "memory per rank at 64..1024 ranks: RC-only, shared datagram (DC), adaptive (fabric)"))
	return out
}

// benchFlags are the command line of `goarmci bench`.
type benchFlags struct {
	np         int
	transport  string
	sync       string
	format     string
	plot       string
	iterations int
	skip       int
	settle     time.Duration
	window     int
	minSize    int
	maxSize    int
	baseline   bool
	alg        string
	timeout    time.Duration
	runs       int
	peers      string
	cache      string
	child      bool
	// transportSet: -transport was given (in a launched job, the job's GOARMCI_TRANSPORT
	// applies otherwise).
	transportSet bool
	api          string
	win          string
	cpuprofile   string
}

func (f *benchFlags) set(fs *flag.FlagSet) {
	fs.IntVar(&f.np, "np", 2, "number of ranks to launch (barrier: largest group, from 2)")
	fs.StringVar(&f.transport, "transport", "shm", "shm or tcp (GOARMCI_TRANSPORT of the ranks)")
	fs.StringVar(&f.sync, "sync", "", "lock, flush or fence (default: the benchmark's OSU default); pscw needs windows")
	fs.StringVar(&f.format, "format", "text", "text (OSU), csv or json")
	fs.StringVar(&f.plot, "plot", "", "also plot the table into this PNG file")
	fs.IntVar(&f.iterations, "iterations", 0, "iterations per size (default: OSU's, fewer above 8 KiB)")
	fs.IntVar(&f.skip, "skip", 0, "warm-up iterations per size (default: OSU's)")
	fs.DurationVar(&f.settle, "settle", bench.DefaultSettle, "each rank spins this long before every size's warm-up, so that the Go runtime's monitor thread has backed off (0: no settling)")
	fs.IntVar(&f.window, "window", bench.DefaultWindow, "operations per synchronization in bandwidth tests")
	fs.IntVar(&f.minSize, "min-size", 0, "smallest message in bytes (default: the benchmark's)")
	fs.IntVar(&f.maxSize, "max-size", 0, "largest message in bytes (default 4 MiB)")
	fs.BoolVar(&f.baseline, "baseline", false, "print the physical limits beside (memcpy of one core, plain TCP socket)")
	fs.StringVar(&f.alg, "alg", "all", "barrier algorithms: all or a comma list of auto (Barrier's own choice), dissemination, pairwise, gather-broadcast, rgm, message, message-pairwise; compare: the first (default auto)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "wall-clock limit of each launched job")
	fs.IntVar(&f.runs, "runs", 5, "compare: runs of each system (medians are printed)")
	fs.StringVar(&f.peers, "peers", "", "compare: comma list of peers to run, or none (default: every one available; with more ranks than cores, those whose ranks poll without yielding, MPICH, are left out)")
	fs.StringVar(&f.api, "api", "armci", "one-sided benchmarks on armci calls or on MPI-3 windows (window: also pscw, get_acc_latency)")
	fs.StringVar(&f.win, "win", "allocate", "window creation with -api window: allocate or create")
	fs.BoolVar(&f.child, childFlag[1:], false, "internal: print rank 0's results as JSON for the launching goarmci bench")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write each rank's CPU profile to FILE.rankN (go tool pprof)")
	fs.StringVar(&f.cache, "peer-dir", "", "compare: where the C peers are built (default: the user cache dir)")
}

func (f *benchFlags) options(name string) bench.Options {
	return bench.Options{
		Name: name, Sync: bench.Sync(f.sync), MinSize: f.minSize, MaxSize: f.maxSize,
		Iterations: f.iterations, Skip: f.skip, Settle: f.settle, Window: f.window, Baseline: f.baseline, BarrierAlg: f.alg,
		API: f.api, Win: f.win,
	}
}

func newBenchCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "bench NAME [flags] | bench compare NAME [flags] | bench npb -npb-dir DIR [flags] | bench list",
		Short:              "OSU one-sided microbenchmarks, GA and barrier benchmarks, side by side with MPI and GA",
		Long:               strings.TrimSuffix(benchUsage(), "\nFlags (single or double dash):\n") + "\n(goarmci bench -h also lists the flags)",
		DisableFlagParsing: true, // Go-style flags: -np 2 and --np 2 alike, as the OSU tools
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBench(cmd.OutOrStdout(), cmd.ErrOrStderr(), args)
		},
	}
}

func runBench(stdout, stderr io.Writer, args []string) error {
	if len(args) > 0 && args[0] == "npb" { // its own flags (-np is a list there)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return runNPB(ctx, stdout, stderr, args[1:])
	}
	if name, ok := scaleSimName(args); ok { // barrier, qp-setup, apm, memory -sim: bench_scale.go
		return runScaleSim(stdout, stderr, name, args)
	}
	for _, a := range args {
		if bench.IsScenario(a) { // rails, hotspot, fault, interleave: the multi-rail testbed
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runScenario(ctx, stdout, stderr, args)
		}
	}
	var f benchFlags
	fs := flag.NewFlagSet("goarmci bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout) // asked for: the usage is the output
		}
	}
	f.set(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage())
		fs.PrintDefaults()
	}
	// Flags may come before or after NAME.
	var pos []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return usageError("bench: %v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "transport" {
			f.transportSet = true
		}
	})
	if len(pos) == 0 {
		fs.Usage()
		return usageError("bench: missing NAME")
	}
	switch f.transport {
	case "shm", "tcp", "auto":
	default:
		return usageError("bench: -transport %q (want shm or tcp)", f.transport)
	}
	switch f.format {
	case "text", "osu", "csv", "json":
	default:
		return usageError("bench: -format %q (want text, csv or json)", f.format)
	}
	if f.np < 1 {
		return usageError("bench: -np must be positive, got %d", f.np)
	}
	if pos[0] == "list" {
		for _, l := range benchList() {
			fmt.Fprintln(stdout, l)
		}
		return nil
	}
	compare := pos[0] == "compare"
	if compare {
		pos = pos[1:]
		if len(pos) == 0 {
			return usageError("bench: compare: missing NAME")
		}
	}
	if len(pos) != 1 {
		return usageError("bench: one NAME at a time, got %q", pos)
	}
	name := pos[0]
	names := []string{name}
	if name == "ga" {
		names = bench.GASuite
	}
	for _, n := range names {
		if _, _, err := f.options(n).Check(); err != nil {
			return usageError("%v", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if info, err := bootstrap.Detect(); err == nil && info.Launcher != bootstrap.LauncherSingle {
		if compare {
			return usageError("bench: compare launches its own jobs; run it outside a launcher")
		}
		return benchRank(ctx, stdout, stderr, &f, names)
	}
	if compare {
		return benchCompare(ctx, stdout, stderr, &f, name, names)
	}
	var results []*bench.Result
	if name == "barrier" {
		res, err := barrierSweep(ctx, stderr, &f)
		if err != nil {
			return err
		}
		results = []*bench.Result{res}
	} else {
		var err error
		results, err = launchBench(ctx, stderr, &f, f.np, names)
		if err != nil {
			return err
		}
	}
	return emit(stdout, stderr, &f, results)
}

// emit prints the results in the chosen format and plots them (through goarmci-plot).
func emit(w, stderr io.Writer, f *benchFlags, results []*bench.Result) error {
	var plots []bench.PlotRequest
	run := bench.CurrentRun()
	for i, r := range results {
		if r.Run == nil { // compare, barrier sweeps: made here, not by a rank
			r.Run = run
		}
		if i > 0 && f.format != "csv" {
			fmt.Fprintln(w)
		}
		if err := r.Write(w, f.format); err != nil {
			return err
		}
		if f.plot != "" {
			path := f.plot
			if len(results) > 1 {
				path = suffixPath(path, r.Name)
			}
			plots = append(plots, bench.PlotRequest{Path: path, Result: r})
		}
	}
	if err := renderPlots(stderr, plots); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench: plot: %w", err)}
	}
	return nil
}

// benchRank runs the benchmarks as one rank of a launched job.
func benchRank(ctx context.Context, stdout, stderr io.Writer, f *benchFlags, names []string) error {
	cfg := &rma.Config{}
	if f.transportSet {
		cfg.Transport = rma.Transport(f.transport)
	}
	rt, err := rma.Init(ctx, cfg)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench: %w", err)}
	}
	if f.cpuprofile != "" {
		pf, err := os.Create(fmt.Sprintf("%s.rank%d", f.cpuprofile, rt.Rank()))
		if err == nil {
			err = pprof.StartCPUProfile(pf)
		}
		if err != nil {
			_ = rt.Finalize(ctx)
			return &exitError{code: 1, err: fmt.Errorf("bench: -cpuprofile: %w", err)}
		}
		defer pf.Close()
		defer pprof.StopCPUProfile()
	}
	var results []*bench.Result
	for _, n := range names {
		res, err := bench.Run(ctx, rt, f.options(n))
		if err != nil {
			_ = rt.Finalize(ctx)
			return &exitError{code: 1, err: err}
		}
		if res != nil {
			results = append(results, res)
		}
	}
	if err := rt.Finalize(ctx); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench: %w", err)}
	}
	if rt.Rank() != 0 {
		return nil
	}
	if f.child {
		return json.NewEncoder(stdout).Encode(results)
	}
	return emit(stdout, stderr, f, results)
}

// launchBench starts np ranks of this executable running the benchmarks and returns rank 0's
// results.
func launchBench(ctx context.Context, stderr io.Writer, f *benchFlags, np int, names []string) ([]*bench.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("bench: %w", err)}
	}
	args := []string{"bench", strings.Join(names, ",")}
	if len(names) > 1 {
		args[1] = "ga"
	}
	args = append(args, f.childArgs()...)
	var out bytes.Buffer
	j := &job{
		np: np, exe: exe, args: args, env: os.Environ(),
		transport: f.transport, timeout: f.timeout, grace: 3 * time.Second,
		stdout: &out, stderr: stderr,
	}
	if code := j.run(ctx); code != 0 {
		return nil, &exitError{code: code, err: fmt.Errorf("bench: %d-rank job failed (exit code %d)", np, code)}
	}
	return decodeChild(out.Bytes())
}

// childArgs repeats the measuring flags for the launched ranks.
func (f *benchFlags) childArgs() []string {
	a := []string{childFlag, "-transport", f.transport, "-window", fmt.Sprint(f.window), "-alg", f.alg, "-api", f.api, "-win", f.win, "-settle", f.settle.String()}
	if f.sync != "" {
		a = append(a, "-sync", f.sync)
	}
	for _, kv := range []struct {
		k string
		v int
	}{{"-iterations", f.iterations}, {"-skip", f.skip}, {"-min-size", f.minSize}, {"-max-size", f.maxSize}} {
		if kv.v != 0 {
			a = append(a, kv.k, fmt.Sprint(kv.v))
		}
	}
	if f.baseline {
		a = append(a, "-baseline")
	}
	if f.cpuprofile != "" {
		abs, err := filepath.Abs(f.cpuprofile)
		if err != nil {
			abs = f.cpuprofile
		}
		a = append(a, "-cpuprofile", abs)
	}
	return a
}

// decodeChild reads rank 0's JSON results from the job's prefixed output.
func decodeChild(out []byte) ([]*bench.Result, error) {
	var body bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "[0] "); ok {
			body.WriteString(rest)
			body.WriteByte('\n')
		}
	}
	var results []*bench.Result
	if err := json.Unmarshal(body.Bytes(), &results); err != nil || len(results) == 0 {
		return nil, &exitError{code: 1, err: fmt.Errorf("bench: no results from rank 0 (%v): %q", err, truncate(out, 400))}
	}
	return results, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// barrierSweep launches one job per group size 2..np and gathers one row from each.
func barrierSweep(ctx context.Context, stderr io.Writer, f *benchFlags) (*bench.Result, error) {
	var all *bench.Result
	for n := min(2, f.np); n <= f.np; n++ {
		rs, err := launchBench(ctx, stderr, f, n, []string{"barrier"})
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = rs[0]
		} else {
			all.Rows = append(all.Rows, rs[0].Rows...)
		}
	}
	all.Ranks = f.np
	return all, nil
}

// benchCompare runs goarmci and each available peer, alternating, and prints the medians.
func benchCompare(ctx context.Context, stdout, stderr io.Writer, f *benchFlags, name string, names []string) error {
	if f.runs < 1 {
		return usageError("bench: -runs must be positive")
	}
	dir := f.cache
	if dir == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			c = os.TempDir()
		}
		dir = filepath.Join(c, "goarmci", "peers")
	}
	peers, notes := bench.FindPeers(ctx, dir)
	for _, n := range notes {
		fmt.Fprintln(stderr, "goarmci: bench: "+n)
	}
	if f.peers == "none" {
		peers = nil
	}
	if f.peers == "" {
		// peers that poll without yielding take minutes per run with more ranks than cores;
		// named in -peers they run
		var left []bench.Peer
		peers, left = bench.Oversubscribed(peers, f.np, runtime.NumCPU())
		if len(left) > 0 {
			fmt.Fprintf(stderr, "goarmci: bench: peers %s left out: their ranks poll without yielding, and %d ranks on %d cores take minutes per run (name them in -peers to run them)\n",
				peerNames(left), f.np, runtime.NumCPU())
		}
	}
	if f.peers != "" && f.peers != "none" {
		var keep []bench.Peer
		for _, want := range strings.Split(f.peers, ",") {
			want = strings.TrimSpace(want)
			found := false
			for _, p := range peers {
				if p.Name == want {
					keep = append(keep, p)
					found = true
				}
			}
			if !found {
				fmt.Fprintf(stderr, "goarmci: bench: peer %s not available here (have %s)\n", want, peerNames(peers))
			}
		}
		peers = keep
	}
	var results []*bench.Result
	for _, n := range names {
		o, spec, _ := f.options(n).Check()
		o.Baseline = false
		g := *f
		var extra []bench.ExtraColumn
		if f.baseline && !spec.Collective() {
			// The limits measured by goarmci's own job between the same two ranks, as columns
			// of their own with medians and ranges over the same runs.
			extra = []bench.ExtraColumn{{Col: bench.ColMemcpy, Name: "memcpy"}, {Col: bench.ColTCPStream, Name: "socket"}, {Col: bench.ColSocketRTT, Name: "socket RTT"}}
		} else {
			g.baseline = false
		}
		if n == "barrier" {
			// One column per system: goarmci's first -alg (by default Barrier's own choice,
			// what a program gets) beside MPI_Barrier and GA_Sync.
			g.alg = strings.TrimSpace(strings.Split(f.alg, ",")[0])
			if g.alg == "" || g.alg == "all" {
				g.alg = "auto"
			}
		}
		// The ranks' and the peers' notes share standard error with the progress bar (made
		// once the systems are known).
		errw := stderr
		systems := []bench.System{{Name: "goarmci", Run: func(ctx context.Context) (*bench.Result, error) {
			rs, err := launchBench(ctx, errw, &g, f.np, []string{n})
			if err != nil {
				return nil, err
			}
			return rs[0], nil
		}, Extra: extra}}
		var used []bench.Peer
		for _, p := range peers {
			if !p.Supports(n) {
				continue
			}
			if f.transport == "tcp" && p.ShmOnly() {
				fmt.Fprintf(stderr, "goarmci: bench: %s: %s left out: shared memory only, no tcp path\n", n, p.Name)
				continue
			}
			used = append(used, p)
			systems = append(systems, bench.System{Name: p.Name, Run: func(ctx context.Context) (*bench.Result, error) {
				return p.Run(ctx, o, f.np, f.transport)
			}})
		}
		if len(systems) == 1 {
			fmt.Fprintf(stderr, "goarmci: bench: no peer runs %s here; goarmci alone\n", n)
		}
		prog := progress.New(stderr, "goarmci: bench compare "+n, "runs", f.runs*len(systems))
		errw = prog.Writer(stderr)
		res, err := bench.Compare(ctx, n, systems, f.runs, errw, prog)
		prog.End()
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		tr := fmt.Sprintf("Transport: %s, %d ranks", f.transport, f.np)
		if !spec.Collective() {
			tr += ", sync " + string(o.Sync)
		}
		res.Header = append(res.Header, tr)
		res.Header = append(res.Header, "goarmci: "+goarmciDoc(n, &g, o))
		for _, x := range extra {
			if slices.Contains(res.Columns, x.Name) {
				res.Header = append(res.Header, x.Name+": "+map[string]string{
					bench.ColMemcpy:    "one core's memcpy of the same bytes",
					bench.ColTCPStream: "a plain Go TCP stream between ranks 0 and 1",
					bench.ColSocketRTT: "a plain Go TCP ping-pong round trip between ranks 0 and 1",
				}[x.Col]+", measured in goarmci's jobs (-baseline)")
			}
		}
		for _, p := range used {
			if slices.Contains(res.Columns, p.Name) {
				res.Header = append(res.Header, p.Name+": "+p.Describe(f.transport))
			}
		}
		results = append(results, res)
	}
	return emit(stdout, stderr, f, results)
}

func peerNames(peers []bench.Peer) string {
	var n []string
	for _, p := range peers {
		n = append(n, p.Name)
	}
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

// goarmciDoc says what goarmci's column of a comparison ran.
func goarmciDoc(name string, f *benchFlags, o bench.Options) string {
	switch {
	case name == "barrier" && f.alg == "auto":
		return "rma.Barrier (its algorithm for the job: GOARMCI_BARRIER=auto)"
	case name == "barrier":
		return "barrier algorithm " + f.alg + " (rma.BarrierWith)"
	case name == "allreduce":
		return "globalarray.GopSum (GA_Dgop \"+\", rma.AllReduce)"
	case name == "ga_dgemm":
		return "globalarray.Gemm (GA_Dgemm), local products on " + globalarray.BLASBackend() + " BLAS"
	case strings.HasPrefix(name, "ga_"):
		return "Global Arrays (package globalarray)"
	case o.API == bench.APIWindow:
		return "MPI-3 windows (-api window, package window), MPI_Win_" + o.Win
	}
	return "ARMCI calls (-api armci)"
}
