package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/ibv/provider/tcp"
	"github.com/goarmci/goarmci/multirail"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
	"github.com/goarmci/goarmci/rma/transport"
)

// Memory per rank against the job size, for the three ways of reaching network peers that
// GOARMCI_NET_TRANSPORT names: RC-only (one connection per peer), DC-only (one shared DC queue
// pair, a peer record per peer) and adaptive (the DC queue pair for every peer and at most h RC
// connections) — [Sridhar08] (memory per connection, UD as the scalable transport, MVAPICH-Aptus'
// bounded number of RC channels), [Takagi15 §3.2] (h). The job is built with the public verbs,
// connection and channel APIs on the in-process fabric, one node per rank, and every rank
// communicates with every other rank once (all-to-all: the worst case for RC); each rank's
// bytes are then read from its objects' own accounting (ibv.QP.MemoryFootprint, ibv.CQ,
// hybridft.Conn), and the Go heap the job added is read from the runtime. Smaller jobs also
// run as rma jobs under each GOARMCI_NET_TRANSPORT, every rank reading its Runtime.Memory.

// ScaleMemory is the name of the memory simulation (goarmci bench memory -sim).
const ScaleMemory = "memory"

// memoryKinds are MemorySim's configurations (as GOARMCI_NET_TRANSPORT names them) in the
// order of the table's columns.
var memoryKinds = []string{rma.NetRC, rma.NetDC, rma.NetAdaptive}

// Bounds of MemoryOptions.
const (
	maxMemoryRanks      = 1 << 16 // extrapolated rows
	maxMemoryFullRanks  = 1024    // jobs built whole (an RC job holds N(N-1) queue pairs)
	defaultFullRanks    = 256
	defaultRuntimeRanks = 64
	maxRuntimeRanks     = 256
)

// MemoryOptions configures MemorySim.
type MemoryOptions struct {
	// Ranks are the job sizes, one row each (default 64, 256, 1024).
	Ranks []int
	// MaxRC is h, the RC connections of a rank in the adaptive configuration (0: the default of
	// rma/transport, GOARMCI_MAX_RC's; at most Ranks−1 are used).
	MaxRC int
	// FullRanks is the largest job built whole (default 256, at most 1024); the rows of larger
	// jobs are extrapolated from the largest job built, per peer (see MemorySim).
	FullRanks int
	// RuntimeRanks is the largest job of Ranks also run as an rma job, every rank's
	// Runtime.Memory read after the all-to-all (default 64, at most 256; negative: none).
	RuntimeRanks int
	// Progress, when set, is called after every job size with its wall time.
	Progress func(ranks int, wall time.Duration)
}

// memorySample is what one job of one configuration measured.
type memorySample struct {
	median, max float64 // accounted bytes per rank, over the ranks
	heap        float64 // Go heap the job's communication objects added, per rank
	perPeer     float64 // accounted bytes one peer adds to a rank (median over ranks)
	heapPerPeer float64 // Go heap one peer adds to a rank
	rcConns     int     // RC connections of a rank (the largest number)
	newRecord   int64   // the bytes a new DC peer record costs by the engine's account (ibv.QP.DCPeerBytes)
	dcPeers     int     // peer records of a rank's DC queue pair (the smallest number)
}

