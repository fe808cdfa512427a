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
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/bench/progress"
	"github.com/goarmci/goarmci/internal/bootstrap"
	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/rma"
)

// startMarker is the line a timeline's rank 0 writes to stderr when its timed operations start
// (followed by the Unix time in ns); the launcher places its events after it.
const startMarker = "GOARMCI-SCENARIO-START"

const scenarioUsage = `usage: goarmci bench rails|hotspot|fault|interleave [flags]
       goarmci bench app [flags] -- PROGRAM [ARGS]

Scenario benchmarks on the multi-rail testbed (needs root): two hosts as network namespaces
joined by -rails veth pairs with a tbf rate per rail (each host's egress), one rank per host
(this binary, started as under srun), rank 0 the origin.

  rails       put/get bandwidth (-sizes) and latency (-lat-sizes) over 1..R rails (-counts) and
              each policy (-policies) [Vishnu07 ch. 4-8]
  hotspot     (with -sim: on the simulated fat tree, no root; goarmci bench hotspot -sim -h;
              with -testbed: the DRC on N hosts through a switch; goarmci bench hotspot -testbed -h)
              4 MiB puts for -duration; at -event one rail (-cut-rail) is cut to 1/-cut-factor
              of its rate (tc change): per policy, the bandwidth before and after and after how
              many operations it is back at -recover of the new summed rate
  fault       1 MiB put and get timeline; at -event rail 0's cable is pulled (ip link set down)
              for -down, then plugged back; APM on and off (-apm) [Vishnu09 Fig. 10/11]
  interleave  16 MPI_Put + 16 MPI_Get per fence epoch, reordering off and on, over 1..R rails
              [Vishnu07 §5.3.4]
  app         PROGRAM (a goarmci program, e.g. a built examples/nas/is) as the 2 ranks over 1..R
              rails (-counts), with -pull also with rail 0 pulled mid-run: wall time, the NPB
              "Time in seconds" and "Verification" lines

Flags:
`

// scenarioFlags are the command line of a scenario.
type scenarioFlags struct {
	name      string
	rails     int
	counts    string
	rate      string
	policies  string
	sizes     string
	latSizes  string
	bytes     string
	window    int
	format    string
	plot      string
	op        string
	size      string
	duration  time.Duration
	event     time.Duration
	down      time.Duration
	cutRail   int
	cutFactor float64
	recover   float64
	apm       string
	threshold string
	timeout   time.Duration
	verbose   bool
	app       []string // bench app: the program and its arguments
	timelines bool
	pull      bool
	child     bool
}

func (f *scenarioFlags) set(fs *flag.FlagSet) {
	fs.IntVar(&f.rails, "rails", 2, "rails of the testbed (veth pairs), 1..4")
	fs.StringVar(&f.counts, "counts", "", "rails: rail counts to measure (comma list; default 1..R)")
	fs.StringVar(&f.rate, "rate", "400mbit", "tbf rate per rail on each host's egress (tc syntax), or one per rail (100mbit,300mbit); none = unlimited")
	fs.StringVar(&f.policies, "policies", "auto,even,adaptive,bss,round-robin,binding", "stripe policies (GOARMCI_STRIPE_POLICY specs, comma list)")
	fs.StringVar(&f.sizes, "sizes", "", "message sizes (comma list; K = KiB, M = MiB; kB/MB rejected; default rails: 1m,4m, interleave: 1k..4m)")
	fs.StringVar(&f.latSizes, "lat-sizes", "8,1m", "rails: sizes whose latency is measured")
	fs.StringVar(&f.bytes, "bytes", "32m", "data per bandwidth point (sets the iterations)")
	fs.IntVar(&f.window, "window", 0, "non-blocking operations per completion (default rails 8, hotspot/fault 1)")
	fs.StringVar(&f.format, "format", "text", "text, csv or json")
	fs.StringVar(&f.plot, "plot", "", "also plot into this PNG file")
	fs.StringVar(&f.op, "op", "", "hotspot/fault: put, get or both (default hotspot put, fault both)")
	fs.StringVar(&f.size, "size", "", "hotspot/fault: message size (default hotspot 4m, fault 1m)")
	fs.DurationVar(&f.duration, "duration", 0, "hotspot/fault: length of the timeline (default 6s, fault 8s)")
	fs.DurationVar(&f.event, "event", 0, "hotspot/fault: when the event fires after the start (default duration/3)")
	fs.DurationVar(&f.down, "down", 2*time.Second, "fault: how long the cable stays pulled")
	fs.IntVar(&f.cutRail, "cut-rail", -1, "hotspot: the rail slowed (default the last)")
	fs.Float64Var(&f.cutFactor, "cut-factor", 10, "hotspot: the rail's rate is divided by this")
	fs.Float64Var(&f.recover, "recover", 0.85, "hotspot: recovered = this share of the new summed rate, 3 operations in a row")
	fs.StringVar(&f.apm, "apm", "true,false", "fault: GOARMCI_APM values to run")
	fs.StringVar(&f.threshold, "threshold", "", "GOARMCI_STRIPE_THRESHOLD of the ranks (default the runtime's)")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "wall-clock limit of each job")
	fs.BoolVar(&f.pull, "pull", false, "app: also run each rail count with rail 0 pulled at -event for -down")
	fs.BoolVar(&f.verbose, "v", false, "show the ranks' stderr")
	fs.BoolVar(&f.timelines, "timelines", false, "hotspot/fault: also print every run's timeline in text (always in csv and json)")
	fs.BoolVar(&f.child, childFlag[1:], false, "internal: run as a rank and print rank 0's results as JSON")
}

