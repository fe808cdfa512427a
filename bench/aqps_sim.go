package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
	"github.com/goarmci/goarmci/rma/transport"
)

// The three micro-benchmarks of [Takagi15 §4.3] on the scale model (SimModel) with the HCA's
// costs of queue pair contexts and DC connects (fabric.HCAModel), one rank per node as in
// [Takagi15 §4.1]: onetoall (rank 0 puts to every other rank in turn), alltoone (every other rank
// puts to rank 0 at once) and repeat (onetoall then alltoone, five times). A message is a
// blocking 8-byte rma.Put. The transport of the ranks' network peers is a parameter (the mode):
// RC only, DC only, or adaptive ([Takagi15 §3], AQPS).

// ScaleAQPS names the simulation (goarmci bench aqps -sim).
const ScaleAQPS = "aqps"

// AQPSModes are AQPSSim's modes (rma.Config.NetworkTransport), in column order.
var AQPSModes = []string{rma.NetRC, rma.NetDC, rma.NetAdaptive}

// DefaultHCA is AQPSSim's HCA model: a cache of 32 queue pair contexts (a bit more than the 26
// RC queue pairs [Takagi15 §4.1]'s AQPS keeps active to stay clear of thrashing, §4.3), 750 ns per
// miss (the PCIe fetch of a context, 0.5–1 µs in the literature [Takagi15 §2.1]), 1 µs per DC
// connect (the HCA's connect and disconnect packets, priced at the order of a context fetch
// rather than at the model's per-packet host cost), and a DC queue pair one context
// (fabric.HCAModel.DCContextPerPeer false). bench/README.md has the figures with other values.
var DefaultHCA = fabric.HCAModel{QPCache: 32, MissPenalty: 750 * time.Nanosecond, DCConnect: time.Microsecond}

// AQPSSimOptions configures AQPSSim. Zero values take the defaults named.
type AQPSSimOptions struct {
	Model SimModel
	// HCA is the HCA model of every node (default DefaultHCA).
	HCA fabric.HCAModel
	// Ranks is the job size (default 64, [Takagi15 §4.3]'s figures).
	Ranks int
	// Messages is the number of puts from an origin to a target in one phase (default 400):
	// in onetoall rank 0 puts Messages·(Ranks−1) times, in alltoone every other rank Messages
	// times.
	Messages int
	// Modes are the transports, one column each (default AQPSModes).
	Modes []string
	// RCWindow is the adaptive transport's statistics window (GOARMCI_RC_WINDOW, set for the
	// jobs and restored after, with GOARMCI_RC_IDLE_TIMEOUT at the window; default 200 ms:
	// an evaluation every 100 ms of virtual time, [Takagi15 §4.1]'s second scaled to phases of
	// a few hundred milliseconds, long enough for a peer of onetoall to send more messages in a
	// window than pay for its connection setup in the selection's cost model).
	RCWindow time.Duration
	// Progress, when set, is called after every mode with its wall time.
	Progress func(mode string, wall time.Duration)
}

// aqpsPatterns are the patterns, in the order of the results.
var aqpsPatterns = []string{"onetoall", "alltoone", "repeat"}

// aqpsRun is what one job of AQPSSim measured: the virtual time per message of onetoall and of
// alltoone (the sending ranks' slowest), the execution time of repeat, every rank's slots after
// the job (slot r: the last value rank r put there, 0 for none), and the HCA's and the adaptive
// transport's counts.
type aqpsRun struct {
	times [3]time.Duration
	slots [][]uint64
	hca   fabric.HCAStats   // every node's, summed
	ad    rma.AdaptiveStats // every rank's counts, summed
}