// MemorySim measures a rank's communication memory in jobs of o.Ranks ranks where every rank
// has written 8 bytes to every other rank once, for three configurations:
//
//   - RC-only: one RC connection per peer (a hybridft connection — queue pair with its engine
//     state and work-queue entries, connection record — and the multirail channel's record),
//     the device's completion queue;
//   - DC-only: one DC queue pair (ibv.DC) with a peer record per peer created at first contact,
//     and per peer a view of it (hybridft.NewDCConn: a connection record and an address handle)
//     and the channel over the view, as rma's GOARMCI_NET_TRANSPORT=dc builds them; the
//     device's completion queue;
//   - adaptive: the DC queue pair with a record per peer and h RC connections (to the ranks at
//     distance 1..h/2 on either side, and the opposite rank when h is odd, so every rank holds
//     h; h−1 when h and the job size are both odd).
//
// Jobs of up to o.FullRanks ranks are built whole (one fabric node per rank); a row of a larger
// job is extrapolated from the largest job built: its value there plus, per further peer, the
// bytes a peer added per rank there (an RC connection for RC-only, a DC peer for the others).
// Jobs of up to o.RuntimeRanks ranks also run as rma jobs (rmatest.StartFabricJob, inside
// bubble: testing/synctest, the adaptive selection's window on virtual time) under
// GOARMCI_NET_TRANSPORT=rc, dc and adaptive (GOARMCI_MAX_RC=h, all-to-all rounds of puts until
// peers are promoted), and every rank reads its Runtime.Memory.
// Results: the table per job size (median and max over the ranks of the accounted bytes, the Go
// heap per rank, whether measured), the per-peer costs of the jobs built and, when an rma job
// ran, the rma jobs' table (median and max per rank, per peer, the RC connections adaptive
// holds). Errors wrap ErrOptions, the fabric's, the verbs' and rma's, and name the rank whose
// check failed (every write landed; every DC queue pair holds a record per peer).
func MemorySim(ctx context.Context, o MemoryOptions, bubble func(func())) ([]*Result, error) {
	if len(o.Ranks) == 0 {
		o.Ranks = []int{64, 256, 1024}
	}
	if o.MaxRC == 0 {
		o.MaxRC = transport.DefaultConfig().MaxRC
	}
	if o.FullRanks == 0 {
		o.FullRanks = defaultFullRanks
	}
	if o.RuntimeRanks == 0 {
		o.RuntimeRanks = defaultRuntimeRanks
	}
	if o.RuntimeRanks > maxRuntimeRanks {
		return nil, fmt.Errorf("%w: memory simulation: rma jobs up to %d ranks (at most %d)", ErrOptions, o.RuntimeRanks, maxRuntimeRanks)
	}
	if o.MaxRC < 0 || o.MaxRC > transport.MaxRCLimit {
		return nil, fmt.Errorf("%w: memory simulation: maxrc %d (0..%d, 0: the default)", ErrOptions, o.MaxRC, transport.MaxRCLimit)
	}
	if o.FullRanks < 2 || o.FullRanks > maxMemoryFullRanks {
		return nil, fmt.Errorf("%w: memory simulation: full jobs up to %d ranks (2..%d)", ErrOptions, o.FullRanks, maxMemoryFullRanks)
	}
	ranks := slices.Clone(o.Ranks)
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	for _, n := range ranks {
		if n < 2 || n > maxMemoryRanks {
			return nil, fmt.Errorf("%w: memory simulation: ranks %d (2..%d)", ErrOptions, n, maxMemoryRanks)
		}
	}
	if ranks[0] > o.FullRanks {
		return nil, fmt.Errorf("%w: memory simulation: no job of at most %d ranks to measure (ranks %v)", ErrOptions, o.FullRanks, ranks)
	}
	table := &Result{Name: ScaleMemory, KeyLabel: "Ranks", Ranks: ranks[len(ranks)-1], Transport: "fabric (in-process)",
		Title: "# goarmci communication memory per rank: RC-only, shared datagram (DC), adaptive ([Sridhar08], [Takagi15 §3.2])",
		Header: []string{
			fmt.Sprintf("Every rank wrote 8 bytes to every other rank once (all-to-all); adaptive: DC to all and h = %d RC connections per rank", o.MaxRC),
			"median/max: bytes over the ranks from the objects' accounting (queue pairs with engine state and work-queue entries, connection and channel records, DC peer records, address handles, CQs)",
			"heap: the Go heap the job's communication objects added, per rank (runtime.ReadMemStats after collections; the fabric's devices opened before)",
			fmt.Sprintf("measured 1: the job was built whole; 0: extrapolated from the largest job built (%d ranks or fewer) per peer (RC connection or DC peer)", o.FullRanks)},
		Columns: []string{"RC median (KiB)", "RC max (KiB)", "DC median (KiB)", "DC max (KiB)",
			"adaptive median (KiB)", "adaptive max (KiB)", "RC heap (KiB)", "DC heap (KiB)", "adaptive heap (KiB)", "measured"}}
	costs := &Result{Name: ScaleMemory + "-per-peer", KeyLabel: "Ranks", Ranks: table.Ranks, Transport: table.Transport,
		Title: "# goarmci memory a peer adds to a rank, per job built ([Sridhar08]: memory per connection)",
		Header: []string{"RC connection: queue pair, engine state, connection and channel records; DC peer: the DC queue pair's peer record, the view (connection record, address handle) and the channel record",
			"new DC record: what the engine accounts for a new peer record (ibv.QP.DCPeerBytes: record, table entry, first work-queue entries)",
			fmt.Sprintf("Not here: over the tcp provider a rank also holds a stream per peer node and path, %d B each (tcp.StreamBytes), for RC and DC alike (the streams carry both)",
				tcp.StreamBytes())},
		Columns: []string{"RC connection (B)", "RC connection heap (B)", "DC peer (B)", "DC peer heap (B)",
			"new DC record (B)", "adaptive RC connections", "DC records per rank"}}
	rmaTable := &Result{Name: ScaleMemory + "-rma", KeyLabel: "Ranks", Transport: table.Transport,
		Title: "# goarmci communication memory per rank of an rma job (Runtime.Memory) after an all-to-all of 8-byte puts (GOARMCI_NET_TRANSPORT)",
		Header: []string{"The objects' accounting without the registered segments (the job's data): connections by kind, CQs, the connection manager",
			"per peer: the bytes of the per-peer objects (MemoryStats.Peers) over N-1; the channel records are not counted by rma",
			fmt.Sprintf("rc, dc: one put to every peer; adaptive (GOARMCI_MAX_RC=%d, GOARMCI_RC_WINDOW=%s, no idle eviction): all-to-all rounds every %v for %v of virtual time",
				o.MaxRC, adaptiveWindow, adaptiveRound, adaptivePhase)}}
	for _, t := range memoryKinds {
		rmaTable.Columns = append(rmaTable.Columns, t+" median (KiB)", t+" max (KiB)", t+" per peer (B)")
	}
	rmaTable.Columns = append(rmaTable.Columns, "adaptive RC open median", "adaptive RC open max")
	var last map[string]memorySample
	lastN := 0
	for _, n := range ranks {
		start := time.Now()
		row := Row{Size: n}
		if n <= o.FullRanks {
			last = map[string]memorySample{}
			for _, kind := range memoryKinds {
				s, err := memoryJob(ctx, kind, n, min(o.MaxRC, n-1))
				if err != nil {
					return nil, fmt.Errorf("bench: memory simulation, %s, %d ranks: %w", kind, n, err)
				}
				last[kind] = s
			}
			lastN = n
			rc, dc, ad := last[rma.NetRC], last[rma.NetDC], last[rma.NetAdaptive]
			row.Values = []float64{rc.median, rc.max, dc.median, dc.max, ad.median, ad.max, rc.heap, dc.heap, ad.heap, 1}
			costs.Rows = append(costs.Rows, Row{Size: n, Values: []float64{rc.perPeer, rc.heapPerPeer,
				dc.perPeer, dc.heapPerPeer, float64(dc.newRecord), float64(ad.rcConns), float64(dc.dcPeers)}})
		} else {
			more := float64(n - lastN)
			rc, dc, ad := last[rma.NetRC], last[rma.NetDC], last[rma.NetAdaptive]
			row.Values = []float64{rc.median + more*rc.perPeer, rc.max + more*rc.perPeer,
				dc.median + more*dc.perPeer, dc.max + more*dc.perPeer,
				ad.median + more*dc.perPeer, ad.max + more*dc.perPeer,
				rc.heap + more*rc.heapPerPeer, dc.heap + more*dc.heapPerPeer, ad.heap + more*dc.heapPerPeer, 0}
		}
		for i := range row.Values[:len(row.Values)-1] { // bytes to KiB, but the measured flag
			row.Values[i] /= 1024
		}
		table.Rows = append(table.Rows, row)
		if n <= o.RuntimeRanks {
			rrow := Row{Size: n}
			var rs runtimeSample
			for _, t := range memoryKinds {
				var err error
				bubble(func() { rs, err = runtimeMemoryJob(ctx, t, n, min(o.MaxRC, n-1)) })
				if err != nil {
					return nil, fmt.Errorf("bench: memory simulation, rma job, %s, %d ranks: %w", t, n, err)
				}
				rrow.Values = append(rrow.Values, rs.median/1024, rs.max/1024, rs.perPeer)
				rmaTable.Header = append(rmaTable.Header, fmt.Sprintf("%d ranks, %s, rank 0: %s", n, t, rs.kinds))
			}
			rrow.Values = append(rrow.Values, rs.openMedian, rs.openMax) // the adaptive job's
			rmaTable.Rows = append(rmaTable.Rows, rrow)
			rmaTable.Ranks = n
		}
		if o.Progress != nil {
			o.Progress(n, time.Since(start))
		}
	}
	out := []*Result{table, costs}
	if len(rmaTable.Rows) > 0 {
		out = append(out, rmaTable)
	}
	return out, nil
}

