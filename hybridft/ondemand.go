package hybridft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/goarmci/goarmci/hybridft/udcm"
	"github.com/goarmci/goarmci/ibv"
)

// ErrRejected: the peer refused an on-demand connection (CONN_REJ: it could not create or
// connect its queue pairs, or could not decode ours).
var ErrRejected = errors.New("hybridft: connection rejected by the peer")

// odIdleResends bounds the CONN_REP resends of a passive side nobody waits on (IB CM's
// max_cm_retries is 15): past it the exchange stays pending, a resent CONN_REQ or a local Dial
// revives it.
const odIdleResends = 16

// OnDemand creates RC connections the first time a peer is used, over the Manager's UD connection
// manager ([Vishnu09 §IV.B.2]: the out-of-band UD queue pair created at initialization, one per
// process, whose resources do not grow with the job size). Nothing per peer exists until a peer
// is dialed: a process that talks to a few of N peers holds a few queue pairs, not N (the
// memory argument of [Sridhar08], "RC connections aren't scalable ... on demand connection setup").
// The connections are ordinary Conns of their endpoints: on fault-tolerant endpoints APM and the
// software recovery protect them as they do eagerly connected ones.
//
// Protocol (the InfiniBand CM's REQ/REP/RTU, IBA §12.6, on udcm's Conn message types; Src/Dst are
// process ids, Seq the job id, Inc the dialer's attempt nonce, Payload the sender's CM address
// and one ConnInfo per rail):
//
//	dialer D (Dial)                                passive P (manager goroutine)
//	k = min(rails of D, of P); k queue pairs, INIT
//	CONN_REQ{nonce, infos_D}               ──▶     k queue pairs, Connect(infos_D): RTR, RTS
//	  (resent every Options.Resend while a               (the consumer is not told yet: P
//	   Dial waits)                                        sends nothing on them)
//	                                        ◀──    CONN_REP{nonce, infos_P} (cached; resent
//	Connect(infos_P): RTR, RTS; accept(P, conns)     until CONN_RTU, answers a duplicate REQ)
//	Dial returns the conns
//	CONN_RTU{nonce} (resent on a dup. REP) ──▶     accept(D, conns); a Dial of P for D returns
//
// P's queue pairs are connected when it sends the REP, so D may send as soon as Dial returns;
// P's consumer learns of the connection only at the RTU, so nothing is sent to D's queue pairs
// before they leave INIT (an RC request to a queue pair in INIT is dropped and would cost P its
// retries). A CONN_REJ (resources, undecodable payload) fails the attempt on both sides; a later
// Dial starts over. A CONN_REP of an attempt the dialer no longer has (failed, or an OnDemand
// closed and opened again) is answered with a CONN_REJ, so the passive side closes the queue
// pairs it holds for it. P resends its REP at most 16 times while no Dial of D waits on P (the
// attempt stays: D's resent REQ is answered from the cache). The CM sends every message on every
// rail; the copies of a message are answered once (a duplicate within Options.Resend/2 of the
// last send is not answered), so the message count grows linearly with the rails.
//
// Simultaneous dials (both sides dial each other before either REQ arrives): the lower process
// id's REQ wins. The higher side closes its pending queue pairs, accepts the lower's REQ, and
// its waiting Dial returns the accepted connections; the lower side ignores the higher's REQ and
// resends its own at once. So each pair of processes has exactly one queue pair per rail, and
// accept is called exactly once per connected peer on each side, whichever side initiated,
// before any Dial of that peer returns. Messages of another job or for another process, stale
// nonces and undecodable payloads are ignored (OnDemandStats.Ignored). A Dial whose context
// ends leaves its pending queue pairs in place (the passive side may have connected to them):
// a later Dial resumes the same attempt. Connections are never torn down by the protocol: a
// process that re-opens its OnDemand (new attempt nonces) cannot re-dial a peer that still holds
// a connection to it (its REQs are stale there).
//
// The protocol is the pure core odCore (odcore.go: events in, actions out, time as an argument;
// its transitions are scripted in odcore_test.go); OnDemand is its driver: it holds the lock
// around the core, creates, connects and closes the queue pairs, sends on the CM, runs accept
// and wakes the Dials.
type OnDemand struct {
	m      *Manager
	eps    []*Endpoint
	self   uint32
	accept func(peer uint32, conns []*Conn)
	addr   []byte // Addr()

	mu    sync.Mutex
	core  *odCore              // the protocol (odcore.go)
	links map[uint32]*odLink   // the driver's side of each of core's peers
	drop  func(*udcm.Msg) bool // tests: drop this incoming message
}

