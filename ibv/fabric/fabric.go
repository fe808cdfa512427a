// Package fabric is goarmci's in-process network (the testbed of unit tests): many nodes, each
// with the same number of ports (rails), inside one test binary. Port r of every node hangs on
// rail r (one switch per rail, as in [Vishnu07 ch. 4]'s multi-rail clusters): a port reaches the
// port of the same number on every other node. Every node can open one ibv device whose RC, UD
// and DC queue pairs run on the shared transport engine (ibv/internal/engine), like the tcp and udp
// providers, with packets carried in memory.
//
// Packets travel on directed links, one per (source node, destination node, rail, source path
// bits), each a FIFO served by a goroutine the fabric owns. A seeded fault Plan acts per link:
// loss (a probability or every n-th packet), delay, duplication, reordering, a path down, a network partition, and pulled
// cables on a schedule (a port goes PortDown with EventPortErr and comes back with
// EventPortActive, as the tcp provider's SetPortDown; hybridft's early detection sees it). Path
// probes — the APM path load, REARM→ARMED [Vishnu07 ch. 9] — fail across a down port or path.
//
// With a Topology (Config.Topology, a FatTree) every rail is a two-level fat tree of leaf and
// spine switches instead of one ideal switch: each packet crosses the directed links (hops) of
// its route — host→leaf, leaf→spine, spine→leaf, leaf→host, the spine chosen by the destination
// LID including its LMC path bits, as InfiniBand's destination-routed forwarding tables [IBA]
// — each a server of a given rate in bytes/s, shared fairly (deficit round robin) by the flows
// that cross it, with a latency, so flows of different pairs contend on shared leaf↔spine links
// as in the hot-spot studies of [Vishnu07 ch. 3, 7]. One goroutine of the fabric runs the model
// as a discrete-event simulation on the fabric clock. Hops can be slowed (SetHopRate) or taken
// down (SetHopDown, Plan.HopDown), and count their packets and bytes (HopStats). The tree's
// HCAModel (FatTree.HCA) prices each node's queue pair context cache and DC connects on its host
// links [Takagi15 §2.1] and counts them (HCAStats).
//
// Nothing blocks outside the fabric: links wait on channels and timers, so a fabric created
// inside a testing/synctest bubble runs on virtual time, and failover tests need no real sleeps:
// ACK timeouts, retries, resend timers and partition timeouts pass in virtual time. Create the
// fabric, its devices and everything using them inside the bubble, and close them before it ends.
package fabric

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
	"github.com/goarmci/goarmci/ibv/provider"
)

// Config configures a fabric.
type Config struct {
	// Name prefixes the port addresses and device names (default "fab").
	Name string
	// Nodes is the number of nodes created with the fabric (AddNode adds more).
	Nodes int
	// Ports is the number of ports (rails) per node, 1..32 (default 1).
	Ports int
	// LMC gives every port 2^LMC LIDs (path bits, [Vishnu07 §2.2]), 0..7.
	LMC uint8
	// MTU is the port MTU in bytes, 256..1 MiB (default 4096).
	MTU int
	// Plan is applied when the fabric starts (Apply).
	Plan Plan
	// Topology, when not nil, builds every rail as this fat tree, its links with capacities
	// shared by the flows that cross them and latencies, in virtual time (see FatTree). Nil: one
	// ideal switch per rail, links of infinite capacity and no latency but the Plan's.
	Topology *FatTree
	// Engine tuning of the devices (zero values: engine defaults, a 10 ms ACK timeout floor and
	// a 2 ms timer tick).
	TimeoutFloor time.Duration
	Tick         time.Duration
	Window       int
	Log          *zerolog.Logger
}

// Errors of the fabric (besides ibv.ErrInvalidArgument, ibv.ErrUnreachable, ibv.ErrBusy and
// ibv.ErrClosed, which its errors wrap where they apply).
var (
	// ErrPathDown: a path probe found the path down (a down port at either end, a Down rule, or
	// a rule that loses every packet).
	ErrPathDown = errors.New("fabric: path down")
)