// memoryRank is one rank's objects in a memory job, built as rma builds them (rma/netpath.go):
// an endpoint (PD, CQ) and its channel network, and per peer a multirail channel over an RC
// connection or over a view of the rank's DC queue pair (hybridft.NewDCConn), or both.
type memoryRank struct {
	dev  *ibv.Context
	ep   *hybridft.Endpoint
	net  *multirail.Network
	buf  []byte  // the window's memory
	win  *ibv.MR // 8 bytes per origin rank
	rc   map[int]memoryPath
	dc   map[int]memoryPath
	dcqp *ibv.QP // nil for RC-only
	info hybridft.ConnInfo
}

// memoryPath is a rank's path to one peer: a connection (RC, or a DC view) and the channel over it.
type memoryPath struct {
	conn *hybridft.Conn
	ch   *multirail.Channel
}

// channelBytes is the record of a channel, which has no accounting of its own.
var channelBytes = ibv.SizeOf[multirail.Channel]()

// footprint is the bytes the rank's communication objects hold now: its CQ, its paths (a DC
// view counts its record, address handle and one peer record of the DC queue pair) with their
// channel records, and the DC queue pair without its peer records.
func (r *memoryRank) footprint() int64 {
	n := r.ep.CQ.MemoryFootprint()
	for _, paths := range []map[int]memoryPath{r.rc, r.dc} {
		for _, p := range paths {
			n += p.conn.MemoryFootprint() + channelBytes
		}
	}
	if r.dcqp != nil {
		n += r.dcqp.MemoryFootprint() - int64(r.dcqp.DCPeers())*r.dcqp.DCPeerBytes()
	}
	return n
}

