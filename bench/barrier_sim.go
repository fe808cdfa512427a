package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// Scale model: the simulated fabric (ibv/fabric) on virtual time, all ranks of a job in this
// process, one rank per node of one switch (a one-leaf FatTree: host → switch → host, the
// single-switch clusters of [Kini03 §5]). Every link has a latency (SimModel.LinkLatency) and a
// rate (SimModel.LinkRate), and a host's links charge every packet a per-message cost
// (SimModel.MessageCost, FatTree.HostGap): paid on the sender's link to the switch by every
// packet it sends and on the switch's link to the receiver by every packet it receives (a
// multicast packet crosses the sender's link once: the switch copies it). The defaults come
// from this machine (bench/README.md): a UDP datagram costs its sender about 5 µs (half charged
// at each end here), a loopback half round trip about 7 µs (two message costs and two link
// latencies). Times are the fabric clock's, so the figures are the model's, not the machine's;
// the machine only decides how long a run takes.

// SimModel is the scale model's parameters.
type SimModel struct {
	// LinkLatency is every link's one-way latency (default 1.1 µs).
	LinkLatency time.Duration
	// MessageCost is the time every packet occupies a host's link besides its bytes (default
	// 2.5 µs).
	MessageCost time.Duration
	// LinkRate is every link's capacity in bytes/s (default 1 GB/s).
	LinkRate int64
	// Poll is the ranks' sleep between two polls of a wait (rma.Config.NetworkPoll): the
	// figures' resolution. Default 1 µs, N/256 µs for jobs of N > 256 ranks (every poll of every
	// rank is an event of the simulation: the machine's time grows with N × barrier time / Poll).
	Poll time.Duration
}

func (m SimModel) withDefaults() SimModel {
	if m.LinkLatency == 0 {
		m.LinkLatency = 1100 * time.Nanosecond
	}
	if m.MessageCost == 0 {
		m.MessageCost = 2500 * time.Nanosecond
	}
	if m.LinkRate == 0 {
		m.LinkRate = 1e9
	}
	return m
}

// bigJob is the job size above which the defaults trade resolution and iterations for the
// machine's time (SimModel.Poll, BarrierSimOptions.Iters).
const bigJob = 256

// forJob is the model of a job of n ranks: the default poll step for n.
func (m SimModel) forJob(n int) SimModel {
	if m.Poll == 0 {
		m.Poll = time.Microsecond * time.Duration(max(1, n/bigJob))
	}
	return m
}

func (m SimModel) check() error {
	if m.LinkLatency < 0 || m.MessageCost < 0 || m.LinkRate < 1 || m.Poll < 0 {
		return fmt.Errorf("%w: scale model: latency %v, message cost %v, rate %d B/s, poll %v",
			ErrOptions, m.LinkLatency, m.MessageCost, m.LinkRate, m.Poll)
	}
	return nil
}

// header describes the model in a result's header.
func (m SimModel) header() string {
	poll := fmt.Sprintf("polls every %v", m.Poll)
	if m.Poll == 0 {
		poll = fmt.Sprintf("polls every 1µs (N/%d µs above %d ranks)", bigJob, bigJob)
	}
	return fmt.Sprintf("Model: one switch, links of %v latency and %g GB/s, %v per packet on a host's link, %s; virtual time",
		m.LinkLatency, float64(m.LinkRate)/1e9, m.MessageCost, poll)
}

// fabricConfig is the fabric of a job of n ranks on the model.
func (m SimModel) fabricConfig(n int) fabric.Config {
	// ACK timeout floor far above a root's queue of n packets (the engine's 10 ms would resend
	// spuriously at 1024 ranks)
	return fabric.Config{Topology: &fabric.FatTree{Leaves: 1, HostsPerLeaf: n, LinkRate: m.LinkRate,
		LinkLatency: m.LinkLatency, HostGap: m.MessageCost}, TimeoutFloor: time.Second}
}