// odLink is what the driver holds for one of the core's peers: the queue pairs and the Dials'
// rendezvous.
type odLink struct {
	peer   uint32
	gen    uint64 // the core's odPeer.gen
	conns  []*Conn
	handed bool          // the consumer got the connections (accept, Dial or Connected)
	done   chan struct{} // closed when established (after accept returned) or failed
	err    error
}

// OnDemandStats counts an OnDemand's protocol events.
type OnDemandStats struct {
	Dialed     int64 // peers connected by our Dial (CONN_REP received)
	Accepted   int64 // peers connected by their dial (CONN_RTU received)
	Superseded int64 // our dials abandoned for a lower id's simultaneous CONN_REQ
	Resent     int64 // CONN_REQ/CONN_REP resent on the timer
	Duplicates int64 // duplicate CONN_REQ/CONN_REP answered from the cache (not the rail copies)
	Ignored    int64 // messages of another job or process, stale, or undecodable
	Rejected   int64 // CONN_REJ sent or received
}

// OnDemand opens the on-demand connection setup of process self in job job over the manager's
// UD connection manager: connections to a peer use one endpoint per rail, eps[i] for rail i (at
// most 255; endpoints of this manager, fault tolerant, or pass-through ones from NewEndpoint).
// accept, if not nil, is called on the manager's protocol goroutine once per connected peer with
// its connections (one per rail, k = min of both sides' rail counts), whichever side dialed,
// before any Dial of that peer returns; it must not block nor call the OnDemand. A manager has
// at most one OnDemand at a time (ibv.ErrBusy); ErrClosed after Manager.Close.
func (m *Manager) OnDemand(eps []*Endpoint, self, job uint32, accept func(peer uint32, conns []*Conn)) (*OnDemand, error) {
	if len(eps) == 0 || len(eps) > 255 {
		return nil, fmt.Errorf("hybridft: on-demand: %w: %d endpoints", ibv.ErrInvalidArgument, len(eps))
	}
	for i, ep := range eps {
		if ep == nil || ep.ft != nil && ep.ft.m != m {
			return nil, fmt.Errorf("hybridft: on-demand: %w: endpoint %d is nil or of another manager", ibv.ErrInvalidArgument, i)
		}
	}
	if m.closed.Load() {
		return nil, ErrClosed
	}
	d := &OnDemand{m: m, eps: append([]*Endpoint(nil), eps...), self: self, accept: accept, links: map[uint32]*odLink{}}
	d.addr = marshalODAddr(uint8(len(eps)), m.cm.QPN(), m.cm.Addrs())
	d.core = newODCore(self, job, len(eps), d.addr, m.opts.Resend)
	if !m.od.CompareAndSwap(nil, d) {
		return nil, fmt.Errorf("hybridft: on-demand: %w: the manager has one already", ibv.ErrBusy)
	}
	return d, nil
}

// Addr is what a peer needs to Dial this process: the connection manager's addresses (one per
// rail) and queue pair number and the rail count, a few dozen bytes independent of the job size
// (exchange it through the bootstrap's all-gather).
func (d *OnDemand) Addr() []byte { return append([]byte(nil), d.addr...) }

// Stats returns the protocol counters.
func (d *OnDemand) Stats() OnDemandStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.core.stats
}