// Fabric is an in-process network. Its methods are safe for concurrent use.
type Fabric struct {
	cfg   Config
	log   zerolog.Logger
	start time.Time

	mu     sync.RWMutex
	nodes  []*node
	addrs  map[string]*port
	links  map[linkKey]*link
	closed bool
	nextID uint64

	mcMu  sync.Mutex
	mcast map[mcastKey]map[int]int // multicast members: (rail, MLID) → node → attachments (mcast.go)

	rules atomic.Pointer[[]*rule] // copy on write
	net   *netsim                 // the capacity model of Config.Topology (nil without)

	evMu    sync.Mutex
	events  []PortEvent // pending, sorted by At
	hopEvs  []HopEvent  // pending, sorted by At
	applied []PortEvent
	kick    chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
}

type node struct {
	f     *Fabric
	idx   int
	ports []*port

	// devMu guards dev and ctx: link goroutines deliver under RLock, Close detaches under Lock.
	devMu sync.RWMutex
	dev   *driver
	ctx   *ibv.Context
	open  bool // guarded by Fabric.mu: links to and from the node may be created
}

type port struct {
	n    *node
	num  uint8
	lid  uint16
	addr string
	down atomic.Bool
	// rx counts packets delivered to the port; tx packets sent from it; lost packets the
	// fabric lost on their way from it
	rx, tx, lost atomic.Uint64
}

// New creates a fabric with cfg.Nodes nodes and starts its port-event scheduler (and the
// goroutine of the Topology's model); Close stops every goroutine of the fabric and closes the
// devices still open. Errors wrap ibv.ErrInvalidArgument (also: a Topology of another shape,
// more nodes than it attaches).
func New(cfg Config) (*Fabric, error) {
	if cfg.Ports == 0 {
		cfg.Ports = 1
	}
	if cfg.MTU == 0 {
		cfg.MTU = 4096
	}
	if cfg.Name == "" {
		cfg.Name = "fab"
	}
	if cfg.Ports < 0 || cfg.Ports > 32 || cfg.Nodes < 0 || cfg.LMC > 7 || cfg.MTU < 256 || cfg.MTU > 1<<20 {
		return nil, fmt.Errorf("fabric: %w: %d nodes, %d ports, LMC %d, MTU %d", ibv.ErrInvalidArgument,
			cfg.Nodes, cfg.Ports, cfg.LMC, cfg.MTU)
	}
	if t := cfg.Topology; t != nil {
		if err := t.validate(); err != nil {
			return nil, err
		}
		if cfg.Nodes > t.Hosts() {
			return nil, fmt.Errorf("fabric: %w: %d nodes on a fat tree of %d hosts", ibv.ErrInvalidArgument, cfg.Nodes, t.Hosts())
		}
	}
	f := &Fabric{cfg: cfg, start: time.Now(), addrs: map[string]*port{}, links: map[linkKey]*link{},
		kick: make(chan struct{}, 1), stop: make(chan struct{})}
	if cfg.Topology != nil {
		f.net = newNetsim(f, *cfg.Topology)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.net.run(f.stop)
		}()
	}
	if cfg.Log != nil {
		f.log = *cfg.Log
	} else {
		f.log = zerolog.Nop()
	}
	f.rules.Store(&[]*rule{})
	for i := 0; i < cfg.Nodes; i++ {
		f.AddNode()
	}
	f.wg.Add(1)
	go f.schedule()
	if err := f.Apply(cfg.Plan); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// Now is the fabric clock: the time since New (virtual time inside a synctest bubble).
func (f *Fabric) Now() time.Duration { return time.Since(f.start) }

