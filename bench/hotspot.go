package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// Hot-spot experiments on the simulated fat tree ([Vishnu07 ch. 3, 7, 8]): jobs of N ranks, one
// per node of an ibv/fabric two-level fat tree (FatTree: HostsPerLeaf hosts per leaf, Spines
// spines, destination-mod-k routing of the destination LID and its path bits), each rank's
// channels with P paths per rail (rma.Config.Paths) and a striping policy, measured on the fabric
// clock: call HotspotSim with a bubble of testing/synctest, where time.Now is virtual time, so
// the figures are the model's and not the machine's.
//
// Patterns:
//   - DRC, displaced ring communication [Vishnu07 ch. 3, §7.3]: rank i puts to rank (i+d) mod N
//     (d = Displacement, default one leaf of hosts, so every pair crosses the spines) windows of
//     Window non-blocking puts of Size bytes, Iters windows after one untimed window; the
//     figure is the average over the pairs of each pair's bandwidth (bytes / its own time), in
//     MB/s (10^6 B/s). A hot spot arises where the routes of several pairs share a leaf→spine
//     link: with one path a pair cannot leave it, with several the policy can.
//   - Alltoall: every rank puts a block of Size bytes to every other rank (destinations in
//     shifted order, all posted at once, then completed and fenced); the figure is the time of
//     the slowest rank from the barrier that starts an exchange to its completion, averaged over
//     Iters exchanges after one untimed one, in µs.
//
// Placement: "seq" puts rank i on node i (leaves filled in order); "random" on a random
// permutation of the nodes (Shuffle is the PRNG seed). With destination-mod-k routing the pairs of
// a DRC leave a leaf through distinct spines when placed in order, so hot spots come from a
// random placement (as from a subnet manager's LID order) or from HotFactor, which divides the
// rate of one leaf→spine link — the one rank 0's path-0 route uses — from the start.

// Hot-spot simulation patterns and placements.
const (
	SimDRC      = "drc"
	SimAlltoall = "alltoall"
	PlaceSeq    = "seq"
	PlaceRandom = "random"
)

// SimRun is one configuration of a channel: paths per rail and a striping policy spec
// (multirail/sched: "binding", "even", "adaptive", "bss:2", "auto", ...).
type SimRun struct {
	Paths  int
	Policy string
}

// Name is the run's column name: "1 path" for a single path, else "policy P paths".
func (r SimRun) Name() string {
	if r.Paths == 1 {
		return "1 path"
	}
	return fmt.Sprintf("%s %d paths", r.Policy, r.Paths)
}

// DefaultSimRuns are the configurations of [Vishnu07 ch. 7–8]'s figures: the single-path
// original, even striping over 4 paths, adaptive striping (HSAM) over 2, 4 and 8 paths, BSS
// (n_paths, n_batch) = (4,2), (8,2), (12,3), and load-balanced fragmentation (the default before
// these measurements, [Vishnu07 ch. 5]) over 4 paths.
var DefaultSimRuns = []SimRun{{1, "binding"}, {4, "even"}, {2, "hsam"}, {4, "hsam"}, {8, "hsam"},
	{4, "bss:2"}, {8, "bss:2"}, {12, "bss:3"}, {4, "fragment"}}

// ParseSimRuns parses a comma list of runs "P/policy" (e.g. "1/binding,4/hsam,12/bss:3").
// Errors wrap ErrOptions.
func ParseSimRuns(s string) ([]SimRun, error) {
	var out []SimRun
	for item := range strings.SplitSeq(s, ",") {
		p, pol, ok := strings.Cut(strings.TrimSpace(item), "/")
		n, err := strconv.Atoi(p)
		if !ok || err != nil || n < 1 || n > 64 || pol == "" {
			return nil, fmt.Errorf("%w: run %q (want PATHS/POLICY, e.g. 4/hsam)", ErrOptions, item)
		}
		out = append(out, SimRun{Paths: n, Policy: pol})
	}
	return out, nil
}