// parseScenario parses a scenario's command line (flags before or after the name).
func parseScenario(stderr io.Writer, args []string) (*scenarioFlags, error) {
	f := &scenarioFlags{}
	for i, a := range args {
		if a == "--" {
			args, f.app = args[:i], args[i+1:]
			break
		}
	}
	fs := flag.NewFlagSet("goarmci bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.set(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, scenarioUsage)
		fs.PrintDefaults()
	}
	var pos []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError("bench: %v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) != 1 || !bench.IsScenario(pos[0]) {
		return nil, usageError("bench: one scenario (%s), got %q", strings.Join(bench.ScenarioNames(), ", "), pos)
	}
	f.name = pos[0]
	if (f.name == bench.ScenarioApp) != (len(f.app) > 0) {
		return nil, usageError("bench: app needs a program after --, and only app takes one")
	}
	if f.name == bench.ScenarioApp {
		prog, err := exec.LookPath(f.app[0])
		if err == nil {
			prog, err = filepath.Abs(prog)
		}
		if err != nil {
			return nil, usageError("bench: app: %v (build it first: go build -o is ./examples/nas/is)", err)
		}
		f.app = append([]string{prog}, f.app[1:]...)
	}
	if f.rails < 1 || f.rails > 4 {
		return nil, usageError("bench: -rails %d (want 1..4)", f.rails)
	}
	switch f.format {
	case "text", "osu", "csv", "json":
	default:
		return nil, usageError("bench: -format %q (want text, csv or json)", f.format)
	}
	if f.op == "" {
		f.op = map[string]string{bench.ScenarioFault: "both"}[f.name]
		if f.op == "" {
			f.op = "put"
		}
	}
	if f.op != "put" && f.op != "get" && f.op != "both" {
		return nil, usageError("bench: -op %q (want put, get or both)", f.op)
	}
	if f.duration == 0 {
		f.duration = 6 * time.Second
		if f.name == bench.ScenarioFault {
			f.duration = 8 * time.Second
		}
	}
	if f.event == 0 {
		f.event = f.duration / 3
		if f.name == bench.ScenarioApp {
			f.event = 10 * time.Second
		}
	}
	if f.size == "" {
		switch f.name {
		case bench.ScenarioHotspot:
			f.size = "4m"
		case bench.ScenarioFault:
			f.size = "1m"
		}
	}
	if f.cutRail < 0 {
		f.cutRail = f.rails - 1
	}
	if f.cutRail >= f.rails || f.cutFactor <= 1 || f.recover <= 0 || f.recover > 1 {
		return nil, usageError("bench: -cut-rail %d, -cut-factor %g, -recover %g out of range", f.cutRail, f.cutFactor, f.recover)
	}
	if _, err := f.rankOptions(); err != nil {
		return nil, usageError("%v", err)
	}
	if _, err := bench.ParseRates(f.rate, f.rails); err != nil {
		return nil, usageError("%v", err)
	}
	if _, err := f.railCounts(); err != nil {
		return nil, usageError("%v", err)
	}
	return f, nil
}

// rankOptions are the options of the ranks' part.
func (f *scenarioFlags) rankOptions() (bench.ScenarioOptions, error) {
	var o bench.ScenarioOptions
	var err error
	if f.sizes != "" {
		if o.Sizes, err = bench.ParseSizes(f.sizes); err != nil {
			return o, err
		}
	}
	if f.name == bench.ScenarioRails {
		if o.LatSizes, err = bench.ParseSizes(f.latSizes); err != nil {
			return o, err
		}
		if o.LatSizes == nil {
			o.LatSizes = []int{}
		}
	}
	if o.Bytes, err = bench.ParseSize(f.bytes); err != nil {
		return o, err
	}
	o.Window = f.window
	if o.Window == 0 && (f.name == bench.ScenarioHotspot || f.name == bench.ScenarioFault) {
		o.Window = 1
	}
	if f.size != "" {
		if o.Size, err = bench.ParseSize(f.size); err != nil {
			return o, err
		}
	} else if f.name == bench.ScenarioFault {
		o.Size = 1 << 20
	}
	if f.op != "both" {
		o.Op = f.op
	}
	o.DurationMs = int(f.duration / time.Millisecond)
	return o.Check(f.name)
}