// memoryCQE is the size of the ranks' completion queues (rma's; their rings grow with the
// completions waiting, so the size bounds them only).
const memoryCQE = 1 << 16

// liveHeap is the Go heap in use after two collections (the first runs the finalizers of what
// earlier work left, the second frees what they released).
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// rcPairs are the pairs of ranks connected by RC in a job of n ranks where each rank holds h
// connections (h ≤ n−1): the circulant graph of distances 1..h/2, and n/2 when h is odd and n
// even (h odd and n odd: h−1 each).
func rcPairs(n, h int) [][2]int {
	var out [][2]int
	for k := 1; k <= h/2; k++ {
		for r := range n {
			out = append(out, [2]int{r, (r + k) % n})
		}
	}
	if h%2 == 1 && n%2 == 0 {
		for r := range n / 2 {
			out = append(out, [2]int{r, r + n/2})
		}
	}
	return out
}

// memoryJob builds one job of n ranks in configuration kind (h RC connections per rank for
// adaptive), runs the all-to-all and measures it.
func memoryJob(ctx context.Context, kind string, n, h int) (s memorySample, err error) {
	f, err := fabric.New(fabric.Config{Name: "mem", Nodes: n})
	if err != nil {
		return s, err
	}
	ranks := make([]*memoryRank, n)
	defer func() {
		for _, r := range ranks {
			if r != nil {
				err = errors.Join(err, r.dev.Close())
			}
		}
		err = errors.Join(err, f.Close())
	}()
	for i := range ranks {
		dev, err := f.Open(i)
		if err != nil {
			return s, err
		}
		// the windows are the job's data, allocated before the heap is read
		ranks[i] = &memoryRank{dev: dev, rc: map[int]memoryPath{}, dc: map[int]memoryPath{}, buf: make([]byte, 8*n)}
	}
	heap0 := liveHeap()
	for _, r := range ranks {
		if err := r.open(kind != rma.NetRC); err != nil {
			return s, err
		}
	}
	base := make([]int64, n)
	for i, r := range ranks {
		base[i] = r.footprint()
	}
	heap1 := liveHeap()
	if kind != rma.NetRC {
		for i, a := range ranks {
			for j, b := range ranks {
				if i != j {
					if err := a.viewDC(j, b.info); err != nil {
						return s, fmt.Errorf("rank %d to rank %d: %w", i, j, err)
					}
				}
			}
		}
	}
	switch kind {
	case rma.NetRC:
		for i := range n {
			for j := i + 1; j < n; j++ {
				if err := connectRanks(ranks, i, j); err != nil {
					return s, err
				}
			}
		}
	case rma.NetAdaptive:
		for _, p := range rcPairs(n, h) {
			if err := connectRanks(ranks, p[0], p[1]); err != nil {
				return s, err
			}
		}
	}
	if err := allToAll(ctx, ranks); err != nil {
		return s, err
	}
	heap2 := liveHeap()
	if err := checkAllToAll(ranks, kind); err != nil {
		return s, err
	}
	bytes, perPeer := make([]float64, n), make([]float64, n)
	s.dcPeers = n
	for i, r := range ranks {
		fp := r.footprint()
		bytes[i] = float64(fp)
		perPeer[i] = float64(fp-base[i]) / float64(n-1)
		s.rcConns = max(s.rcConns, len(r.rc))
		if r.dcqp != nil {
			s.dcPeers = min(s.dcPeers, r.dcqp.DCPeers())
			s.newRecord = r.dcqp.DCPeerBytes()
		} else {
			s.dcPeers = 0
		}
	}
	s.median, s.max, s.perPeer = Median(bytes), slices.Max(bytes), Median(perPeer)
	s.heap = float64(heap2-heap0) / float64(n)
	s.heapPerPeer = float64(heap2-heap1) / float64(n) / float64(n-1)
	return s, nil
}