// Dial returns the connections to peer (one per rail, rail i on eps[i]), creating them on first
// use through the protocol of the type doc; addr is the peer's Addr (read only on the first
// Dial). It is idempotent and safe for concurrent callers: later and concurrent Dials of the peer
// return the same connections, a Dial during the peer's own dial waits for that. The connections
// belong to the caller (Close them before the manager's devices); the slice is a copy. Errors:
// ibv.ErrInvalidArgument (peer is self), ErrMalformed (addr), ErrRejected, ErrClosed, the
// context's error (the attempt stays pending and a later Dial resumes it), those of creating
// queue pairs.
func (d *OnDemand) Dial(ctx context.Context, peer uint32, addr []byte) ([]*Conn, error) {
	if peer == d.self {
		return nil, fmt.Errorf("hybridft: dial: %w: peer %d is this process", ibv.ErrInvalidArgument, peer)
	}
	d.mu.Lock()
	if d.core.closed {
		d.mu.Unlock()
		return nil, ErrClosed
	}
	ev := odEvent{Kind: odDial, Peer: peer, Nonce: rand.Uint32() | 1}
	if d.core.peers[peer] == nil {
		a, err := unmarshalODAddr(addr)
		if err != nil {
			d.mu.Unlock()
			return nil, fmt.Errorf("hybridft: dial %d: %w", peer, err)
		}
		ev.Addr = a
	}
	fin := d.step(ev, time.Now())
	l := d.links[peer]
	if l == nil || d.core.peers[peer] == nil { // creating its queue pairs failed
		d.mu.Unlock()
		d.finish(fin)
		for _, f := range fin {
			if f.err != nil {
				return nil, f.err
			}
		}
		return nil, fmt.Errorf("hybridft: dial %d: %w", peer, ErrClosed)
	}
	d.mu.Unlock()
	d.finish(fin)
	var err error
	select {
	case <-l.done:
	case <-ctx.Done():
		err = fmt.Errorf("hybridft: dial %d: %w", peer, ctx.Err())
	case <-d.m.ctx.Done():
		err = fmt.Errorf("hybridft: dial %d: %w", peer, ErrClosed)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.core.Step(odEvent{Kind: odUnwait, Peer: peer, Gen: l.gen}, time.Now())
	select {
	case <-l.done: // established or failed meanwhile: that is the answer
		if l.err != nil {
			return nil, l.err
		}
		l.handed = true
		return append([]*Conn(nil), l.conns...), nil
	default:
	}
	return nil, err
}

// Connected returns the connections to peer if they are established (accept has run), else
// nil; it never starts a connection.
func (d *OnDemand) Connected(peer uint32) []*Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, l := d.core.peers[peer], d.links[peer]
	if p == nil || p.role != odDone || l == nil {
		return nil
	}
	select {
	case <-l.done:
		l.handed = true
		return append([]*Conn(nil), l.conns...)
	default:
		return nil
	}
}

// Close ends the on-demand setup: pending attempts fail with ErrClosed and their queue pairs are
// closed, as are established connections never handed to the consumer (a peer dialed us, accept
// is nil and no Dial or Connected asked for them); those handed out belong to the consumer and
// stay. Messages that arrive later are dropped. Close the OnDemand before its Manager.
func (d *OnDemand) Close() error {
	d.mu.Lock()
	if d.core.closed {
		d.mu.Unlock()
		return nil
	}
	fin := d.step(odEvent{Kind: odClose}, time.Now())
	for id, l := range d.links {
		if p := d.core.peers[id]; p != nil && p.role == odDone && !l.handed {
			closeConns(l.conns)
			l.conns = nil
		}
	}
	d.mu.Unlock()
	d.m.od.CompareAndSwap(d, nil)
	for _, l := range fin {
		close(l.done)
	}
	return nil
}