// jobs is the number of jobs the scenario launches (its progress steps): rails one per rail count
// and policy (one rail once), interleave one per rail count, hotspot one per policy, fault one
// per -apm value and operation, app one per rail count and one more per count above one with
// -pull.
func (f *scenarioFlags) jobs() int {
	counts, _ := f.railCounts()
	switch f.name {
	case bench.ScenarioRails:
		n := 0
		for _, c := range counts {
			if c == 1 {
				n++
			} else {
				n += len(f.policyList())
			}
		}
		return n
	case bench.ScenarioInterleave:
		return len(counts)
	case bench.ScenarioHotspot:
		return len(f.policyList())
	case bench.ScenarioFault:
		ops := 1
		if f.op == "both" {
			ops = 2
		}
		return ops * len(strings.Split(f.apm, ","))
	case bench.ScenarioApp:
		n := 0
		for _, c := range counts {
			n++
			if f.pull && c > 1 {
				n++
			}
		}
		return n
	}
	return 0
}

// railCounts are the rail counts of rails and interleave.
func (f *scenarioFlags) railCounts() ([]int, error) {
	if f.counts == "" {
		out := make([]int, f.rails)
		for i := range out {
			out[i] = i + 1
		}
		return out, nil
	}
	var out []int
	for _, s := range strings.Split(f.counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > f.rails {
			return nil, fmt.Errorf("%w: -counts %q (want 1..%d)", bench.ErrOptions, f.counts, f.rails)
		}
		out = append(out, n)
	}
	return out, nil
}

// childArgs are the flags a rank gets.
func (f *scenarioFlags) childArgs(op string) []string {
	a := []string{"bench", f.name, childFlag, "-bytes", f.bytes, "-window", strconv.Itoa(f.window),
		"-lat-sizes", f.latSizes, "-duration", f.duration.String(), "-rails", strconv.Itoa(f.rails), "-op", op}
	if f.window == 0 && (f.name == bench.ScenarioHotspot || f.name == bench.ScenarioFault) {
		a[6] = "1"
	}
	if f.sizes != "" {
		a = append(a, "-sizes", f.sizes)
	}
	if f.size != "" {
		a = append(a, "-size", f.size)
	} else if f.name == bench.ScenarioFault {
		a = append(a, "-size", "1m")
	}
	return a
}

// runScenario is `goarmci bench SCENARIO`: a rank of a launched job, or the launcher.
func runScenario(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	if slices.Contains(args, bench.ScenarioHotspot) && isTestbed(args) {
		return runHotspotTestbed(ctx, stdout, stderr, args) // bench_sim.go
	}
	if slices.Contains(args, bench.ScenarioHotspot) && isSim(args) {
		return runHotspotSim(stdout, stderr, args) // bench_sim.go
	}
	f, err := parseScenario(stderr, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if info, err := bootstrap.Detect(); err == nil && info.Launcher != bootstrap.LauncherSingle {
		return scenarioRank(ctx, stdout, stderr, f)
	}
	tb, err := testutil.OpenTestbed(f.rails)
	if errors.Is(err, testutil.ErrNotRoot) || errors.Is(err, testutil.ErrNoNamespaces) {
		fmt.Fprintf(stderr, "goarmci: bench %s: skipped: the multi-rail testbed needs root and network namespaces (%v)\n", f.name, err)
		return nil
	}
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench %s: %w", f.name, err)}
	}
	defer tb.Close()
	prog := progress.New(stderr, "goarmci: bench "+f.name, "jobs", f.jobs())
	defer prog.End()
	s := &scenario{f: f, tb: tb, stderr: prog.Writer(stderr), prog: prog}
	if err := s.setRates(); err != nil {
		return &exitError{code: 1, err: err}
	}
	var out scenarioOutput
	switch f.name {
	case bench.ScenarioRails:
		out, err = s.rails(ctx)
	case bench.ScenarioInterleave:
		out, err = s.interleave(ctx)
	case bench.ScenarioHotspot:
		out, err = s.hotspot(ctx)
	case bench.ScenarioFault:
		out, err = s.fault(ctx)
	case bench.ScenarioApp:
		out, err = s.appRuns(ctx)
	}
	prog.End()
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench %s: %w", f.name, err)}
	}
	return out.emit(stdout, stderr, f)
}