// AddNode adds a node with Config.Ports ports and returns its index.
func (f *Fabric) AddNode() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := &node{f: f, idx: len(f.nodes)}
	stride := uint16(1) << f.cfg.LMC
	for p := 1; p <= f.cfg.Ports; p++ {
		pt := &port{n: n, num: uint8(p), addr: fmt.Sprintf("%s:n%d.p%d", f.cfg.Name, n.idx, p),
			lid: uint16(1 + (n.idx*f.cfg.Ports+p-1)*int(stride))}
		n.ports = append(n.ports, pt)
		f.addrs[pt.addr] = pt
	}
	f.nodes = append(f.nodes, n)
	return n.idx
}

// Nodes is the number of nodes.
func (f *Fabric) Nodes() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.nodes)
}

func (f *Fabric) node(i int) (*node, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if i < 0 || i >= len(f.nodes) {
		return nil, fmt.Errorf("fabric: %w: node %d of %d", ibv.ErrInvalidArgument, i, len(f.nodes))
	}
	return f.nodes[i], nil
}

func (n *node) port(num uint8) (*port, error) {
	if num == 0 || int(num) > len(n.ports) {
		return nil, fmt.Errorf("fabric: %w: port %d of node %d (%d ports)", ibv.ErrInvalidArgument, num, n.idx, len(n.ports))
	}
	return n.ports[num-1], nil
}

// Addr is the address of a node's port (PortAttr.Addr, what AHAttr.Addr names).
func (f *Fabric) Addr(node int, port uint8) (string, error) {
	n, err := f.node(node)
	if err != nil {
		return "", err
	}
	p, err := n.port(port)
	if err != nil {
		return "", err
	}
	return p.addr, nil
}

// driver is the fabric provider's device driver (ibv.Driver, ibv.SRQCreator): the engine's
// Device of a node.
type driver struct {
	*engine.Device
	n *node
}