// open creates the rank's endpoint (PD, CQ), channel network, window and, with dc, its DC queue
// pair in RTS.
func (r *memoryRank) open(dc bool) error {
	var err error
	if r.ep, err = hybridft.NewEndpoint(r.dev, 1, memoryCQE); err != nil {
		return err
	}
	r.net = multirail.NewNetwork(r.ep)
	if r.win, err = r.ep.PD.RegMR(r.buf, ibv.AccessAll); err != nil {
		return err
	}
	if !dc {
		return nil
	}
	if r.dcqp, err = r.ep.NewDCQP(); err != nil {
		return err
	}
	r.info, err = hybridft.DCInfo(r.dcqp, r.ep)
	return err
}

// viewDC opens the rank's path to rank j over its DC queue pair: a view towards j's DC queue pair
// (described by remote) and a channel over it.
func (r *memoryRank) viewDC(j int, remote hybridft.ConnInfo) error {
	c, err := r.ep.NewDCConn(r.dcqp, remote)
	if err != nil {
		return err
	}
	ch, err := r.net.NewChannel(c)
	if err != nil {
		return err
	}
	r.dc[j] = memoryPath{c, ch}
	return nil
}

// connectRanks connects ranks i and j by one RC connection and a channel over it at each end.
func connectRanks(ranks []*memoryRank, i, j int) error {
	a, b := ranks[i], ranks[j]
	ca, err := a.ep.NewConn()
	if err != nil {
		return err
	}
	cb, err := b.ep.NewConn()
	if err != nil {
		return errors.Join(err, ca.Close())
	}
	if err := errors.Join(ca.Connect(cb.Local()), cb.Connect(ca.Local())); err != nil {
		return fmt.Errorf("ranks %d and %d: %w", i, j, errors.Join(err, ca.Close(), cb.Close()))
	}
	cha, err := a.net.NewChannel(ca)
	if err != nil {
		return err
	}
	chb, err := b.net.NewChannel(cb)
	if err != nil {
		return err
	}
	a.rc[j], b.rc[i] = memoryPath{ca, cha}, memoryPath{cb, chb}
	return nil
}