// scenarioRank runs the ranks' part and prints rank 0's results as JSON.
func scenarioRank(ctx context.Context, stdout, stderr io.Writer, f *scenarioFlags) error {
	o, err := f.rankOptions()
	if err != nil {
		return usageError("%v", err)
	}
	rt, err := rma.Init(ctx, &rma.Config{})
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench: %w", err)}
	}
	var res *bench.Result
	switch f.name {
	case bench.ScenarioRails:
		res, err = bench.RunRails(ctx, rt, o)
	case bench.ScenarioInterleave:
		res, err = bench.RunInterleave(ctx, rt, o)
	default:
		res, err = bench.RunTimeline(ctx, rt, o, func(t time.Time) {
			fmt.Fprintf(stderr, "%s %d\n", startMarker, t.UnixNano())
		})
	}
	if err != nil {
		_ = rt.Finalize(ctx)
		return &exitError{code: 1, err: err}
	}
	if err := rt.Finalize(ctx); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench: %w", err)}
	}
	if res == nil {
		return nil
	}
	if f.child {
		return json.NewEncoder(stdout).Encode([]*bench.Result{res})
	}
	return res.Write(stdout, f.format)
}

// scenario is one launcher run on its testbed.
type scenario struct {
	f      *scenarioFlags
	tb     *testutil.Testbed
	stderr io.Writer     // the ranks' lines (-v) and notes; shares the terminal with prog
	prog   *progress.Bar // one step per job (f.jobs())
}

// setRates puts the -rate tbf on both hosts' egress of every rail.
func (s *scenario) setRates() error {
	rates, _ := bench.ParseRates(s.f.rate, s.f.rails)
	for r, rate := range rates {
		for h := 0; h < 2; h++ {
			if err := s.tb.Rate(h, r, rate); err != nil {
				return err
			}
		}
	}
	return nil
}

// summedRate is the sum of the rates (MB/s) of the first n rails (0 when unlimited).
func (s *scenario) summedRate(n int) float64 {
	rates, _ := bench.ParseRates(s.f.rate, s.f.rails)
	sum := 0.0
	for _, r := range rates[:n] {
		if r == "" {
			return 0
		}
		v, _ := bench.ParseRate(r)
		sum += v
	}
	return sum
}

// jobSeq makes job ids and rendezvous ports unique per launcher process.
var jobSeq atomic.Int32

// jobResult is what one launched job produced.
type jobResult struct {
	res   *bench.Result
	out   string               // rank 0's standard output
	start time.Time            // the timeline's start (zero otherwise)
	marks map[string]time.Time // events the launcher fired
}

