package hybridft

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/hybridft/apm"
	"github.com/goarmci/goarmci/hybridft/udcm"
	"github.com/goarmci/goarmci/ibv"
)

// Options configure a Manager.
type Options struct {
	// CMListen are the UD connection manager's listen addresses, one per rail ("ip:0"); empty:
	// "127.0.0.1:0".
	CMListen []string
	// CMDevice, when set, runs the UD connection manager on this open device (one port per
	// rail, e.g. a node of ibv/fabric, which tests run under testing/synctest) instead of a new
	// udp device on CMListen. The Manager does not close it.
	CMDevice *ibv.Context
	// APM arms an alternate path on every RC queue pair that has one (GOARMCI_APM).
	APM bool
	// APMTest, when positive, migrates every ARMED queue pair manually at this period and
	// re-arms it (GOARMCI_APM_TEST, as MVAPICH2's MV2_USE_APM_TEST).
	APMTest time.Duration
	// PartitionTimeout bounds how long a connection stays without a working path before its
	// requests fail with ErrPartition; 0: DefaultPartitionTimeout;
	// negative: never (the consumer's context bounds the wait).
	PartitionTimeout time.Duration
	// AckTimeout and RetryCount set the RC queue pairs' ACK timeout (rounded up to IB's
	// 4.096 µs·2^t) and retry count; zero: the verbs defaults.
	AckTimeout time.Duration
	RetryCount int
	// Resend is the connection manager's resend timer (default 50 ms); Probe the period of
	// path probes during a partition and of APM path-load retries (default 100 ms); Backoff how
	// long a failed path is avoided (default 500 ms).
	Resend, Probe, Backoff time.Duration
	// Secret is the job's secret (32 bytes): every connection manager message carries a MAC made
	// with it and messages without the job's MAC are dropped (udcm.WithKey); nil: the MACs
	// authenticate nothing (tests).
	Secret []byte
	Log    *zerolog.Logger
}

// DefaultPartitionTimeout is the partition timeout of Options and of GOARMCI_PARTITION_TIMEOUT
// when not set: 30 s, so no request waits forever for a path. It is far above what recovering
// a transient fault takes: detection is the RC retries on a path (the ACK timeout, by default
// 50 ms rounded up to IB's 4.096 µs·2^t, 67 ms, times the retry count plus one, 7+1: about
// 0.5 s; twice when APM migrates onto a dead alternate), then software recovery resends its REQ every Resend (50 ms), probes paths
// every Probe (100 ms) and avoids a failed path for Backoff (500 ms): every timer recovery
// runs on is under a second, so 30 s only ends outages that are not transient.
const DefaultPartitionTimeout = 30 * time.Second