// SimOptions configures HotspotSim. Zero values take the defaults named.
type SimOptions struct {
	// Ranks are the job sizes, one row each (default 24, 32, 48, 64).
	Ranks []int
	// Runs are the configurations, one column each (default DefaultSimRuns).
	Runs []SimRun
	// Pattern is SimDRC (default) or SimAlltoall; Placement PlaceSeq (default) or PlaceRandom.
	Pattern, Placement string
	// Size is the bytes of one put (default DRC 256 KiB, Alltoall 64 KiB).
	Size int
	// Iters: DRC windows, Alltoall exchanges timed (default DRC 8, Alltoall 4).
	Iters int
	// Window is the DRC's non-blocking puts per completion (default 8).
	Window int
	// Displacement is the DRC's d (default HostsPerLeaf).
	Displacement int
	// HostsPerLeaf and Spines shape the tree (default 12 and 12: a 24-port leaf switch with 12
	// hosts and 12 uplinks, full bisection, as the 144-port switch of [Vishnu07 §7.3]); the tree
	// has ⌈max(Ranks)/HostsPerLeaf⌉ leaves.
	HostsPerLeaf, Spines int
	// LinkRate is every link's capacity in bytes/s (default 1 GB/s, an SDR 4x link's data
	// rate); Latency every link's latency (default 200 ns).
	LinkRate int64
	Latency  time.Duration
	// HotFactor > 1 divides the rate of one leaf→spine link by it (see the package comment).
	HotFactor float64
	// Shuffle is the PRNG seed of the random placement.
	Shuffle uint64
	// Progress, when set, is called after every run with its row, column and wall time.
	Progress func(ranks int, run SimRun, wall time.Duration)
}

func (o SimOptions) check() (SimOptions, error) {
	if len(o.Ranks) == 0 {
		o.Ranks = []int{24, 32, 48, 64}
	}
	if len(o.Runs) == 0 {
		o.Runs = DefaultSimRuns
	}
	if o.Pattern == "" {
		o.Pattern = SimDRC
	}
	if o.Placement == "" {
		o.Placement = PlaceSeq
	}
	if o.Size == 0 {
		o.Size = map[string]int{SimDRC: 256 << 10, SimAlltoall: 64 << 10}[o.Pattern]
	}
	if o.Iters == 0 {
		o.Iters = map[string]int{SimDRC: 8, SimAlltoall: 4}[o.Pattern]
	}
	if o.Window == 0 {
		o.Window = 8
	}
	if o.HostsPerLeaf == 0 {
		o.HostsPerLeaf = 12
	}
	if o.Spines == 0 {
		o.Spines = 12
	}
	if o.Displacement == 0 {
		o.Displacement = o.HostsPerLeaf
	}
	if o.LinkRate == 0 {
		o.LinkRate = 1e9
	}
	if o.Latency == 0 {
		o.Latency = 200 * time.Nanosecond
	}
	bad := func(what string, v any) (SimOptions, error) {
		return o, fmt.Errorf("%w: hotspot simulation: %s %v", ErrOptions, what, v)
	}
	switch {
	case o.Pattern != SimDRC && o.Pattern != SimAlltoall:
		return bad("pattern", o.Pattern)
	case o.Placement != PlaceSeq && o.Placement != PlaceRandom:
		return bad("placement", o.Placement)
	case o.Size < 1 || o.Size > 16<<20:
		return bad("size (bytes, 1..16 MiB)", o.Size)
	case o.Iters < 1 || o.Window < 1 || o.HostsPerLeaf < 1 || o.Spines < 1 || o.LinkRate < 1 || o.Latency < 0:
		return bad("iterations/window/tree", fmt.Sprint(o.Iters, o.Window, o.HostsPerLeaf, o.Spines, o.LinkRate, o.Latency))
	case o.HotFactor != 0 && o.HotFactor <= 1:
		return bad("hot factor (want > 1)", o.HotFactor)
	}
	for _, n := range o.Ranks {
		if n < 2 || n > 1024 {
			return bad("ranks (2..1024)", n)
		}
		if o.Pattern == SimDRC && o.Displacement%n == 0 {
			return bad("displacement (a multiple of the ranks: every rank puts to itself)", o.Displacement)
		}
	}
	for _, r := range o.Runs {
		if r.Paths < 1 || r.Paths > 64 {
			return bad("paths", r.Paths)
		}
	}
	return o, nil
}

// simStats is one run's outcome.
type simStats struct {
	bw       float64       // DRC: average per-pair bandwidth, MB/s
	lat      time.Duration // Alltoall: average exchange time
	hotBytes uint64        // bytes over the hot (or watched) leaf→spine link
	maxUp    uint64        // the most bytes any leaf→spine link carried
}