// configure is every rank's configuration on the model: the hybridft manager on the fabric
// device, so jobs above GOARMCI_ON_DEMAND_THRESHOLD ranks connect on demand (n² queue pairs
// would not fit at 1024 ranks), and the model's poll step.
func (m SimModel) configure(_ int, c *rma.Config) {
	c.NetworkDeviceFT, c.NetworkPoll = true, m.Poll
}

// BarrierSimOptions configures BarrierSim. Zero values take the defaults named.
type BarrierSimOptions struct {
	Model SimModel
	// Ranks are the job sizes, one row each (default DefaultBarrierSimRanks).
	Ranks []int
	// Algs are the algorithms, one column each (default all six; the speed-ups are over
	// BarrierMessagePairwise, [Kini03 §5]'s MPI-PE, else over BarrierMessage).
	Algs []rma.BarrierAlg
	// Iters is the number of timed barriers per algorithm (default 10; 3 above 256 ranks), after
	// Warmup (default 2, 1 above 256 ranks: they also connect the peers of a job connected on
	// demand).
	Iters, Warmup int
	// Progress, when set, is called after every job size with its wall time.
	Progress func(ranks int, wall time.Duration)
}

// DefaultBarrierSimRanks are BarrierSim's default job sizes: powers of two up to 1024 and the
// non-powers of two of the comparison with [Kini03 §5].
var DefaultBarrierSimRanks = []int{2, 4, 7, 8, 12, 16, 17, 32, 64, 100, 128, 256, 512, 1024}

// barrierAlgLabel is an algorithm's column name: its name and [Kini03]'s abbreviation.
func barrierAlgLabel(a rma.BarrierAlg) string {
	switch a {
	case rma.BarrierDissemination:
		return "RDS"
	case rma.BarrierPairwise:
		return "RPE"
	case rma.BarrierGatherBroadcast:
		return "gather"
	case rma.BarrierRGM:
		return "RGM"
	case rma.BarrierMessage:
		return "p2p central"
	case rma.BarrierMessagePairwise:
		return "p2p PE"
	}
	return a.String()
}

// BarrierSim measures every barrier algorithm of o.Algs at every job size of o.Ranks on the scale
// model (see SimModel) and returns two tables: the latencies (µs per barrier: the slowest rank's
// mean over o.Iters consecutive barriers) and each algorithm's speed-up over the point-to-point
// baseline (the baseline's latency / the algorithm's, [Kini03 §5]'s "factor of improvement";
// only when o.Algs has a baseline: BarrierMessagePairwise, else BarrierMessage). bubble runs its function inside a testing/synctest bubble
// (see HotspotSim); ctx must not come from outside the bubble. Errors wrap ErrOptions, and rma's.
func BarrierSim(ctx context.Context, o BarrierSimOptions, bubble func(func())) ([]*Result, error) {
	o.Model = o.Model.withDefaults()
	if err := o.Model.check(); err != nil {
		return nil, err
	}
	if len(o.Ranks) == 0 {
		o.Ranks = DefaultBarrierSimRanks
	}
	if len(o.Algs) == 0 {
		o.Algs = allBarrierAlgs
	}

	for _, n := range o.Ranks {
		if n < 2 || n > 2048 {
			return nil, fmt.Errorf("%w: barrier simulation: ranks %d (2..2048)", ErrOptions, n)
		}
	}
	if o.Iters < 0 || o.Warmup < 0 {
		return nil, fmt.Errorf("%w: barrier simulation: iterations %d, warm-up %d", ErrOptions, o.Iters, o.Warmup)
	}
	lat := &Result{Name: "barrier", KeyLabel: "Ranks", Ranks: slices.Max(o.Ranks), Transport: "fabric (simulated)",
		Title:  "# goarmci barrier simulation: latency of one barrier, us ([Kini03 §3])",
		Header: []string{o.Model.header(), iterHeader(o.Iters, o.Warmup)}}
	base := slices.Index(o.Algs, rma.BarrierMessagePairwise)
	if base < 0 {
		base = slices.Index(o.Algs, rma.BarrierMessage)
	}
	var ratio *Result
	if base >= 0 {
		ratio = &Result{Name: "barrier-speedup", KeyLabel: "Ranks", Ranks: lat.Ranks, Transport: lat.Transport,
			Title: fmt.Sprintf("# goarmci barrier simulation: speed-up over the point-to-point barrier (%s latency / latency)",
				barrierAlgLabel(o.Algs[base])),
			Header: lat.Header}
	}
	for i, a := range o.Algs {
		lat.Columns = append(lat.Columns, barrierAlgLabel(a)+" (us)")
		if ratio != nil && i != base {
			ratio.Columns = append(ratio.Columns, barrierAlgLabel(a))
		}
	}
	for _, n := range o.Ranks {
		start := time.Now()
		var us []float64
		var err error
		bubble(func() { us, err = barrierJob(ctx, o, n) })
		if err != nil {
			return nil, fmt.Errorf("bench: barrier simulation, %d ranks: %w", n, err)
		}
		lat.Rows = append(lat.Rows, Row{Size: n, Values: us})
		if ratio != nil {
			row := Row{Size: n}
			for i := range o.Algs {
				if i != base {
					row.Values = append(row.Values, us[base]/us[i])
				}
			}
			ratio.Rows = append(ratio.Rows, row)
		}
		if o.Progress != nil {
			o.Progress(n, time.Since(start))
		}
	}
	if ratio == nil {
		return []*Result{lat}, nil
	}
	return []*Result{lat, ratio}, nil
}

