package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma/transport"
)

// Scale figures on the simulated fabric: `goarmci bench barrier -sim`, `goarmci bench qp-setup
// -sim`, `goarmci bench apm -sim`, `goarmci bench memory -sim` and `goarmci bench aqps -sim`
// (bench/barrier_sim.go, bench/scale_sim.go, bench/memory_sim.go, bench/aqps_sim.go), as `bench
// hotspot -sim`: all ranks in this process, tables on standard output, and with -out DIR one CSV
// and one PNG per table.

// scaleSims are the benchmarks with a -sim form besides hotspot.
var scaleSims = []string{"barrier", bench.ScaleQPSetup, bench.ScaleAPM, bench.ScaleMemory, bench.ScaleAQPS}

// scaleSimName returns the scale simulation a bench command line asks for.
func scaleSimName(args []string) (string, bool) {
	if !isSim(args) {
		return "", false
	}
	for _, a := range args {
		if slices.Contains(scaleSims, a) {
			return a, true
		}
	}
	return "", false
}

const scaleUsage = `usage: goarmci bench barrier|qp-setup|apm|memory|aqps -sim [flags]

Scale figures on the simulated fabric (ibv/fabric), all ranks in this process, on the fabric's
virtual clock (testing/synctest) where the model prices them (bench/README.md, "Scale on the
simulated fabric"):
  barrier   latency of every barrier algorithm of [Kini03 §3] and of two point-to-point barriers
            (central, pairwise exchange), and the speed-up over the pairwise one, per job size
            (-np, up to 2048)
  qp-setup  connecting every pair of a job's ranks vs job size (-np): queue pairs, wall time of
            their creation and transitions on this machine, memory; eager and on demand
  apm       arming and migrating -qps queue pairs (APM, [Vishnu07 ch. 9]): wall time on this
            machine, and the latency of an 8-byte put while they migrate
  memory    communication memory per rank after an all-to-all, per job size (-ranks): RC-only,
            shared datagram (DC) and adaptive (DC and -maxrc RC connections) [Sridhar08]; jobs
            above -full ranks extrapolated per peer from the largest one built
  aqps      [Takagi15 §4.3]'s onetoall, alltoone and repeat on one job size (-ranks) with the
            HCA's queue pair context cache and DC connects priced (fabric.HCAModel): latency per
            8-byte put (repeat: execution time) over RC only, DC only and adaptive (-modes)

Flags:
`

// scaleFlags are the command line of the scale simulations.
type scaleFlags struct {
	np, alg, qps, format, out string
	iters, warmup             int
	maxRC, full, rmaRanks     int
	latency, cost, poll       time.Duration
	gbps                      float64
	verbose                   bool

	// aqps
	modes           string
	messages        int
	qpCache         int
	miss, dcConnect time.Duration
	rcWindow        time.Duration
	dcPerPeer       bool
}

func parseScale(stderr io.Writer, name string, args []string) (*scaleFlags, error) {
	var f scaleFlags
	fs := flag.NewFlagSet("goarmci bench "+name+" -sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, scaleUsage)
		fs.PrintDefaults()
	}
	fs.Bool("sim", true, "run on the simulated fabric (this command)")
	np := map[string]string{"barrier": "2,4,7,8,12,16,17,32,64,100,128,256,512,1024",
		bench.ScaleQPSetup: "2,4,8,16,32,64,128,256,512,1024", bench.ScaleAPM: "4", bench.ScaleMemory: "64,256,1024",
		bench.ScaleAQPS: "64"}[name]
	fs.StringVar(&f.np, "np", np, "job sizes (comma list of ranks)")
	fs.StringVar(&f.np, "ranks", np, "job sizes (the same as -np)")
	fs.IntVar(&f.maxRC, "maxrc", 0, fmt.Sprintf("memory: h, RC connections per rank of the adaptive configuration (0: GOARMCI_MAX_RC's default, %d)",
		transport.DefaultConfig().MaxRC))
	fs.IntVar(&f.full, "full", 0, "memory: largest job built whole, larger ones extrapolated (default 256, at most 1024)")
	fs.IntVar(&f.rmaRanks, "rma", 0, "memory: largest job also run as an rma job (Runtime.Memory; default 64, at most 256, -1: none)")
	fs.StringVar(&f.alg, "alg", "", "barrier: algorithms (comma list of dissemination, pairwise, gather-broadcast, rgm, message, message-pairwise; default all)")
	fs.StringVar(&f.qps, "qps", "16,64,256,1024,2048", "apm: numbers of queue pairs (comma list)")
	fs.IntVar(&f.iters, "iters", 0, "timed iterations (barrier: barriers per algorithm, default 10; apm: puts per migration round, default 20)")
	fs.IntVar(&f.warmup, "warmup", 0, "barrier: untimed barriers per algorithm (default 2)")
	fs.DurationVar(&f.latency, "latency", 0, "model: one-way latency of every link (default 1.1us)")
	fs.DurationVar(&f.cost, "msg-cost", 0, "model: time every packet occupies a host's link (default 2.5us)")
	fs.Float64Var(&f.gbps, "link-rate", 0, "model: link capacity in GB/s (default 1)")
	fs.DurationVar(&f.poll, "poll", 0, "model: sleep of a waiting rank between polls (default 1us)")
	fs.IntVar(&f.messages, "messages", 0, "aqps: puts per origin and target and phase (default 400)")
	fs.StringVar(&f.modes, "modes", strings.Join(bench.AQPSModes, ","), "aqps: transports (comma list of rc, dc, adaptive)")
	fs.IntVar(&f.qpCache, "qp-cache", bench.DefaultHCA.QPCache, "aqps model: queue pair contexts an HCA caches")
	fs.DurationVar(&f.miss, "miss", bench.DefaultHCA.MissPenalty, "aqps model: host link time of a context miss")
	fs.DurationVar(&f.dcConnect, "dc-connect", bench.DefaultHCA.DCConnect, "aqps model: host link time of a DC connect")
	fs.BoolVar(&f.dcPerPeer, "dc-context-per-peer", false, "aqps model: the HCA caches a DC queue pair's state per peer (default: one context per DC queue pair)")
	fs.DurationVar(&f.rcWindow, "rc-window", 0, "aqps: the adaptive transport's window GOARMCI_RC_WINDOW (default 200ms)")
	fs.StringVar(&f.format, "format", "text", "text, csv or json")
	fs.StringVar(&f.out, "out", "", "also write NAME.csv and NAME.png of every table into this directory")
	fs.BoolVar(&f.verbose, "v", false, "report every job's wall time on stderr")
	if err := fs.Parse(without(args, name)); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageError("bench %s -sim: unexpected %q", name, fs.Args())
	}
	switch f.format {
	case "text", "osu", "csv", "json":
	default:
		return nil, usageError("bench: -format %q (want text, csv or json)", f.format)
	}
	return &f, nil
}