// AQPSSim runs [Takagi15 §4.3]'s three patterns on o.Ranks ranks of the scale model with the HCA
// model, once per mode, and returns three tables, one per pattern: onetoall and alltoone in µs
// per message (a sending rank's phase time over its messages, the slowest sender's), repeat
// its execution time in µs; each with adaptive's change over DC only and over RC only in %
// (negative: faster), the paper's comparisons (when o.Modes has the modes). Every put is
// checked at its target after the job. bubble runs its function inside a testing/synctest
// bubble (see HotspotSim); ctx must not come from outside the bubble. Errors wrap ErrOptions,
// and rma's.
func AQPSSim(ctx context.Context, o AQPSSimOptions, bubble func(func())) ([]*Result, error) {
	o.Model = o.Model.withDefaults()
	if err := o.Model.check(); err != nil {
		return nil, err
	}
	if o.HCA == (fabric.HCAModel{}) {
		o.HCA = DefaultHCA
	}
	if o.Ranks == 0 {
		o.Ranks = 64
	}
	if o.Messages == 0 {
		o.Messages = 400
	}
	if len(o.Modes) == 0 {
		o.Modes = AQPSModes
	}
	if o.RCWindow == 0 {
		o.RCWindow = 200 * time.Millisecond
	}
	if o.Ranks < 2 || o.Ranks > 1024 || o.Messages < 1 || o.RCWindow < 0 {
		return nil, fmt.Errorf("%w: aqps simulation: ranks %d (2..1024), messages %d, window %v", ErrOptions,
			o.Ranks, o.Messages, o.RCWindow)
	}
	for _, m := range o.Modes {
		if !slices.Contains(AQPSModes, m) {
			return nil, fmt.Errorf("%w: aqps simulation: mode %q (want %v)", ErrOptions, m, AQPSModes)
		}
	}
	defer setEnv(transport.EnvWindow, o.RCWindow.String())()
	defer setEnv(transport.EnvIdleTimeout, o.RCWindow.String())()
	header := []string{o.Model.header(),
		fmt.Sprintf("HCA: a cache of %d queue pair contexts per node, %v per miss, %v per DC connect, %s (fabric.HCAModel)",
			o.HCA.QPCache, o.HCA.MissPenalty, o.HCA.DCConnect, dcContexts(o.HCA)),
		fmt.Sprintf("%d blocking 8-byte puts per origin and target and phase; repeat: %d rounds of onetoall and alltoone; after one untimed round of each",
			o.Messages, aqpsRepeat),
		fmt.Sprintf("Adaptive: GOARMCI_RC_WINDOW=%v, GOARMCI_RC_IDLE_TIMEOUT=%v, the other selection knobs at their defaults",
			o.RCWindow, o.RCWindow)}
	res := make([]*Result, len(aqpsPatterns))
	for i, p := range aqpsPatterns {
		unit := "latency of one put, us"
		if p == "repeat" {
			unit = "execution time, us"
		}
		res[i] = &Result{Name: "aqps-" + p, KeyLabel: "Ranks", Ranks: o.Ranks, Transport: "fabric (simulated)",
			Title:  fmt.Sprintf("# goarmci [Takagi15 §4.3] %s on the simulated fabric: %s", p, unit),
			Header: header, Rows: []Row{{Size: o.Ranks}}}
		for _, m := range o.Modes {
			res[i].Columns = append(res[i].Columns, m+" (us)")
		}
	}
	us := make([][3]float64, len(o.Modes))
	for j, mode := range o.Modes {
		start := time.Now()
		var run aqpsRun
		var err error
		bubble(func() { run, err = aqpsJob(ctx, o, mode) })
		if err == nil {
			err = CheckAQPSSlots(o.Ranks, o.Messages, run.slots)
		}
		if err != nil {
			return nil, fmt.Errorf("bench: aqps simulation, %s: %w", mode, err)
		}
		for i, d := range run.times {
			us[j][i] = float64(d) / float64(time.Microsecond)
			res[i].Rows[0].Values = append(res[i].Rows[0].Values, us[j][i])
		}
		puts := float64((o.Ranks - 1) * (2 + 2*(1+aqpsRepeat)*o.Messages))
		line := fmt.Sprintf("%s, per put of the job: %.2f context misses, %.2f DC connects, %.2f DC accepts (every node's)",
			mode, float64(run.hca.Misses)/puts, float64(run.hca.Connects)/puts, float64(run.hca.Accepts)/puts)
		if mode == rma.NetAdaptive {
			line += fmt.Sprintf("; %d promotions to RC, %d refused, %d demotions (every rank's)",
				run.ad.Promotions, run.ad.Refusals, run.ad.Demotions)
		}
		for _, r := range res {
			r.Header = append(slices.Clip(r.Header), line)
		}
		if o.Progress != nil {
			o.Progress(mode, time.Since(start))
		}
	}
	a := slices.Index(o.Modes, rma.NetAdaptive)
	for _, base := range []string{rma.NetDC, rma.NetRC} {
		b := slices.Index(o.Modes, base)
		if a < 0 || b < 0 {
			continue
		}
		for i := range res {
			res[i].Columns = append(res[i].Columns, "adaptive vs "+base+" (%)")
			res[i].Rows[0].Values = append(res[i].Rows[0].Values, 100*(us[a][i]/us[b][i]-1))
		}
	}
	return res, nil
}