// iterHeader describes the iterations of BarrierSim.
func iterHeader(iters, warmup int) string {
	if iters == 0 && warmup == 0 {
		return fmt.Sprintf("10 timed barriers after 2 (3 after 1 above %d ranks), the slowest rank's mean; %v of quiet between algorithms", bigJob, settle)
	}
	return fmt.Sprintf("%d timed barriers after %d, the slowest rank's mean; %v of quiet between algorithms", cmp.Or(iters, 10), cmp.Or(warmup, 2), settle)
}

// settle is the virtual time the ranks of BarrierSim leave the network alone between two
// algorithms.
const settle = 50 * time.Millisecond

// barrierJob runs one job of n ranks (call it inside a bubble): the latency of every algorithm
// in µs.
func barrierJob(ctx context.Context, o BarrierSimOptions, n int) ([]float64, error) {
	if n > bigJob {
		o.Iters, o.Warmup = cmp.Or(o.Iters, 3), cmp.Or(o.Warmup, 1)
	}
	o.Iters, o.Warmup = cmp.Or(o.Iters, 10), cmp.Or(o.Warmup, 2)
	var mu sync.Mutex
	worst := make([]time.Duration, len(o.Algs))
	m := o.Model.forJob(n)
	job := rmatest.FabricJob{Fabric: m.fabricConfig(n), Configure: m.configure}
	err := rmatest.StartFabricJob(ctx, n, job, func(ctx context.Context, rt *rma.Runtime) error {
		for i, a := range o.Algs {
			for range o.Warmup {
				if err := rt.BarrierWith(ctx, a); err != nil {
					return err
				}
			}
			t0 := time.Now()
			for range o.Iters {
				if err := rt.BarrierWith(ctx, a); err != nil {
					return err
				}
			}
			d := time.Since(t0) / time.Duration(o.Iters)
			mu.Lock()
			worst[i] = max(worst[i], d)
			mu.Unlock()
			// the next algorithm starts together, on a quiet network: the datagrams and reads
			// still in flight from this one (resends, NAKs) have drained
			time.Sleep(settle)
			if err := rt.BarrierWith(ctx, rma.BarrierDissemination); err != nil {
				return err
			}
		}
		return nil
	})
	us := make([]float64, len(worst))
	for i, d := range worst {
		us[i] = float64(d) / float64(time.Microsecond)
	}
	return us, err
}