// intList parses a comma list of integers.
func intList(flagName, s string) ([]int, error) {
	var out []int
	for item := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(item))
		if err != nil {
			return nil, usageError("bench: -%s %q", flagName, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// model is the scale model of the flags.
func (f *scaleFlags) model() bench.SimModel {
	return bench.SimModel{LinkLatency: f.latency, MessageCost: f.cost, LinkRate: int64(f.gbps * 1e9), Poll: f.poll}
}

// runScaleSim is `goarmci bench barrier|qp-setup|apm|memory|aqps -sim`.
func runScaleSim(stdout, stderr io.Writer, name string, args []string) error {
	f, err := parseScale(stderr, name, args)
	if err != nil {
		return parseFailure(err)
	}
	ranks, err := intList("np", f.np)
	if err != nil {
		return err
	}
	start := time.Now()
	progress := func(n int, wall time.Duration) {
		if f.verbose {
			fmt.Fprintf(stderr, "goarmci: bench %s -sim: %d: %.1f s\n", name, n, wall.Seconds())
		}
	}
	run := func(bubble func(func())) error {
		// not the command's signal context: a bubble must not wait on channels from outside it
		ctx := context.Background()
		var res []*bench.Result
		var err error
		switch name {
		case "barrier":
			o := bench.BarrierSimOptions{Model: f.model(), Ranks: ranks, Iters: f.iters, Warmup: f.warmup, Progress: progress}
			if f.alg != "" && f.alg != "all" {
				if o.Algs, err = bench.BarrierAlgs(f.alg); err != nil {
					return usageError("%v", err)
				}
			}
			res, err = bench.BarrierSim(ctx, o, bubble)
		case bench.ScaleQPSetup:
			res, err = bench.QPSetupSim(ctx, bench.QPSetupOptions{Model: f.model(), Ranks: ranks, Progress: progress}, bubble)
		case bench.ScaleAQPS:
			if len(ranks) != 1 {
				return usageError("bench aqps -sim: one job size, not -ranks %q", f.np)
			}
			o := bench.AQPSSimOptions{Model: f.model(), Ranks: ranks[0], Messages: f.messages, RCWindow: f.rcWindow,
				Modes: strings.Split(f.modes, ","), Progress: func(mode string, wall time.Duration) {
					if f.verbose {
						fmt.Fprintf(stderr, "goarmci: bench aqps -sim: %s: %.1f s\n", mode, wall.Seconds())
					}
				}}
			o.HCA = fabric.HCAModel{QPCache: f.qpCache, MissPenalty: f.miss, DCConnect: f.dcConnect, DCContextPerPeer: f.dcPerPeer}
			res, err = bench.AQPSSim(ctx, o, bubble)
		case bench.ScaleMemory:
			res, err = bench.MemorySim(ctx, bench.MemoryOptions{Ranks: ranks, MaxRC: f.maxRC, FullRanks: f.full,
				RuntimeRanks: f.rmaRanks, Progress: progress}, bubble)
		default:
			qps, qerr := intList("qps", f.qps)
			if qerr != nil {
				return qerr
			}
			res, err = bench.APMSim(ctx, bench.APMOptions{QPs: qps, Puts: f.iters, Progress: progress})
		}
		if err != nil {
			return simFailure(err)
		}
		return writeScale(stdout, stderr, f, res, time.Since(start))
	}
	return inBubble(stderr, run)
}

// writeScale prints the tables and, with -out, writes their CSV and PNG files.
func writeScale(stdout, stderr io.Writer, f *scaleFlags, res []*bench.Result, wall time.Duration) error {
	var plots []bench.PlotRequest
	for i, r := range res {
		r.Run = bench.CurrentRun()
		r.Header = append(r.Header, fmt.Sprintf("Wall time: %.1f s", wall.Seconds()))
		if i > 0 && f.format == "text" {
			fmt.Fprintln(stdout)
		}
		if err := r.Write(stdout, f.format); err != nil {
			return err
		}
		if f.out == "" {
			continue
		}
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return &exitError{code: 1, err: err}
		}
		w, err := os.Create(filepath.Join(f.out, r.Name+".csv"))
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		err = r.Write(w, "csv")
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		plots = append(plots, bench.PlotRequest{Path: filepath.Join(f.out, r.Name+".png"), Result: r})
	}
	if len(plots) > 0 {
		if err := renderPlots(stderr, plots); err != nil {
			return &exitError{code: 1, err: fmt.Errorf("bench: plot: %w", err)}
		}
	}
	return nil
}