// Open opens the device of node (the provider's ibv_open_device): its ports are the node's,
// its RC and UD queue pairs run on the engine. One device per node may be open at a time
// (ibv.ErrBusy otherwise); closing it stops the links to and from the node, and the node may be
// opened again. Errors wrap ibv.ErrInvalidArgument, ibv.ErrBusy or ibv.ErrClosed.
func (f *Fabric) Open(nodeIdx int) (*ibv.Context, error) {
	n, err := f.node(nodeIdx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	switch {
	case f.closed:
		f.mu.Unlock()
		return nil, fmt.Errorf("fabric: open node %d: %w", nodeIdx, ibv.ErrClosed)
	case n.open:
		f.mu.Unlock()
		return nil, fmt.Errorf("fabric: %w: node %d already has an open device", ibv.ErrBusy, nodeIdx)
	}
	n.open = true
	f.mu.Unlock()
	attrs := make([]ibv.PortAttr, len(n.ports))
	for i, p := range n.ports {
		st := ibv.PortActive
		if p.down.Load() {
			st = ibv.PortDown
		}
		attrs[i] = ibv.PortAttr{Num: p.num, State: st, LID: p.lid, LMC: f.cfg.LMC, MTU: f.cfg.MTU, Addr: p.addr}
	}
	d := &driver{n: n}
	d.Device = engine.NewDevice(engine.DeviceConfig{Name: fmt.Sprintf("%s%d", f.cfg.Name, n.idx), Provider: "fabric",
		Ports: attrs, Close: func() error { f.detach(n); return nil },
		Engine: engine.Config{Transport: (*transport)(n), TimeoutFloor: f.cfg.TimeoutFloor, Tick: f.cfg.Tick,
			Window: f.cfg.Window, Log: f.cfg.Log}})
	ctx := provider.NewContext(d)
	n.devMu.Lock()
	n.dev, n.ctx = d, ctx
	n.devMu.Unlock()
	return ctx, nil
}

// detach runs when a node's device closes: the links to and from the node stop, then the node
// forgets the device.
func (f *Fabric) detach(n *node) {
	f.mu.Lock()
	n.open = false
	var stop []*link
	for k, l := range f.links {
		if int(k.src) == n.idx || int(k.dst) == n.idx {
			stop = append(stop, l)
			delete(f.links, k)
		}
	}
	f.mu.Unlock()
	for _, l := range stop {
		l.halt()
	}
	n.devMu.Lock()
	n.dev, n.ctx = nil, nil
	n.devMu.Unlock()
	f.mcastForget(n)
	if f.net != nil {
		f.net.forgetHCA(n.idx)
	}
}

// SetPortDown pulls (down true) or plugs back the cable of a node's port: while down the port
// reports PortDown, sends from it fail (ibv.ErrUnreachable), packets to or from it are lost,
// even those already on a link, and probes across it fail. The node's device gets
// EventPortErr (EventPortActive when it comes back), and its queue pairs whose primary path
// uses the port have their ACK timers expire at once (early fault detection, as a broken tcp
// stream). Errors wrap ibv.ErrInvalidArgument.
func (f *Fabric) SetPortDown(nodeIdx int, num uint8, down bool) error {
	n, err := f.node(nodeIdx)
	if err != nil {
		return err
	}
	p, err := n.port(num)
	if err != nil {
		return err
	}
	if p.down.Swap(down) == down {
		return nil
	}
	f.evMu.Lock()
	f.applied = append(f.applied, PortEvent{At: f.Now(), Node: nodeIdx, Port: num, Down: down})
	f.evMu.Unlock()
	var dsts []string
	if down {
		f.mu.RLock()
		for k, l := range f.links {
			if int(k.src) == nodeIdx && k.rail == num {
				dsts = append(dsts, l.dst.addr)
			}
		}
		f.mu.RUnlock()
	}
	n.devMu.RLock()
	defer n.devMu.RUnlock()
	if n.dev == nil {
		return nil
	}
	n.dev.SwitchPort(n.ctx, num, down, func() {
		for _, a := range dsts {
			n.dev.Engine().PathFault(num, a)
		}
	})
	return nil
}

// PortDown reports whether a node's port is down (false for an unknown port).
func (f *Fabric) PortDown(nodeIdx int, num uint8) bool {
	n, err := f.node(nodeIdx)
	if err != nil {
		return false
	}
	p, err := n.port(num)
	return err == nil && p.down.Load()
}

// Apply adds a plan's rules (from now on) and schedules its port events (times on the fabric
// clock; events already due run at once, in order). Errors wrap ibv.ErrInvalidArgument (a rule
// with a probability outside 0..1 or a negative count or delay, an event for an unknown port).
func (f *Fabric) Apply(p Plan) error {
	for i, r := range p.Rules {
		if r.Drop < 0 || r.Drop > 1 || r.DropEvery < 0 || r.Delay < 0 {
			return fmt.Errorf("fabric: %w: rule %d: drop %v every %d delay %v", ibv.ErrInvalidArgument, i, r.Drop, r.DropEvery, r.Delay)
		}
	}
	for _, e := range p.HopEvents {
		if _, _, err := f.topo(e.Hop); err != nil {
			return err
		}
	}
	for _, e := range p.Events {
		n, err := f.node(e.Node)
		if err != nil {
			return err
		}
		if _, err := n.port(e.Port); err != nil {
			return err
		}
	}
	if len(p.Rules) > 0 {
		f.mu.Lock()
		rs := slices.Clone(*f.rules.Load())
		for _, r := range p.Rules {
			f.nextID++
			rs = append(rs, &rule{Rule: r, id: f.nextID, seed: p.Seed})
		}
		f.rules.Store(&rs)
		f.mu.Unlock()
	}
	if len(p.Events) > 0 || len(p.HopEvents) > 0 {
		f.evMu.Lock()
		f.events = append(f.events, p.Events...)
		slices.SortStableFunc(f.events, func(a, b PortEvent) int { return cmp.Compare(a.At, b.At) })
		f.hopEvs = append(f.hopEvs, p.HopEvents...)
		slices.SortStableFunc(f.hopEvs, func(a, b HopEvent) int { return cmp.Compare(a.At, b.At) })
		f.evMu.Unlock()
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// ClearRules removes every rule (scheduled port events stay).
func (f *Fabric) ClearRules() {
	f.mu.Lock()
	f.rules.Store(&[]*rule{})
	f.mu.Unlock()
}

// PortLog returns the port changes made so far, by SetPortDown or the plan, with the fabric
// time at which each took effect.
func (f *Fabric) PortLog() []PortEvent {
	f.evMu.Lock()
	defer f.evMu.Unlock()
	return slices.Clone(f.applied)
}

// schedule is the port-event goroutine: it applies each scheduled event at its time (port
// events before hop events of the same time).
func (f *Fabric) schedule() {
	defer f.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		f.evMu.Lock()
		var due []PortEvent
		now := f.Now()
		i := 0
		for i < len(f.events) && f.events[i].At <= now {
			i++
		}
		due = append(due, f.events[:i]...)
		f.events = f.events[i:]
		j := 0
		for j < len(f.hopEvs) && f.hopEvs[j].At <= now {
			j++
		}
		hdue := slices.Clone(f.hopEvs[:j])
		f.hopEvs = f.hopEvs[j:]
		wait := time.Duration(-1)
		if len(f.events) > 0 {
			wait = f.events[0].At - now
		}
		if len(f.hopEvs) > 0 && (wait < 0 || f.hopEvs[0].At-now < wait) {
			wait = f.hopEvs[0].At - now
		}
		f.evMu.Unlock()
		for _, e := range due {
			if err := f.SetPortDown(e.Node, e.Port, e.Down); err != nil {
				f.log.Warn().Err(err).Msg("fabric: port event")
			}
		}
		for _, e := range hdue {
			if err := f.SetHopDown(e.Hop, e.Down); err != nil {
				f.log.Warn().Err(err).Msg("fabric: hop event")
			}
		}
		if len(due) > 0 || len(hdue) > 0 {
			continue
		}
		if wait >= 0 {
			t.Reset(wait)
		}
		select {
		case <-f.stop:
			t.Stop()
			return
		case <-f.kick:
			t.Stop()
		case <-t.C:
		}
	}
}

// LinkStats counts the packets of the links from src to dst on a rail (all path bits).
type LinkStats struct {
	Sent      uint64 // accepted for transmission (including those lost later)
	Lost      uint64 // lost by a rule or a down port
	Delivered uint64 // handed to the destination device
}

// Stats returns the counts of the links from node src to node dst on rail port (0: every rail).
// Counts restart when a device of either node closes.
func (f *Fabric) Stats(src, dst int, port uint8) LinkStats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var s LinkStats
	for k, l := range f.links {
		if int(k.src) == src && int(k.dst) == dst && (port == 0 || k.rail == port) {
			s.Sent += l.sent.Load()
			s.Lost += l.lost.Load()
			s.Delivered += l.delivered.Load()
		}
	}
	return s
}

// PortStats returns the packets sent from, delivered to and lost on the way from a node's
// port since New.
func (f *Fabric) PortStats(nodeIdx int, num uint8) (tx, rx, lost uint64) {
	n, err := f.node(nodeIdx)
	if err != nil {
		return 0, 0, 0
	}
	p, err := n.port(num)
	if err != nil {
		return 0, 0, 0
	}
	return p.tx.Load(), p.rx.Load(), p.lost.Load()
}

// Close closes the devices still open, stops every goroutine of the fabric and waits for them.
func (f *Fabric) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	nodes := slices.Clone(f.nodes)
	f.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		n.devMu.RLock()
		ctx := n.ctx
		n.devMu.RUnlock()
		if ctx != nil {
			errs = append(errs, ctx.Close())
		}
	}
	close(f.stop)
	f.wg.Wait()
	f.mu.Lock()
	links := make([]*link, 0, len(f.links))
	for k, l := range f.links {
		links = append(links, l)
		delete(f.links, k)
	}
	f.mu.Unlock()
	for _, l := range links {
		l.halt()
	}
	return errors.Join(errs...)
}