// step feeds ev to the core and executes its actions, feeding the results of queue pair actions
// back (d.mu held). It returns the links whose attempt ended: the caller passes them to finish
// after unlocking.
func (d *OnDemand) step(ev odEvent, now time.Time) []*odLink {
	var fin []*odLink
	acts := d.core.Step(ev, now)
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		l := d.links[a.Peer]
		if l == nil && a.Kind != odSend {
			l = &odLink{peer: a.Peer, done: make(chan struct{})}
			if p := d.core.peers[a.Peer]; p != nil {
				l.gen = p.gen
			}
			d.links[a.Peer] = l
		}
		var res []odAction
		switch a.Kind {
		case odSend:
			if err := d.m.cm.Send(a.To, a.ToQPN, &a.Msg); err != nil {
				d.m.log.Debug().Err(err).Uint32("peer", a.Peer).Stringer("type", a.Msg.Type).Msg("hybridft: on-demand send")
			}
		case odCreate:
			conns, local, err := d.create(a.K, a.Remote)
			l.conns = conns
			if err != nil && a.Remote != nil {
				d.m.log.Debug().Err(err).Uint32("peer", a.Peer).Msg("hybridft: on-demand accept")
			}
			res = d.core.Step(odEvent{Kind: odCreated, Peer: a.Peer, Local: local, Err: err}, now)
		case odConnect:
			var err error
			for i := 0; err == nil && i < len(a.Remote); i++ {
				lg := d.m.log.With().Uint32("peer", a.Peer).Int("rail", i).Logger()
				err = l.conns[i].ConnectWith(a.Remote[i], ConnectOptions{Log: &lg})
			}
			if err == nil {
				closeConns(l.conns[len(a.Remote):])
				l.conns = l.conns[:len(a.Remote):len(a.Remote)]
			}
			res = d.core.Step(odEvent{Kind: odConnected, Peer: a.Peer, Err: err}, now)
		case odCloseQPs:
			closeConns(l.conns)
			l.conns = nil
		case odEstablished:
			l.handed = d.accept != nil || a.Waited
			fin = append(fin, l)
		case odFailed:
			l.conns, l.err = nil, a.Err
			delete(d.links, a.Peer)
			fin = append(fin, l)
		}
		acts = append(res, acts...)
	}
	return fin
}

// create makes k queue pairs, rails 0..k-1, connecting each to remote[i] if remote is set; on an
// error it returns those it made (the core closes them) and no ConnInfos.
func (d *OnDemand) create(k int, remote []ConnInfo) ([]*Conn, []ConnInfo, error) {
	conns := make([]*Conn, 0, k)
	for i, ep := range d.eps[:k] {
		c, err := ep.NewConn()
		if err == nil {
			conns = append(conns, c)
			if remote != nil {
				err = c.Connect(remote[i])
			}
		}
		if err != nil {
			return conns, nil, err
		}
	}
	infos := make([]ConnInfo, len(conns))
	for i, c := range conns {
		infos[i] = c.Local()
	}
	return conns, infos, nil
}

// finish runs after attempts ended (no lock held): accept on success, then wake the Dials.
func (d *OnDemand) finish(fin []*odLink) {
	for _, l := range fin {
		if l.err == nil && d.accept != nil {
			d.accept(l.peer, append([]*Conn(nil), l.conns...))
		}
		close(l.done)
	}
}

// onDemandMsg hands a Conn-type message to the OnDemand (protocol goroutine).
func (m *Manager) onDemandMsg(msg *udcm.Msg, now time.Time) {
	if d := m.od.Load(); d != nil {
		d.handle(msg, now)
	}
}

// onDemandTick runs the OnDemand's resend timers (protocol goroutine).
func (m *Manager) onDemandTick(now time.Time) {
	if d := m.od.Load(); d != nil {
		d.mu.Lock()
		fin := d.step(odEvent{Kind: odTick}, now)
		d.mu.Unlock()
		d.finish(fin)
	}
}

func (d *OnDemand) handle(msg *udcm.Msg, now time.Time) {
	d.mu.Lock()
	if d.core.forUs(msg) && (d.core.closed || d.drop != nil && d.drop(msg)) {
		d.mu.Unlock()
		return
	}
	fin := d.step(odEvent{Kind: odMsg, Msg: msg}, now)
	d.mu.Unlock()
	d.finish(fin)
}

func closeConns(cs []*Conn) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// ---- wire formats ----

const odAddrV1 = 1

// odAddr is a process's on-demand address: its CM's addresses and queue pair number, its rails.
type odAddr struct {
	rails uint8
	qpn   uint32
	cm    []string
}