// memoryWait bounds the wait for one write's completion.
const memoryWait = 30 * time.Second

// slotValue is what rank i writes into its slot of the others' windows: 8 bytes, rank + 1 in
// the first two (little-endian); slotOf reads it back.
func slotValue(i int) []byte {
	v := make([]byte, 8)
	binary.LittleEndian.PutUint16(v, uint16(i+1))
	return v
}

func slotOf(b []byte) int { return int(binary.LittleEndian.Uint16(b)) }

// allToAll has every rank write 8 bytes (its rank + 1) into its slot of every other rank's
// window, one write at a time, over each of its paths to the peer (DC, RC or both).
func allToAll(ctx context.Context, ranks []*memoryRank) error {
	for i, r := range ranks {
		val := slotValue(i)
		for j, t := range ranks {
			if i == j {
				continue
			}
			raddr := t.win.Addr + uint64(8*i)
			for _, p := range []struct {
				name  string
				paths map[int]memoryPath
			}{{"RC", r.rc}, {"DC", r.dc}} {
				if path, ok := p.paths[j]; ok {
					if err := r.write(ctx, path.ch, val, raddr, t.win.RKey); err != nil {
						return fmt.Errorf("rank %d to rank %d over %s: %w", i, j, p.name, err)
					}
				}
			}
		}
	}
	return nil
}

// write puts val at (raddr, rkey) over ch and waits for its completion.
func (r *memoryRank) write(ctx context.Context, ch *multirail.Channel, val []byte, raddr uint64, rkey uint32) error {
	ctx, cancel := context.WithTimeout(ctx, memoryWait)
	defer cancel()
	req := r.net.NewRequest(nil)
	err := ch.Write(ctx, req, val, raddr, rkey)
	r.net.Issued(req)
	if err == nil {
		err = r.net.Wait(ctx, req)
	}
	r.net.Release(req)
	return err
}

// checkAllToAll checks that every write landed and, but for RC-only, that every rank's DC queue
// pair holds a record per peer.
func checkAllToAll(ranks []*memoryRank, kind string) error {
	n := len(ranks)
	for j, t := range ranks {
		buf := t.win.Buf()
		for i := range n {
			got := slotOf(buf[8*i:])
			if want := i + 1; i != j && got != want {
				return fmt.Errorf("rank %d's slot of rank %d holds %d, want %d", j, i, got, want)
			}
		}
		if kind != rma.NetRC && t.dcqp.DCPeers() != n-1 {
			return fmt.Errorf("rank %d's DC queue pair holds %d peer records, want %d", j, t.dcqp.DCPeers(), n-1)
		}
	}
	return nil
}