// HotspotSim runs every configuration of o.Runs at every job size of o.Ranks and returns the
// table: rows by ranks, one column per run, values in MB/s (DRC, per-pair average) or µs
// (Alltoall latency). bubble must run its function inside a testing/synctest bubble
// (synctest.Test) and return when it returns: each run creates its fabric and ranks inside one
// and closes them before it ends, so its times are virtual; outside a bubble they would be the
// machine's. ctx must not come from outside the bubble (a signal context's goroutine would wait
// on the bubble's channels): a command passes context.Background(). Errors wrap ErrOptions, and
// rma's or the fabric's errors.
func HotspotSim(ctx context.Context, o SimOptions, bubble func(func())) (*Result, error) {
	o, err := o.check()
	if err != nil {
		return nil, err
	}
	res := &Result{Name: ScenarioHotspot, KeyLabel: "Ranks", Ranks: slices.Max(o.Ranks), Transport: "fabric (simulated)"}
	for _, r := range o.Runs {
		res.Columns = append(res.Columns, r.Name())
	}
	unit := "average per-pair bandwidth, MB/s"
	if o.Pattern == SimAlltoall {
		unit = "latency of one exchange, us"
	}
	res.Title = fmt.Sprintf("# goarmci hot-spot simulation: %s, %s placement (%s)", strings.ToUpper(o.Pattern), o.Placement, unit)
	res.Header = []string{
		fmt.Sprintf("Fat tree: %d hosts and %d spines per leaf, links %g GB/s, %v; D-mod-k routing by destination LID + path bits",
			o.HostsPerLeaf, o.Spines, float64(o.LinkRate)/1e9, o.Latency),
		fmt.Sprintf("Puts of %d bytes, %d timed iterations, virtual time", o.Size, o.Iters),
	}
	if o.Pattern == SimDRC {
		res.Header = append(res.Header, fmt.Sprintf("DRC: rank i puts to rank (i+%d) mod N, windows of %d ARMCI_NbPut + ARMCI_Fence", o.Displacement, o.Window))
	}
	if o.HotFactor > 0 {
		res.Header = append(res.Header, fmt.Sprintf("Hot spot: the leaf→spine link of rank 0's path-0 route at 1/%g of its rate", o.HotFactor))
	}
	for _, n := range o.Ranks {
		row := Row{Size: n}
		for _, run := range o.Runs {
			start := time.Now()
			var st simStats
			var rerr error
			bubble(func() { st, rerr = simulate(ctx, o, n, run) })
			if rerr != nil {
				return nil, fmt.Errorf("bench: hotspot simulation, %d ranks, %s: %w", n, run.Name(), rerr)
			}
			v := st.bw
			if o.Pattern == SimAlltoall {
				v = float64(st.lat) / float64(time.Microsecond)
			}
			row.Values = append(row.Values, v)
			if o.Progress != nil {
				o.Progress(n, run, time.Since(start))
			}
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// placement returns the node of every rank.
func placement(o SimOptions, n int) []int {
	nodes := make([]int, n)
	for i := range nodes {
		nodes[i] = i
	}
	if o.Placement == PlaceRandom {
		r := rand.New(rand.NewPCG(o.Shuffle, uint64(n)))
		r.Shuffle(n, func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	}
	return nodes
}

// simulate runs one job (call it inside a bubble).
func simulate(ctx context.Context, o SimOptions, n int, run SimRun) (simStats, error) {
	leaves := (n + o.HostsPerLeaf - 1) / o.HostsPerLeaf
	tree := &fabric.FatTree{Leaves: leaves, Spines: o.Spines, HostsPerLeaf: o.HostsPerLeaf,
		LinkRate: o.LinkRate, LinkLatency: o.Latency}
	lmc := uint8(0)
	for 1<<lmc < run.Paths {
		lmc++
	}
	nodes := placement(o, n)
	// The hot link, or the one watched: rank 0's path-0 route up from its leaf.
	src, dst := nodes[0], nodes[o.Displacement%n]
	if o.Pattern == SimAlltoall {
		dst = nodes[1]
	}
	hot := fabric.Hop{Rail: 1, From: fabric.Leaf(tree.LeafOf(src)), To: fabric.Spine(tree.SpineOf(src, dst, 0))}
	var fab *fabric.Fabric
	var hotErr error
	// ACK timeout floor far above the queueing of an all-to-all (the engine's 10 ms would
	// retransmit spuriously, [FatTree]'s queues are unbounded); a window of 64 packets per QP.
	fc := fabric.Config{LMC: lmc, Topology: tree, TimeoutFloor: 500 * time.Millisecond, Window: 64}
	var mu sync.Mutex
	var bws []float64
	var lats []time.Duration
	job := rmatest.FabricJob{
		Fabric: fc,
		Node:   func(i int) int { return nodes[i] },
		Configure: func(_ int, c *rma.Config) {
			c.Paths, c.StripePolicy = run.Paths, run.Policy
		},
		OnFabric: func(f *fabric.Fabric) {
			fab = f
			if o.HotFactor > 1 {
				hotErr = f.SetHopRate(hot, int64(float64(o.LinkRate)/o.HotFactor))
			}
		},
	}
	err := rmatest.StartFabricJob(ctx, n, job, func(ctx context.Context, rt *rma.Runtime) error {
		if hotErr != nil {
			return hotErr
		}
		switch o.Pattern {
		case SimDRC:
			bw, err := drc(ctx, rt, o)
			mu.Lock()
			bws = append(bws, bw)
			mu.Unlock()
			return err
		default:
			l, err := alltoall(ctx, rt, o)
			mu.Lock()
			if len(lats) < len(l) {
				lats = append(lats, make([]time.Duration, len(l)-len(lats))...)
			}
			for i, d := range l {
				lats[i] = max(lats[i], d)
			}
			mu.Unlock()
			return err
		}
	})
	if err != nil {
		return simStats{}, err
	}
	var st simStats
	for _, b := range bws {
		st.bw += b / float64(len(bws))
	}
	for _, d := range lats {
		st.lat += d / time.Duration(len(lats))
	}
	// The fabric is closed; its hop counters stay readable.
	for _, h := range fab.Hops() {
		if h.From.Kind != fabric.KindLeaf || h.To.Kind != fabric.KindSpine {
			continue
		}
		hs, err := fab.HopStats(h)
		if err != nil {
			return st, err
		}
		st.maxUp = max(st.maxUp, hs.Bytes)
		if h == hot {
			st.hotBytes = hs.Bytes
		}
	}
	return st, nil
}

// drc is one rank's part of the displaced ring in the simulation: its pair's bandwidth in MB/s.
func drc(ctx context.Context, rt *rma.Runtime, o SimOptions) (float64, error) {
	r, err := RunDRC(ctx, rt, DRCOptions{Size: o.Size, Window: o.Window, Iters: o.Iters, Displacement: o.Displacement})
	return r.PairMBs, err
}

// ErrDRCData: the data a rank received in a DRC differ from what its ring predecessor put.
var ErrDRCData = errors.New("bench: DRC data differ from the predecessor's")

// DRCOptions configures RunDRC: the displaced ring communication of [Vishnu07 ch. 3, §7.3] as
// one rank of a real job runs it. Zero values take the defaults named.
type DRCOptions struct {
	// Size is the bytes of one put (default 256 KiB), Window the non-blocking puts per
	// completion (default 8), Iters the timed windows after one untimed (default 8).
	Size, Window, Iters int
	// Displacement is d: rank i puts to rank (i+d) mod N (default 1; a multiple of N is refused).
	Displacement int
}

// DRCResult is one rank's outcome of RunDRC.
type DRCResult struct {
	To, From int     // the rank this one puts to, the one that puts to it
	PairMBs  float64 // this rank's pair: bytes / its own time, MB/s (10^6 B/s)
	AvgMBs   float64 // the average of PairMBs over the pairs (the same on every rank)
	MinMBs   float64 // the slowest pair's
	Sum      uint32  // CRC-32 (IEEE) of the Window·Size bytes received (all from From)
}

// drcByte is byte i of put slot k from rank from: what the ring predecessor writes and the
// target checks.
func drcByte(from, k, i int) byte { return byte(from*131 + k*29 + i + i>>8) }

// DRCSum is the CRC-32 a rank receives in a DRC of o from rank from: Window slots of Size bytes,
// slot k holding drcByte(from, k, ·).
func DRCSum(o DRCOptions, from int) uint32 {
	o = o.defaults()
	h := crc32.NewIEEE()
	buf := make([]byte, o.Size)
	for k := range o.Window {
		for i := range buf {
			buf[i] = drcByte(from, k, i)
		}
		_, _ = h.Write(buf)
	}
	return h.Sum32()
}

func (o DRCOptions) defaults() DRCOptions {
	if o.Size == 0 {
		o.Size = 256 << 10
	}
	if o.Window == 0 {
		o.Window = 8
	}
	if o.Iters == 0 {
		o.Iters = 8
	}
	if o.Displacement == 0 {
		o.Displacement = 1
	}
	return o
}

// RunDRC is one rank's part of the displaced ring communication [Vishnu07 ch. 3, §7.3], the
// same driver on the simulated fabric (HotspotSim) and in a real job (`goarmci bench hotspot
// -testbed`): rank i puts windows of Window non-blocking puts of Size bytes to rank (i+d) mod N,
// each window completed (Handle.Wait) and fenced, Iters timed windows after one untimed (the
// adaptive policies' first weights), between barriers. Every rank must call it (it is
// collective: Malloc, Barrier, AllReduce). After the last barrier each rank checks the bytes its
// predecessor put against DRCSum (ErrDRCData) and the pairs' bandwidths are reduced, so every
// rank returns the average and the minimum. Errors wrap ErrOptions, ErrDRCData, and rma's.
func RunDRC(ctx context.Context, rt *rma.Runtime, o DRCOptions) (DRCResult, error) {
	o = o.defaults()
	n, me := rt.Size(), rt.Rank()
	if o.Size < 1 || o.Size > 16<<20 || o.Window < 1 || o.Iters < 1 || o.Displacement < 1 || o.Displacement%n == 0 {
		return DRCResult{}, fmt.Errorf("%w: DRC size %d, window %d, iterations %d, displacement %d of %d ranks",
			ErrOptions, o.Size, o.Window, o.Iters, o.Displacement, n)
	}
	res := DRCResult{To: (me + o.Displacement) % n, From: ((me-o.Displacement)%n + n) % n}
	seg, err := rt.Malloc(ctx, o.Window*o.Size)
	if err != nil {
		return res, err
	}
	bufs := make([][]byte, o.Window)
	for k := range bufs {
		bufs[k] = make([]byte, o.Size)
		for i := range bufs[k] {
			bufs[k][i] = drcByte(me, k, i)
		}
	}
	hs := make([]*rma.Handle, o.Window)
	window := func() error {
		for k := range hs {
			if hs[k], err = rt.NbPut(ctx, bufs[k], seg, res.To, k*o.Size); err != nil {
				return err
			}
		}
		for _, h := range hs {
			if err := h.Wait(ctx); err != nil {
				return err
			}
		}
		return rt.Fence(ctx, res.To)
	}
	if err := window(); err != nil { // warm-up: the adaptive weights
		return res, err
	}
	if err := rt.Barrier(ctx); err != nil {
		return res, err
	}
	t0 := time.Now()
	for range o.Iters {
		if err := window(); err != nil {
			return res, err
		}
	}
	took := time.Since(t0)
	if err := rt.Barrier(ctx); err != nil { // every window fenced: the data are in place
		return res, err
	}
	res.PairMBs = float64(o.Size*o.Window*o.Iters) / took.Seconds() / 1e6
	res.Sum = crc32.ChecksumIEEE(seg.Local()[:o.Window*o.Size])
	sum, low := make([]byte, 8), make([]byte, 8)
	binary.LittleEndian.PutUint64(sum, math.Float64bits(res.PairMBs))
	copy(low, sum)
	if err := rt.AllReduce(ctx, rma.AccFloat64, rma.ReduceSum, sum); err != nil {
		return res, err
	}
	if err := rt.AllReduce(ctx, rma.AccFloat64, rma.ReduceMin, low); err != nil {
		return res, err
	}
	res.AvgMBs = math.Float64frombits(binary.LittleEndian.Uint64(sum)) / float64(n)
	res.MinMBs = math.Float64frombits(binary.LittleEndian.Uint64(low))
	if err := seg.Free(ctx); err != nil {
		return res, err
	}
	if want := DRCSum(o, res.From); res.Sum != want {
		return res, fmt.Errorf("%w: rank %d from rank %d: crc32 %08x, want %08x", ErrDRCData, me, res.From, res.Sum, want)
	}
	return res, nil
}

// alltoall is one rank's part of the exchanges: the time of each timed exchange.
func alltoall(ctx context.Context, rt *rma.Runtime, o SimOptions) ([]time.Duration, error) {
	n, me := rt.Size(), rt.Rank()
	// Every origin writes the same slot of its target: the data are not checked, and n·Size
	// bytes per rank would not fit at 1024 ranks.
	seg, err := rt.Malloc(ctx, o.Size)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, o.Size)
	hs := make([]*rma.Handle, 0, n-1)
	var out []time.Duration
	for it := 0; it <= o.Iters; it++ {
		if err := rt.Barrier(ctx); err != nil {
			return nil, err
		}
		t0 := time.Now()
		hs = hs[:0]
		for k := 1; k < n; k++ {
			h, err := rt.NbPut(ctx, buf, seg, (me+k)%n, 0)
			if err != nil {
				return nil, err
			}
			hs = append(hs, h)
		}
		for _, h := range hs {
			if err := h.Wait(ctx); err != nil {
				return nil, err
			}
		}
		if err := rt.AllFence(ctx); err != nil {
			return nil, err
		}
		if it > 0 { // the first exchange is the warm-up
			out = append(out, time.Since(t0))
		}
	}
	if err := rt.Barrier(ctx); err != nil {
		return nil, err
	}
	return out, seg.Free(ctx)
}