// Manager is a process's fault-tolerance module [Vishnu09 Fig. 5]: it owns the UD connection
// manager (one UD queue pair per process, created at initialization) and, per device, the
// asynchronous event goroutine that drives APM (path loading, re-arming after a migration,
// manual migration back to a recovered path) and early fault detection; a single protocol
// goroutine runs the software re-establishment of failed connections (REQ/REP/ACK, resend
// timers, partition probes and timeouts).
type Manager struct {
	opts Options
	cm   *udcm.CM
	log  zerolog.Logger

	mu    sync.Mutex
	devs  map[*ibv.Context]*devState
	conns map[uint64]*Conn
	od    atomic.Pointer[OnDemand] // on-demand connection setup (ondemand.go)
	inbox []item
	wake  chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

type item struct {
	ev   ibv.AsyncEvent
	ds   *devState
	msg  *udcm.Msg
	conn *Conn
}

// NewManager opens the UD connection manager and starts the protocol goroutine. Close stops
// everything it started.
func NewManager(o Options) (*Manager, error) {
	if len(o.CMListen) == 0 {
		o.CMListen = []string{"127.0.0.1:0"}
	}
	if o.Resend <= 0 {
		o.Resend = 50 * time.Millisecond
	}
	if o.Probe <= 0 {
		o.Probe = 100 * time.Millisecond
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.PartitionTimeout == 0 {
		o.PartitionTimeout = DefaultPartitionTimeout
	}
	m := &Manager{opts: o, devs: map[*ibv.Context]*devState{}, conns: map[uint64]*Conn{}, wake: make(chan struct{}, 1)}
	if o.Log != nil {
		m.log = *o.Log
	} else {
		m.log = zerolog.Nop()
	}
	var cm *udcm.CM
	var err error
	if o.CMDevice != nil {
		cm, err = udcm.OpenOn(o.CMDevice, m.onMsg, o.Log, udcm.WithKey(o.Secret))
	} else {
		cm, err = udcm.Open(o.CMListen, m.onMsg, o.Log, udcm.WithKey(o.Secret))
	}
	if err != nil {
		return nil, fmt.Errorf("hybridft: manager: %w", err)
	}
	m.cm = cm
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Add(1)
	go m.loop()
	return m, nil
}

// CM is the UD connection manager (tests reach its device through it).
func (m *Manager) CM() *udcm.CM { return m.cm }

// Close stops the event and protocol goroutines and closes the connection manager. Close it
// before the devices (connections may be closed before or after).
func (m *Manager) Close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	m.cancel()
	m.wg.Wait()
	return m.cm.Close()
}

// NewEndpoint is the fault-tolerant hybridft.NewEndpoint: the PD and a CQ of cqe entries on dev
// for connections on port, with the device's asynchronous event goroutine started on first use.
// Use WithPort for the device's other rails.
func (m *Manager) NewEndpoint(dev *ibv.Context, port uint8, cqe int) (*Endpoint, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	ep, err := NewEndpoint(dev, port, cqe)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	ds := m.devs[dev]
	if ds == nil {
		ds = &devState{m: m, dev: dev}
		ds.conns.Store(&map[uint32]*Conn{})
		m.devs[dev] = ds
		m.wg.Add(1)
		go m.eventLoop(ds)
	}
	m.mu.Unlock()
	ep.ft = ds
	return ep, nil
}

// rtsAttrs adds the configured ACK timeout and retry count to an RTS transition.
func (m *Manager) rtsAttrs(a *ibv.QPAttr) ibv.AttrMask {
	var mask ibv.AttrMask
	if d := m.opts.AckTimeout; d > 0 {
		t := uint8(1)
		for t < 31 && time.Duration(4096)<<t < d {
			t++
		}
		a.Timeout = t
		mask |= ibv.AttrTimeout
	}
	if r := m.opts.RetryCount; r > 0 {
		a.RetryCnt = uint8(min(r, 7))
		mask |= ibv.AttrRetryCnt
	}
	return mask
}

func (m *Manager) register(c *Conn) {
	m.mu.Lock()
	m.conns[c.id] = c
	m.mu.Unlock()
	m.kick(c) // arm the alternate path
}

func (m *Manager) unregister(c *Conn) {
	m.mu.Lock()
	delete(m.conns, c.id)
	m.mu.Unlock()
}

func (m *Manager) post(it item) {
	m.mu.Lock()
	m.inbox = append(m.inbox, it)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// kick asks the protocol goroutine to look at c (a fault was detected, or it was connected).
func (m *Manager) kick(c *Conn) { m.post(item{conn: c}) }

func (m *Manager) onMsg(msg *udcm.Msg, _ string) {
	cp := *msg
	cp.Atomics = append([]udcm.Atomic(nil), msg.Atomics...)
	cp.Payload = append([]byte(nil), msg.Payload...)
	m.post(item{msg: &cp})
}

// devState is the fault-tolerance state of one device, shared by its endpoints.
type devState struct {
	m     *Manager
	dev   *ibv.Context
	cmu   sync.Mutex
	conns atomic.Pointer[map[uint32]*Conn] // by QP number, copy on write
}

func (ds *devState) add(c *Conn) {
	ds.cmu.Lock()
	old := *ds.conns.Load()
	n := make(map[uint32]*Conn, len(old)+1)
	for k, v := range old {
		n[k] = v
	}
	n[c.qp.Num()] = c
	ds.conns.Store(&n)
	ds.cmu.Unlock()
}

func (ds *devState) remove(c *Conn) {
	ds.cmu.Lock()
	old := *ds.conns.Load()
	n := make(map[uint32]*Conn, len(old))
	for k, v := range old {
		if v != c {
			n[k] = v
		}
	}
	ds.conns.Store(&n)
	ds.cmu.Unlock()
}

func (ds *devState) lookup(qpn uint32) *Conn { return (*ds.conns.Load())[qpn] }

func (ds *devState) filter(wc *ibv.WC) bool {
	c := ds.lookup(wc.QPNum)
	if c == nil {
		return true
	}
	return c.onWC(wc)
}

// portsUp is the bit mask of the device's active ports.
func (ds *devState) portsUp(n uint8) uint32 {
	var up uint32
	for p := uint8(1); p <= n; p++ {
		if pa, err := ds.dev.QueryPort(p); err == nil && pa.State == ibv.PortActive {
			up |= 1 << (p - 1)
		}
	}
	return up
}

// eventLoop is the device's asynchronous event goroutine ([Vishnu07 §9.3], [Vishnu09 §IV.B.1]).
func (m *Manager) eventLoop(ds *devState) {
	defer m.wg.Done()
	for {
		ev, err := ds.dev.GetAsyncEvent(m.ctx)
		if err != nil {
			return
		}
		m.post(item{ev: ev, ds: ds})
	}
}

// loop is the protocol goroutine: it handles events, messages and kicks, and runs the timers.
func (m *Manager) loop() {
	defer m.wg.Done()
	period := min(m.opts.Resend, m.opts.Probe) / 2
	if m.opts.APMTest > 0 {
		period = min(period, m.opts.APMTest/2)
	}
	period = max(period, time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	var items []item
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.wake:
		case <-t.C:
		}
		m.mu.Lock()
		items, m.inbox = m.inbox, items[:0]
		m.mu.Unlock()
		now := time.Now()
		for i := range items {
			it := &items[i]
			switch {
			case it.msg != nil && it.msg.Type.Conn():
				m.onDemandMsg(it.msg, now)
			case it.msg != nil:
				m.handleMsg(it.msg, now)
			case it.ds != nil:
				m.handleEvent(it.ds, it.ev, now)
			case it.conn != nil:
				m.check(it.conn, now)
			}
			items[i] = item{}
		}
		m.onDemandTick(now)
		m.mu.Lock()
		conns := make([]*Conn, 0, len(m.conns))
		for _, c := range m.conns {
			conns = append(conns, c)
		}
		m.mu.Unlock()
		for _, c := range conns {
			m.tick(c, now)
		}
	}
}

func (m *Manager) handleEvent(ds *devState, ev ibv.AsyncEvent, now time.Time) {
	switch ev.Type {
	case ibv.EventPathMig:
		c := ds.lookup(ev.QPNum)
		if c == nil {
			return
		}
		c.stats.migrations.Add(1)
		c.mu.Lock()
		from := c.primary.Port
		c.primary, c.hasAlt = pathOf(c.qp.Query().AV), false
		c.lg.Info().Uint8("from_port", from).Uint8("port", c.primary.Port).Str("detail", ev.Detail).
			Msg("hybridft: path migrated (APM)")
		c.mu.Unlock()
		m.armAlt(c, now)
	case ibv.EventPathMigErr:
		if c := ds.lookup(ev.QPNum); c != nil {
			c.mu.Lock()
			c.apmRetryAt = now.Add(m.opts.Probe)
			c.mu.Unlock()
		}
	case ibv.EventQPFatal:
		// The event comes after the queue pair entered ERROR ([IBA] QP states) and is handled
		// after the failed completions of the same fault, which may have started a recovery that
		// has recycled and re-established the queue pair since: then the event is stale and
		// failing the working connection again would run a spurious recovery.
		if c := ds.lookup(ev.QPNum); c != nil {
			c.mu.Lock()
			if c.qp.State() == ibv.StateError {
				c.failLocked(true)
			}
			c.mu.Unlock()
		}
	case ibv.EventPortErr:
		// early detection [Vishnu09 §IV.B.1]: a queue pair whose primary path uses the port and
		// that cannot migrate by itself is recovered now instead of after its retries
		for _, c := range *ds.conns.Load() {
			c.mu.Lock()
			if c.recoverable && c.state == stNormal && c.primary.Port == ev.Port && c.qp.Query().PathMigState != ibv.Armed {
				c.failLocked(true)
			}
			c.mu.Unlock()
		}
	}
}

// check runs what a kick asks: recovery of a failed connection, or arming a connected one.
func (m *Manager) check(c *Conn, now time.Time) {
	c.mu.Lock()
	st := c.state
	if st == stFailed {
		m.recStep(c, recEvent{Kind: recStart}, now)
	}
	c.mu.Unlock()
	if st == stNormal {
		m.armAlt(c, now)
	}
}

// tick runs a connection's timers: the partition timeout, the recovery core's resends and
// retries, else APM's.
func (m *Manager) tick(c *Conn, now time.Time) {
	c.mu.Lock()
	st := c.state
	if st == stFailed || st == stReady {
		if to := m.opts.PartitionTimeout; to > 0 && !c.outageSince.IsZero() && now.Sub(c.outageSince) > to {
			c.lg.Warn().Dur("outage", now.Sub(c.outageSince)).Msg("hybridft: no path to the peer within the partition timeout")
			c.giveUpLocked(ErrPartition)
			m.recStep(c, recEvent{Kind: recAbort}, now)
			c.mu.Unlock()
			return
		}
	}
	acted := m.recStep(c, recEvent{Kind: recTick}, now)
	c.mu.Unlock()
	if !acted && st == stNormal {
		m.apmTick(c, now)
	}
}

// ---- Hardware-IBNFT [Vishnu07 ch. 9] ----

func (c *Conn) nports() uint8 { return uint8(min(len(c.remote.Paths), len(c.local.Paths), 32)) }

// armAlt is the alternate path specification and path loading request modules: choose an
// alternate path (apm.Alternate) and load it (Modify RTS→RTS, AttrAltPath, REARM); the provider
// probes it and moves the queue pair to ARMED.
func (m *Manager) armAlt(c *Conn, now time.Time) {
	if !m.opts.APM {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stNormal || c.qp.State() != ibv.StateRTS || !c.recoverable {
		return
	}
	// the provider may have migrated already (MigrateAuto) without EventPathMig handled yet:
	// the alternate is chosen against the queue pair's primary path, not a stale copy of it
	c.primary = pathOf(c.qp.Query().AV)
	n := c.nports()
	ports := apmPorts(c, n)
	alt, ok := apmAlternate(c, ports)
	if !ok {
		c.hasAlt = false
		c.apmRetryAt = now.Add(m.opts.Probe)
		return
	}
	rp := c.remote.Paths[alt.Port-1]
	attr := &ibv.QPAttr{AltAV: ibv.AHAttr{Addr: rp.Addr, DLID: rp.LID + uint16(alt.PathBits), SrcPathBits: alt.PathBits,
		PortNum: alt.Port}, AltPortNum: alt.Port, PathMigState: ibv.Rearm}
	if a := c.qp.Query(); a.Timeout != 0 {
		attr.AltTimeout = a.Timeout
	}
	if err := c.qp.Modify(attr, ibv.AttrAltPath|ibv.AttrPathMigState); err != nil {
		m.log.Debug().Err(err).Uint64("conn", c.id).Msg("hybridft: path loading request")
		c.apmRetryAt = now.Add(m.opts.Probe)
		return
	}
	c.alt, c.hasAlt = alt, true
	c.apmRetryAt = now.Add(10 * m.opts.Probe) // the probe runs; PATH_MIG_ERR brings it forward
}

// pathOf is the apm.Path of an address vector: its local port and source path bits.
func pathOf(av ibv.AHAttr) apm.Path { return apm.Path{Port: av.PortNum, PathBits: av.SrcPathBits} }

// apmTick retries failed path loads (and replaces a stale ARMED alternate), gives a recovered home path back by manual migration,
// runs GOARMCI_APM_TEST, and (without APM) gives the home path back through a planned
// re-establishment.
func (m *Manager) apmTick(c *Conn, now time.Time) {
	c.mu.Lock()
	if c.state != stNormal || !c.recoverable || c.qp.State() != ibv.StateRTS {
		c.mu.Unlock()
		return
	}
	if !m.opts.APM {
		home := c.home.Port
		away := c.primary.Port != home && c.outageSince.IsZero()
		c.mu.Unlock()
		if away && c.ft.portsUp(c.nports())&(1<<(home-1)) != 0 && !now.Before(c.rec.retryAt) {
			c.mu.Lock()
			c.rec.giveBack = true
			c.failLocked(false)
			c.mu.Unlock()
		}
		return
	}
	a := c.qp.Query()
	mig := a.PathMigState
	c.primary = pathOf(a.AV)
	// An ARMED alternate the manager did not choose for the current primary (a path load that
	// raced with an automatic migration or with a later choice; or one equal to the primary) is
	// useless and no event will ever come for it: load the right one again, as after PATH_MIG_ERR.
	stale := mig == ibv.Armed && (!c.hasAlt || c.alt != pathOf(a.AltAV) || c.alt == c.primary)
	switch {
	case mig == ibv.Armed && !stale && (c.primary != c.home && c.alt == c.home ||
		m.opts.APMTest > 0 && now.Sub(c.apmForced) >= m.opts.APMTest):
		if err := c.qp.Modify(&ibv.QPAttr{PathMigState: ibv.Migrated}, ibv.AttrPathMigState); err != nil {
			c.mu.Unlock()
			return
		}
		if c.alt == c.home {
			c.stats.giveBacks.Add(1)
		} else {
			c.stats.forced.Add(1)
		}
		c.apmForced = now
		c.primary, c.hasAlt = c.alt, false
		c.mu.Unlock()
		m.armAlt(c, now)
	case (mig != ibv.Armed || stale) && !now.Before(c.apmRetryAt):
		c.mu.Unlock()
		m.armAlt(c, now)
	default:
		c.mu.Unlock()
	}
}