// launch runs one 2-rank job on the testbed over the first n rails with extra environment and
// calls event (when not nil) once rank 0's timeline has started; event returns the times of
// what it did.
func (s *scenario) launch(ctx context.Context, n int, env []string, op string, event func(ctx context.Context, start time.Time) map[string]time.Time) (*jobResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.f.timeout)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	seq := int(jobSeq.Add(1))
	rdvRail := s.tb.Rails() - 1
	rdv := fmt.Sprintf("%s:%d", s.tb.Hosts[0].Addrs[rdvRail], 31000+(os.Getpid()*7+seq*13)%3000)
	var outs [2]bytes.Buffer
	var errs [2]lockedBuffer
	startCh := make(chan time.Time, 1)
	cmds := make([]*exec.Cmd, 2)
	var werr [2]error
	var readers sync.WaitGroup
	for rank := 0; rank < 2; rank++ {
		argv := append([]string{exe}, s.f.childArgs(op)...)
		if s.f.app != nil {
			argv = s.f.app
		}
		c := s.tb.Command(ctx, rank, argv[0], argv[1:]...)
		c.Env = append(scenarioEnv(), "SLURM_PROCID="+strconv.Itoa(rank), "SLURM_NTASKS=2",
			fmt.Sprintf("SLURM_JOB_ID=%d%03d", 9000+os.Getpid()%1000, seq), "SLURM_STEP_ID=0",
			"GOARMCI_RDV="+rdv, "GOARMCI_RAILS="+strings.Join(s.tb.Hosts[rank].Addrs[:n], ","))
		if s.f.threshold != "" {
			c.Env = append(c.Env, "GOARMCI_STRIPE_THRESHOLD="+s.f.threshold)
		}
		c.Env = append(c.Env, env...)
		c.Stdout = &outs[rank]
		pr, err := c.StderrPipe()
		if err != nil {
			return nil, err
		}
		if err := c.Start(); err != nil {
			return nil, err
		}
		cmds[rank] = c
		readers.Add(1)
		go func() {
			defer readers.Done()
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				line := sc.Text()
				if rest, ok := strings.CutPrefix(line, startMarker+" "); ok {
					if ns, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil {
						select {
						case startCh <- time.Unix(0, ns):
						default:
						}
					}
					continue
				}
				errs[rank].WriteString(fmt.Sprintf("[%d] %s\n", rank, line))
				if s.f.verbose {
					fmt.Fprintf(s.stderr, "[%d] %s\n", rank, line)
				}
			}
			// The stderr pipe is read to its end: wait for the rank. A rank that fails ends
			// the job (the other one would wait for it in a barrier until the timeout).
			if werr[rank] = c.Wait(); werr[rank] != nil {
				cancel()
			}
		}()
	}
	jr := &jobResult{}
	done := make(chan struct{})
	var evWG sync.WaitGroup
	if event != nil && s.f.app != nil {
		// A program has no start marker: its events count from its launch.
		startCh <- time.Now()
	}
	if event != nil {
		evWG.Add(1)
		go func() {
			defer evWG.Done()
			select {
			case st := <-startCh:
				jr.start = st
				jr.marks = event(ctx, st)
			case <-done:
			}
		}()
	}
	readers.Wait() // every rank exited (and was waited for)
	close(done)
	evWG.Wait()
	for rank, err := range werr {
		if err != nil {
			return nil, fmt.Errorf("rank %d: %w\n%s", rank, err, errs[rank].String())
		}
	}
	jr.out = outs[0].String()
	if s.f.app != nil {
		return jr, nil
	}
	var rs []*bench.Result
	if err := json.Unmarshal(outs[0].Bytes(), &rs); err != nil || len(rs) != 1 {
		return nil, fmt.Errorf("no result from rank 0 (%v): %q\n%s", err, truncate(outs[0].Bytes(), 400), errs[0].String())
	}
	jr.res = rs[0]
	return jr, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) WriteString(s string) {
	l.mu.Lock()
	l.b.WriteString(s)
	l.mu.Unlock()
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// scenarioEnv is this process's environment without launcher and goarmci variables, except the
// GOARMCI_ knobs the user set for the ranks that the scenario does not set itself.
func scenarioEnv() []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range []string{"GOARMCI_RDV", "GOARMCI_RAILS", "GOARMCI_RANK", "GOARMCI_SIZE", "GOARMCI_JOBID", "SLURM_", "OMPI_", "PMI_", "PMIX_"} {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// scenarioOutput is what a scenario prints: OSU-style results, summary tables, and plots.
type scenarioOutput struct {
	results []*bench.Result
	tables  []*bench.Table
	plots   func(path string) []bench.PlotRequest
}

func (o scenarioOutput) emit(w, stderr io.Writer, f *scenarioFlags) error {
	first := true
	sep := func() {
		if !first && f.format != "csv" {
			fmt.Fprintln(w)
		}
		first = false
	}
	run := bench.CurrentRun()
	for _, r := range o.results {
		if r.Run == nil {
			r.Run = run
		}
		sep()
		if err := r.Write(w, f.format); err != nil {
			return err
		}
	}
	for _, t := range o.tables {
		if t.Run == nil {
			t.Run = run
		}
		sep()
		if err := t.Write(w, f.format); err != nil {
			return err
		}
	}
	if f.plot != "" && o.plots != nil {
		if err := renderPlots(stderr, o.plots(f.plot)); err != nil {
			return &exitError{code: 1, err: fmt.Errorf("bench: plot: %w", err)}
		}
	}
	return nil
}

// suffixPath inserts _tag before path's extension.
func suffixPath(path, tag string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "_" + tag + ext
}

// policies lists the -policies specs.
func (f *scenarioFlags) policyList() []string {
	var out []string
	for _, p := range strings.Split(f.policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// configName names a (rail count, policy) column.
func configName(n int, pol string) string {
	if n == 1 {
		return "1 rail"
	}
	return fmt.Sprintf("%d rails %s", n, pol)
}

// rails runs the rail-scaling sweep: 1 rail once, every policy for more.
func (s *scenario) rails(ctx context.Context) (scenarioOutput, error) {
	counts, _ := s.f.railCounts()
	var runs []*bench.Result
	var names []string
	var railsOf []int
	for _, n := range counts {
		pols := s.f.policyList()
		if n == 1 {
			pols = []string{"auto"}
		}
		for _, pol := range pols {
			s.prog.Start(configName(n, pol))
			jr, err := s.launch(ctx, n, []string{"GOARMCI_STRIPE_POLICY=" + pol}, "put", nil)
			if err != nil {
				return scenarioOutput{}, fmt.Errorf("%d rails, policy %s: %w", n, pol, err)
			}
			s.prog.Step(configName(n, pol) + " done")
			runs = append(runs, jr.res)
			names = append(names, configName(n, pol))
			railsOf = append(railsOf, n)
		}
	}
	header := s.rateHeader(counts)
	tables := bench.MergeColumns(runs, names, []string{bench.ColPutBW, bench.ColGetBW, bench.ColPutLat, bench.ColGetLat},
		[]string{"# goarmci multi-rail Put Bandwidth Test (MB/s)", "# goarmci multi-rail Get Bandwidth Test (MB/s)",
			"# goarmci multi-rail Put Latency Test (us)", "# goarmci multi-rail Get Latency Test (us)"}, header)
	ratio := bench.RatioTable(runs, names, railsOf, s.summedRate)
	out := scenarioOutput{results: tables, tables: []*bench.Table{ratio}}
	out.plots = func(path string) []bench.PlotRequest {
		var reqs []bench.PlotRequest
		for i, tag := range []string{"put_bw", "get_bw"} {
			reqs = append(reqs, bench.PlotRequest{Path: suffixPath(path, tag), Result: tables[i]})
		}
		return reqs
	}
	return out, nil
}

// rateHeader describes the rails' rates.
func (s *scenario) rateHeader(counts []int) []string {
	h := []string{fmt.Sprintf("Testbed: 2 hosts (network namespaces), %d veth rails, tbf %s per rail on each host's egress", s.f.rails, s.f.rate)}
	var sums []string
	for _, n := range counts {
		if v := s.summedRate(n); v > 0 {
			sums = append(sums, fmt.Sprintf("%d rails %.2f MB/s", n, v))
		}
	}
	if len(sums) > 0 {
		h = append(h, "Summed rate: "+strings.Join(sums, ", "))
	}
	return h
}

// interleave runs the interleaving test over each rail count.
func (s *scenario) interleave(ctx context.Context) (scenarioOutput, error) {
	counts, _ := s.f.railCounts()
	var out scenarioOutput
	for _, n := range counts {
		s.prog.Start(strings.TrimSpace(configName(n, "")))
		jr, err := s.launch(ctx, n, nil, "put", nil)
		if err != nil {
			return out, fmt.Errorf("%d rails: %w", n, err)
		}
		s.prog.Step(strings.TrimSpace(configName(n, "")) + " done")
		jr.res.Header = append(jr.res.Header, s.rateHeader([]int{n})...)
		out.results = append(out.results, jr.res)
	}
	out.plots = func(path string) []bench.PlotRequest {
		var reqs []bench.PlotRequest
		for i, r := range out.results {
			reqs = append(reqs, bench.PlotRequest{Path: suffixPath(path, fmt.Sprintf("%drails", counts[i])), Result: r})
		}
		return reqs
	}
	return out, nil
}

// hotspot runs a timeline per policy with one rail slowed mid-run.
func (s *scenario) hotspot(ctx context.Context) (scenarioOutput, error) {
	rates, _ := bench.ParseRates(s.f.rate, s.f.rails)
	if rates[s.f.cutRail] == "" {
		return scenarioOutput{}, fmt.Errorf("%w: hotspot needs a -rate on rail %d", bench.ErrOptions, s.f.cutRail)
	}
	old, _ := bench.ParseRate(rates[s.f.cutRail])
	newRate := fmt.Sprintf("%dkbit", int(old*8e3/s.f.cutFactor))
	newSum := s.summedRate(s.f.rails) - old + old/s.f.cutFactor
	tab := &bench.Table{
		Name: "hotspot", Title: "# goarmci multi-rail hot spot: a rail's rate cut mid-run", Key: "Policy",
		Header: append(s.rateHeader([]int{s.f.rails}),
			fmt.Sprintf("Event: rail %d cut from %s to %s (tc qdisc change, both hosts) %v after the start; new summed rate %.2f MB/s", s.f.cutRail, rates[s.f.cutRail], newRate, s.f.event, newSum),
			fmt.Sprintf("Recovered: %d consecutive operations at >= %.0f%% of the new summed rate", 3, 100*s.f.recover)),
		Columns: []string{"Before (MB/s)", "After (MB/s)", "After/new sum %", "Recovered (ops)", "Recovered (ms)", "Slow rail stripes before %", "after %", "Slow rail bytes before %", "after %"},
	}
	var series []bench.Series
	var timelines []*bench.Result
	ev := 0.0
	for _, pol := range s.f.policyList() {
		var txAtCut []uint64
		s.prog.Start("policy " + pol)
		tx0 := s.txBytes()
		jr, err := s.launch(ctx, s.f.rails, []string{"GOARMCI_STRIPE_POLICY=" + pol}, s.f.op, func(ctx context.Context, start time.Time) map[string]time.Time {
			if sleepUntil(ctx, start.Add(s.f.event)) != nil {
				return nil
			}
			t := time.Now()
			txAtCut = s.txBytes()
			for h := 0; h < 2; h++ {
				if err := s.tb.ChangeRate(h, s.f.cutRail, newRate); err != nil {
					fmt.Fprintf(s.stderr, "goarmci: bench hotspot: %v\n", err)
				}
			}
			return map[string]time.Time{"cut": t}
		})
		// Restore the rate for the next policy whatever happened.
		for h := 0; h < 2; h++ {
			if rerr := s.tb.Rate(h, s.f.cutRail, rates[s.f.cutRail]); rerr != nil && err == nil {
				err = rerr
			}
		}
		if err != nil {
			return scenarioOutput{}, fmt.Errorf("policy %s: %w", pol, err)
		}
		tl, err := bench.TimelineOf(jr.res)
		if err != nil {
			return scenarioOutput{}, err
		}
		cut, ok := jr.marks["cut"]
		if !ok {
			return scenarioOutput{}, fmt.Errorf("policy %s: the run ended before the rate was cut", pol)
		}
		ev = ms(cut.Sub(jr.start))
		row := bench.HotspotRow(pol, tl, ev, newSum, s.f.recover, s.f.cutRail)
		row.Values = append(row.Values, 100*railShare(tx0, txAtCut, s.f.cutRail), 100*railShare(txAtCut, s.txBytes(), s.f.cutRail))
		tab.Rows = append(tab.Rows, row)
		series = append(series, bench.Series{Name: pol, TL: tl})
		jr.res.Header = append(jr.res.Header, fmt.Sprintf("Run: policy %s; rail %d cut at %.1f ms", pol, s.f.cutRail, ev))
		timelines = append(timelines, jr.res)
		s.prog.Step("policy " + pol + " done")
	}
	out := scenarioOutput{tables: []*bench.Table{tab}}
	if s.f.timelines || s.f.format != "text" {
		out.results = timelines
	}
	out.plots = func(path string) []bench.PlotRequest {
		title := fmt.Sprintf("goarmci multi-rail hot spot: rail %d cut to 1/%g of its rate %s after the start\n%s",
			s.f.cutRail, s.f.cutFactor, seconds(s.f.event), s.timelineLine(s.f.op, timelines))
		return []bench.PlotRequest{bench.TimelinePlot(path, title, series, []bench.Event{{Name: "rate cut", Ms: ev}})}
	}
	return out, nil
}

// fault runs put and get timelines with rail 0's cable pulled mid-run, APM on and off.
func (s *scenario) fault(ctx context.Context) (scenarioOutput, error) {
	ops := []string{s.f.op}
	if s.f.op == "both" {
		ops = []string{"put", "get"}
	}
	tab := &bench.Table{
		Name: "fault", Title: "# goarmci network fault: rail 0 pulled mid-run [Vishnu09 Fig. 10/11]", Key: "Run",
		Header: append(s.rateHeader([]int{s.f.rails}),
			fmt.Sprintf("Event: rail 0 down (ip link set down) %v after the start, up again %v later", s.f.event, s.f.down),
			"Down: bytes moved while down / down time; Detect: pull -> end of the first operation after it slower than 3x the median;",
			"Stall: longest operation overlapping the fault minus the median before; Failover: pull -> 3 operations in a row, while down,",
			"at >= 80% of before x (R-1)/R; Full again: plug-in -> 3 operations in a row at >= 90% of before"),
		Columns: []string{"Before (MB/s)", "Down (MB/s)", "After (MB/s)", "Detect (ms)", "Stall (ms)", "Failover (ms)", "Full again (ms)"},
	}
	var series []bench.Series
	var events []bench.Event
	var timelines []*bench.Result
	for _, apm := range strings.Split(s.f.apm, ",") {
		apm = strings.TrimSpace(apm)
		for _, op := range ops {
			key := fmt.Sprintf("%s APM=%s", op, apm)
			s.prog.Start(key)
			jr, err := s.launch(ctx, s.f.rails, []string{"GOARMCI_APM=" + apm}, op, func(ctx context.Context, start time.Time) map[string]time.Time {
				m := map[string]time.Time{}
				if sleepUntil(ctx, start.Add(s.f.event)) != nil {
					return m
				}
				m["down"] = time.Now()
				if err := s.tb.Link(0, false); err != nil {
					fmt.Fprintf(s.stderr, "goarmci: bench fault: %v\n", err)
				}
				_ = sleepUntil(ctx, m["down"].Add(s.f.down))
				m["up"] = time.Now()
				if err := s.tb.Link(0, true); err != nil {
					fmt.Fprintf(s.stderr, "goarmci: bench fault: %v\n", err)
				}
				return m
			})
			_ = s.tb.Link(0, true)
			if err != nil {
				return scenarioOutput{}, fmt.Errorf("%s: %w", key, err)
			}
			tl, err := bench.TimelineOf(jr.res)
			if err != nil {
				return scenarioOutput{}, err
			}
			down, ok1 := jr.marks["down"]
			up, ok2 := jr.marks["up"]
			if !ok1 || !ok2 {
				return scenarioOutput{}, fmt.Errorf("%s: the run ended before the fault was over", key)
			}
			d, u := ms(down.Sub(jr.start)), ms(up.Sub(jr.start))
			st := tl.Fault(d, u, float64(s.f.rails-1)/float64(s.f.rails))
			tab.Rows = append(tab.Rows, bench.TableRow{Key: key, Values: []float64{st.Before, st.During, st.After, st.Detect, st.Stall, st.Failover, st.Full}})
			series = append(series, bench.Series{Name: key, TL: tl})
			jr.res.Header = append(jr.res.Header, fmt.Sprintf("Run: %s; rail 0 down at %.1f ms, up at %.1f ms", key, d, u))
			timelines = append(timelines, jr.res)
			if len(events) == 0 {
				events = []bench.Event{{Name: "rail 0 down", Ms: d}, {Name: "rail 0 up", Ms: u}}
			}
			s.prog.Step(key + " done")
		}
	}
	out := scenarioOutput{tables: []*bench.Table{tab}}
	if s.f.timelines || s.f.format != "text" {
		out.results = timelines
	}
	out.plots = func(path string) []bench.PlotRequest {
		title := fmt.Sprintf("goarmci network fault: rail 0 pulled %s after the start, plugged back %s later\n%s",
			seconds(s.f.event), seconds(s.f.down), s.timelineLine(strings.Join(ops, " and "), timelines))
		return []bench.PlotRequest{bench.TimelinePlot(path, title, series, events)}
	}
	return out, nil
}

// timelineLine is a timeline figure's second title line: the operations and their size, the
// rails and their rate, the transport and the ranks.
func (s *scenario) timelineLine(ops string, runs []*bench.Result) string {
	size := s.f.size
	if n, err := bench.ParseSize(size); err == nil {
		size = sizeName(n)
	}
	line := fmt.Sprintf("%s of %s, %d rails at %s each", ops, size, s.f.rails, s.f.rate)
	if len(runs) > 0 && runs[0].Transport != "" {
		line += ", " + runs[0].Transport
	}
	return line + ", 2 ranks"
}

// seconds writes a duration for a figure's title with 3 significant digits: "2.67 s", "2 s".
func seconds(d time.Duration) string { return fmt.Sprintf("%.3g s", d.Seconds()) }

// sizeName writes a byte count the way -size takes it back: "1 MiB", "512 KiB", "100 B".
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// txBytes samples host 0's transmitted bytes on every rail (nil on error).
func (s *scenario) txBytes() []uint64 {
	out := make([]uint64, s.tb.Rails())
	for r := range out {
		_, tx, err := s.tb.Counters(0, r)
		if err != nil {
			return nil
		}
		out[r] = tx
	}
	return out
}

// railShare is rail's share (0..1) of the bytes sent between two samples (NaN without them).
func railShare(from, to []uint64, rail int) float64 {
	if len(from) != len(to) || rail >= len(from) {
		return math.NaN()
	}
	var all, mine float64
	for r := range from {
		d := float64(to[r] - from[r])
		all += d
		if r == rail {
			mine = d
		}
	}
	if all == 0 {
		return math.NaN()
	}
	return mine / all
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// appRuns runs the program over each rail count, with and without a rail pulled.
func (s *scenario) appRuns(ctx context.Context) (scenarioOutput, error) {
	counts, _ := s.f.railCounts()
	tab := &bench.Table{
		Name: "app", Title: "# goarmci program across two hosts: " + strings.Join(append([]string{filepath.Base(s.f.app[0])}, s.f.app[1:]...), " "), Key: "Run",
		Header:  s.rateHeader(counts),
		Columns: []string{"Wall (s)", "Program time (s)", "Verified"},
	}
	if s.f.pull {
		tab.Header = append(tab.Header, fmt.Sprintf("Fault: rail 0 down (ip link set down) %v after the launch for %v", s.f.event, s.f.down))
	}
	for _, n := range counts {
		modes := []bool{false}
		if s.f.pull && n > 1 {
			modes = append(modes, true)
		}
		for _, pull := range modes {
			key := configName(n, "")
			key = strings.TrimSpace(key)
			var event func(ctx context.Context, start time.Time) map[string]time.Time
			if pull {
				key += ", rail 0 pulled"
				event = func(ctx context.Context, start time.Time) map[string]time.Time {
					m := map[string]time.Time{}
					if sleepUntil(ctx, start.Add(s.f.event)) != nil {
						return m
					}
					m["down"] = time.Now()
					_ = s.tb.Link(0, false)
					_ = sleepUntil(ctx, m["down"].Add(s.f.down))
					_ = s.tb.Link(0, true)
					m["up"] = time.Now()
					return m
				}
			}
			s.prog.Start(key)
			t0 := time.Now()
			jr, err := s.launch(ctx, n, nil, "", event)
			wall := time.Since(t0).Seconds()
			_ = s.tb.Link(0, true)
			if err != nil {
				return scenarioOutput{}, fmt.Errorf("%s: %w", key, err)
			}
			if s.f.verbose {
				fmt.Fprint(s.stderr, jr.out)
			}
			if pull {
				if _, ok := jr.marks["up"]; !ok {
					key += " (ended before the fault was over)"
				}
			}
			prog, ok := bench.NPBReport(jr.out)
			verified := 0.0
			if ok {
				verified = 1
			}
			tab.Rows = append(tab.Rows, bench.TableRow{Key: key, Values: []float64{wall, prog, verified}})
			s.prog.Step(fmt.Sprintf("%s done in %.2f s", key, wall))
		}
	}
	return scenarioOutput{tables: []*bench.Table{tab}}, nil
}