// runtimeSample is what one rma job measured.
type runtimeSample struct {
	median, max         float64 // bytes per rank
	perPeer             float64 // bytes of the per-peer objects over N-1 (median over ranks)
	openMedian, openMax float64 // RC connections open per rank (adaptive)
	kinds               string  // rank 0's kinds
}

// The traffic of the adaptive rma job, in virtual time: all-to-all rounds of puts 20 µs apart
// for 20 ms, with a statistics window of 10 ms (GOARMCI_RC_WINDOW) and no idle eviction, so the
// selection promotes peers up to h (GOARMCI_MAX_RC) before the memory is read.
const (
	adaptiveRound  = 20 * time.Microsecond
	adaptivePhase  = 20 * time.Millisecond
	adaptiveWindow = "10ms"
)

// runtimeMemoryJob runs an rma job of n ranks on the fabric (one node each) whose network peers
// are reached as kind says (GOARMCI_NET_TRANSPORT; h: GOARMCI_MAX_RC for adaptive): every rank
// puts 8 bytes into every other rank's segment (adaptive: in rounds for adaptivePhase), a
// barrier, the values checked, and every rank's Runtime.Memory without the registered segments.
// Call it in a bubble.
func runtimeMemoryJob(ctx context.Context, kind string, n, h int) (runtimeSample, error) {
	var mu sync.Mutex
	total, perPeer, open := make([]float64, n), make([]float64, n), make([]float64, n)
	var kinds []string
	job := rmatest.FabricJob{Configure: func(_ int, c *rma.Config) {
		c.NetworkTransport = kind
		c.NetworkDeviceFT = kind == rma.NetAdaptive // dials through the UD connection manager
	}}
	if kind == rma.NetAdaptive {
		for k, v := range map[string]string{transport.EnvMaxRC: fmt.Sprint(h), transport.EnvWindow: adaptiveWindow,
			transport.EnvIdleTimeout: "1h"} {
			defer setEnv(k, v)()
		}
	}
	err := rmatest.StartFabricJob(ctx, n, job, func(ctx context.Context, rt *rma.Runtime) error {
		seg, err := rt.Malloc(ctx, 8*n)
		if err != nil {
			return err
		}
		val := slotValue(rt.Rank())
		for end := time.Now().Add(adaptivePhase); ; time.Sleep(adaptiveRound) {
			for p := range n {
				if p != rt.Rank() {
					if err := rt.Put(ctx, val, seg, p, 8*rt.Rank()); err != nil {
						return err
					}
				}
			}
			if kind != rma.NetAdaptive || !time.Now().Before(end) {
				break
			}
		}
		if err := rt.Barrier(ctx); err != nil {
			return err
		}
		for p := range n {
			if got, want := slotOf(seg.Local()[8*p:]), p+1; p != rt.Rank() && got != want {
				return fmt.Errorf("rank %d's slot of rank %d holds %d, want %d", rt.Rank(), p, got, want)
			}
		}
		ms := rt.Memory()
		var peers int64
		for _, pm := range ms.Peers {
			peers += pm.Bytes
		}
		comm := ms.Total
		for _, k := range ms.Kinds {
			if k.Kind == rma.MemRegistered {
				comm -= k.Bytes
			} else if rt.Rank() == 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d x %d B", k.Kind, k.Count, k.Bytes/int64(max(k.Count, 1))))
			}
		}
		mu.Lock()
		total[rt.Rank()], perPeer[rt.Rank()] = float64(comm), float64(peers)/float64(n-1)
		open[rt.Rank()] = float64(rt.Adaptive().OpenRC)
		mu.Unlock()
		return rt.Barrier(ctx)
	})
	if err != nil {
		return runtimeSample{}, err
	}
	return runtimeSample{median: Median(total), max: slices.Max(total), perPeer: Median(perPeer),
		openMedian: Median(open), openMax: slices.Max(open), kinds: strings.Join(kinds, ", ")}, nil
}