// dcContexts describes what the HCA model caches of a DC queue pair.
func dcContexts(m fabric.HCAModel) string {
	if m.DCContextPerPeer {
		return "a context per DC queue pair and peer"
	}
	return "a context per DC queue pair"
}

// CheckAQPSSlots checks every rank's slots after a job of n ranks with messages puts per origin,
// target and phase: rank 0's last put of the last round's onetoall in slot 0 of every other
// rank, every other rank's last put of the last alltoone in its slot of rank 0, nothing else.
func CheckAQPSSlots(n, messages int, slots [][]uint64) error {
	if len(slots) != n {
		return fmt.Errorf("bench: aqps: %d ranks' slots, want %d", len(slots), n)
	}
	for t, s := range slots {
		for r, v := range s {
			var want uint64
			switch {
			case t == 0 && r > 0:
				want = aqpsValue(aqpsRepeat, 1, messages-1)
			case t > 0 && r == 0:
				want = aqpsValue(aqpsRepeat, 0, (messages-1)*(n-1)+t-1)
			}
			if v != want {
				return fmt.Errorf("bench: aqps: rank %d holds %#x from rank %d, want %#x", t, v, r, want)
			}
		}
	}
	return nil
}

// aqpsJob runs the patterns on one job in mode (call it inside a bubble).
func aqpsJob(ctx context.Context, o AQPSSimOptions, mode string) (aqpsRun, error) {
	n := o.Ranks
	m := o.Model.forJob(n)
	fc := m.fabricConfig(n) // a topology of its own
	fc.Topology.HCA = o.HCA
	var run aqpsRun
	run.slots = make([][]uint64, n)
	var mu sync.Mutex
	var fab *fabric.Fabric
	job := rmatest.FabricJob{Fabric: fc, Configure: func(i int, c *rma.Config) {
		m.configure(i, c)
		c.NetworkTransport = mode
	}, OnFabric: func(f *fabric.Fabric) { fab = f }}
	err := rmatest.StartFabricJob(ctx, n, job, func(ctx context.Context, rt *rma.Runtime) error {
		me := rt.Rank()
		rr, err := AQPSRank(ctx, rt, o.Messages)
		if err != nil {
			return err
		}
		ad := rt.Adaptive()
		mu.Lock()
		run.ad.Promotions += ad.Promotions
		run.ad.Refusals += ad.Refusals
		run.ad.Demotions += ad.Demotions
		if me == 0 {
			for i := range n {
				st, err := fab.HCAStats(i)
				if err != nil {
					mu.Unlock()
					return err
				}
				run.hca.Lookups += st.Lookups
				run.hca.Misses += st.Misses
				run.hca.Connects += st.Connects
				run.hca.Accepts += st.Accepts
			}
		}
		run.slots[me] = rr.Slots
		for i, d := range [3]time.Duration{rr.OneToAll, rr.AllToOne, rr.Repeat} {
			run.times[i] = max(run.times[i], d)
		}
		mu.Unlock()
		return nil
	})
	return run, err
}