// marshalODAddr: version, rails, CM QPN (4), address count, addresses (length-prefixed).
func marshalODAddr(rails uint8, qpn uint32, cm []string) []byte {
	b := []byte{odAddrV1, rails}
	b = binary.LittleEndian.AppendUint32(b, qpn)
	b = append(b, byte(min(len(cm), 255)))
	for _, a := range cm[:min(len(cm), 255)] {
		b = appendStr(b, clip(a))
	}
	return b
}

func unmarshalODAddr(b []byte) (odAddr, error) {
	if len(b) < 7 || b[0] != odAddrV1 {
		return odAddr{}, fmt.Errorf("%w: on-demand address of %d bytes", ErrMalformed, len(b))
	}
	r := reader{b: b[2:]}
	a := odAddr{rails: b[1], qpn: r.u32()}
	n := int(r.u8())
	for i := 0; i < n && !r.bad; i++ {
		a.cm = append(a.cm, r.str())
	}
	if r.bad || len(r.b) != 0 || a.rails == 0 || len(a.cm) == 0 || a.qpn>>24 != 0 {
		return odAddr{}, fmt.Errorf("%w: on-demand address of %d bytes", ErrMalformed, len(b))
	}
	return a, nil
}

// Flags of a rail's ConnInfo in the payload: its device paths, or its CM addresses and queue
// pair number, are those of rail 0 and left out (the rails of one device share them, so the
// payload grows linearly with the rail count, not quadratically).
const (
	odSamePaths = 1
	odSameCM    = 2
)

// marshalODPayload: the address (2-byte length), the rail count, then per rail a flags byte and
// the ConnInfo (2-byte length). Errors wrap udcm.ErrMalformed when it exceeds udcm.MaxPayload
// (about 60 rails of one device with IPv4 tcp addresses).
func marshalODPayload(addr []byte, infos []ConnInfo) ([]byte, error) {
	b := binary.LittleEndian.AppendUint16(nil, uint16(len(addr)))
	b = append(b, addr...)
	b = append(b, byte(min(len(infos), 255)))
	for i, ci := range infos[:min(len(infos), 255)] {
		var fl byte
		if i > 0 {
			f := &infos[0]
			if len(ci.Paths) > 0 && slices.Equal(ci.Paths, f.Paths) {
				ci.Paths, fl = nil, fl|odSamePaths
			}
			if len(ci.CM) > 0 && slices.Equal(ci.CM, f.CM) && ci.CMQPN == f.CMQPN {
				ci.CM, ci.CMQPN, fl = nil, 0, fl|odSameCM
			}
		}
		m := ci.Marshal()
		b = append(b, fl)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	if len(b) > udcm.MaxPayload {
		return nil, fmt.Errorf("hybridft: %w: %d rails need %d bytes of payload, at most %d", udcm.ErrMalformed, len(infos),
			len(b), udcm.MaxPayload)
	}
	return b, nil
}

func unmarshalODPayload(b []byte) (odAddr, []ConnInfo, error) {
	bad := fmt.Errorf("%w: on-demand payload of %d bytes", ErrMalformed, len(b))
	r := reader{b: b}
	a, err := unmarshalODAddr(r.n(int(r.u16())))
	if err != nil || r.bad {
		return odAddr{}, nil, bad
	}
	n := int(r.u8())
	infos := make([]ConnInfo, 0, n)
	for i := 0; i < n && !r.bad; i++ {
		fl := r.u8()
		ci, err := UnmarshalConnInfo(r.n(int(r.u16())))
		if err != nil || fl&^(odSamePaths|odSameCM) != 0 || i == 0 && fl != 0 {
			return odAddr{}, nil, bad
		}
		if fl&odSamePaths != 0 {
			if len(ci.Paths) != 0 {
				return odAddr{}, nil, bad
			}
			ci.Paths = slices.Clone(infos[0].Paths)
		}
		if fl&odSameCM != 0 {
			if len(ci.CM) != 0 || ci.CMQPN != 0 {
				return odAddr{}, nil, bad
			}
			ci.CM, ci.CMQPN = slices.Clone(infos[0].CM), infos[0].CMQPN
		}
		infos = append(infos, ci)
	}
	if r.bad || len(r.b) != 0 {
		return odAddr{}, nil, bad
	}
	return a, infos, nil
}
