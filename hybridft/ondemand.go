package hybridft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
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
// manager (seed 003 §IV.B.2: the out-of-band UD queue pair created at initialization, one per
// process, whose resources do not grow with the job size). Nothing per peer exists until a peer
// is dialed: a process that talks to a few of N peers holds a few queue pairs, not N (the
// memory argument of seed 004, "RC connections aren't scalable ... on demand connection setup").
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
type OnDemand struct {
	m         *Manager
	eps       []*Endpoint
	self, job uint32
	accept    func(peer uint32, conns []*Conn)
	addr      []byte // Addr()

	mu      sync.Mutex
	peers   map[uint32]*odPeer // every peer dialed or accepted
	pending map[uint32]*odPeer // those not established yet (timers)
	closed  bool
	drop    func(*udcm.Msg) bool // tests: drop this incoming message

	stats struct{ dialed, accepted, superseded, resent, dups, ignored, rejected atomic.Int64 }
}

type odRole uint8

const (
	odDialing   odRole = iota + 1 // our CONN_REQ is out, our queue pairs in INIT
	odAccepting                   // their CONN_REQ accepted, our CONN_REP out, awaiting CONN_RTU
	odDone                        // established
)

// odPeer is the connection state of one peer.
type odPeer struct {
	id       uint32
	role     odRole
	dialer   bool   // established by our Dial (else accepted)
	nonce    uint32 // the dialer's attempt
	conns    []*Conn
	to       []string // the peer's CM addresses
	toQPN    uint32
	msg      udcm.Msg // to resend: CONN_REQ (dialing), CONN_REP (accepting, accepted), CONN_RTU (dialed)
	lastSend time.Time
	resends  int
	waiters  int
	handed   bool          // the consumer got the connections (accept, Dial or Connected)
	done     chan struct{} // closed when established (after accept returned) or failed
	err      error
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
	d := &OnDemand{m: m, eps: append([]*Endpoint(nil), eps...), self: self, job: job, accept: accept,
		peers: map[uint32]*odPeer{}, pending: map[uint32]*odPeer{}}
	d.addr = marshalODAddr(uint8(len(eps)), m.cm.QPN(), m.cm.Addrs())
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
	s := &d.stats
	return OnDemandStats{Dialed: s.dialed.Load(), Accepted: s.accepted.Load(), Superseded: s.superseded.Load(),
		Resent: s.resent.Load(), Duplicates: s.dups.Load(), Ignored: s.ignored.Load(), Rejected: s.rejected.Load()}
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
	if d.closed {
		d.mu.Unlock()
		return nil, ErrClosed
	}
	now := time.Now()
	p := d.peers[peer]
	switch {
	case p == nil:
		a, err := unmarshalODAddr(addr)
		if err != nil {
			d.mu.Unlock()
			return nil, fmt.Errorf("hybridft: dial %d: %w", peer, err)
		}
		if p, err = d.startDial(peer, a, now); err != nil {
			d.mu.Unlock()
			return nil, fmt.Errorf("hybridft: dial %d: %w", peer, err)
		}
	case p.role == odDialing && p.waiters == 0:
		d.send(p, now) // resume an attempt nobody waited for
	}
	p.waiters++
	d.mu.Unlock()
	var err error
	select {
	case <-p.done:
	case <-ctx.Done():
		err = fmt.Errorf("hybridft: dial %d: %w", peer, ctx.Err())
	case <-d.m.ctx.Done():
		err = fmt.Errorf("hybridft: dial %d: %w", peer, ErrClosed)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p.waiters--
	select {
	case <-p.done: // established or failed meanwhile: that is the answer
		if p.err != nil {
			return nil, p.err
		}
		p.handed = true
		return append([]*Conn(nil), p.conns...), nil
	default:
	}
	return nil, err
}

// Connected returns the connections to peer if they are established (accept has run), else
// nil; it never starts a connection.
func (d *OnDemand) Connected(peer uint32) []*Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.peers[peer]
	if p == nil || p.role != odDone {
		return nil
	}
	select {
	case <-p.done:
		p.handed = true
		return append([]*Conn(nil), p.conns...)
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
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	var fin []*odPeer
	for id, p := range d.pending {
		closeConns(p.conns)
		p.conns, p.err = nil, ErrClosed
		delete(d.peers, id)
		fin = append(fin, p)
	}
	clear(d.pending)
	for _, p := range d.peers {
		if p.role == odDone && !p.handed {
			closeConns(p.conns)
			p.conns = nil
		}
	}
	d.mu.Unlock()
	d.m.od.CompareAndSwap(d, nil)
	for _, p := range fin {
		close(p.done)
	}
	return nil
}

// startDial creates the queue pairs of an attempt and sends its CONN_REQ (d.mu held).
func (d *OnDemand) startDial(peer uint32, a odAddr, now time.Time) (*odPeer, error) {
	k := min(len(d.eps), int(a.rails))
	conns := make([]*Conn, 0, k)
	for _, ep := range d.eps[:k] {
		c, err := ep.NewConn()
		if err != nil {
			closeConns(conns)
			return nil, err
		}
		conns = append(conns, c)
	}
	pl, err := d.payload(conns)
	if err != nil {
		closeConns(conns)
		return nil, err
	}
	nonce := rand.Uint32() | 1
	p := &odPeer{id: peer, role: odDialing, nonce: nonce, conns: conns, to: a.cm, toQPN: a.qpn, done: make(chan struct{}),
		msg: udcm.Msg{Type: udcm.ConnREQ, Src: uint64(d.self), Dst: uint64(peer), Seq: d.job, Inc: nonce, Payload: pl}}
	d.peers[peer], d.pending[peer] = p, p
	d.send(p, now)
	return p, nil
}

// send (re)sends p's current message (d.mu held).
func (d *OnDemand) send(p *odPeer, now time.Time) {
	p.lastSend = now
	if err := d.m.cm.Send(p.to, p.toQPN, &p.msg); err != nil {
		d.m.log.Debug().Err(err).Uint32("peer", p.id).Stringer("type", p.msg.Type).Msg("hybridft: on-demand send")
	}
}

// answer resends p's message in answer to a duplicate, unless it went out less than Resend/2
// ago: the CM sends every message on every rail, so each arrives once per rail, and answering
// each copy would multiply the messages by the rail count at every step (d.mu held).
func (d *OnDemand) answer(p *odPeer, now time.Time, dup bool) {
	if now.Sub(p.lastSend) < d.m.opts.Resend/2 {
		return
	}
	if dup {
		d.stats.dups.Add(1)
	}
	d.send(p, now)
}

func (d *OnDemand) reply(p *odPeer, t udcm.Type, status uint8) {
	msg := udcm.Msg{Type: t, Status: status, Src: uint64(d.self), Dst: uint64(p.id), Seq: d.job, Inc: p.nonce}
	if err := d.m.cm.Send(p.to, p.toQPN, &msg); err != nil {
		d.m.log.Debug().Err(err).Uint32("peer", p.id).Stringer("type", t).Msg("hybridft: on-demand send")
	}
}

// fail ends p's attempt with err: its queue pairs are closed, the peer forgotten (d.mu held).
// The caller closes p.done (finish) after unlocking.
func (d *OnDemand) fail(p *odPeer, err error) *odPeer {
	closeConns(p.conns)
	p.conns, p.err = nil, err
	delete(d.peers, p.id)
	delete(d.pending, p.id)
	return p
}

// finish runs after an attempt ended (no lock held): accept on success, then wake the Dials.
func (d *OnDemand) finish(p *odPeer) {
	if p.err == nil && d.accept != nil {
		d.accept(p.id, append([]*Conn(nil), p.conns...))
	}
	close(p.done)
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
		d.tick(now)
	}
}

func (d *OnDemand) tick(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.pending {
		if now.Sub(p.lastSend) < d.m.opts.Resend {
			continue
		}
		if p.role == odDialing && p.waiters > 0 || p.role == odAccepting && (p.waiters > 0 || p.resends < odIdleResends) {
			p.resends++
			d.stats.resent.Add(1)
			d.send(p, now)
		}
	}
}

func (d *OnDemand) handle(msg *udcm.Msg, now time.Time) {
	if msg.Seq != d.job || msg.Dst != uint64(d.self) || msg.Src > math.MaxUint32 || msg.Src == uint64(d.self) {
		d.stats.ignored.Add(1)
		return
	}
	peer := uint32(msg.Src)
	d.mu.Lock()
	if d.closed || d.drop != nil && d.drop(msg) {
		d.mu.Unlock()
		return
	}
	var fin *odPeer
	switch msg.Type {
	case udcm.ConnREQ:
		fin = d.onREQ(peer, msg, now)
	case udcm.ConnREP:
		fin = d.onREP(peer, msg, now)
	case udcm.ConnRTU:
		if p := d.peers[peer]; p != nil && p.role == odAccepting && p.nonce == msg.Inc {
			p.role = odDone
			delete(d.pending, peer)
			d.stats.accepted.Add(1)
			fin = p
		} else {
			d.stats.ignored.Add(1) // stale, or a duplicate RTU
		}
	case udcm.ConnREJ:
		if p := d.peers[peer]; p != nil && p.role != odDone && p.nonce == msg.Inc {
			d.stats.rejected.Add(1)
			fin = d.fail(p, fmt.Errorf("hybridft: peer %d: %w (status %d)", peer, ErrRejected, msg.Status))
		} else {
			d.stats.ignored.Add(1)
		}
	}
	if fin != nil && fin.err == nil {
		fin.handed = d.accept != nil || fin.waiters > 0
	}
	d.mu.Unlock()
	if fin != nil {
		d.finish(fin)
	}
}

// onREQ is the passive side and the tie-break of simultaneous dials (d.mu held).
func (d *OnDemand) onREQ(peer uint32, msg *udcm.Msg, now time.Time) *odPeer {
	a, infos, err := unmarshalODPayload(msg.Payload)
	if err != nil {
		d.stats.ignored.Add(1) // no address to answer to
		return nil
	}
	if len(infos) == 0 {
		d.stats.rejected.Add(1)
		d.reply(&odPeer{id: peer, nonce: msg.Inc, to: a.cm, toQPN: a.qpn}, udcm.ConnREJ, udcm.RejMalformed)
		return nil
	}
	p := d.peers[peer]
	switch {
	case p == nil:
		p = &odPeer{id: peer, done: make(chan struct{})}
		d.peers[peer] = p
	case p.role == odDialing && d.self < peer:
		d.answer(p, now, false) // our REQ wins: make sure the peer has it (our Dial may be gone)
		return nil
	case p.role == odDialing:
		d.stats.superseded.Add(1) // theirs wins: our Dials get the accepted connections
		closeConns(p.conns)
		p.conns = nil
	case p.role == odAccepting && p.nonce != msg.Inc:
		closeConns(p.conns) // a new attempt replaces one never confirmed
		p.conns = nil
	case p.nonce == msg.Inc && (p.role == odAccepting || !p.dialer):
		d.answer(p, now, true) // our REP was lost (or crossed the RTU)
		return nil
	default:
		d.stats.ignored.Add(1) // stale: connected already
		return nil
	}
	p.role, p.dialer, p.nonce, p.to, p.toQPN, p.resends = odAccepting, false, msg.Inc, a.cm, a.qpn, 0
	k := min(len(infos), len(d.eps))
	conns := make([]*Conn, 0, k)
	for i, ep := range d.eps[:k] {
		c, err := ep.NewConn()
		if err == nil {
			conns = append(conns, c)
			err = c.Connect(infos[i])
		}
		if err != nil {
			p.conns = conns
			d.stats.rejected.Add(1)
			d.reply(p, udcm.ConnREJ, udcm.RejResources)
			d.m.log.Debug().Err(err).Uint32("peer", peer).Msg("hybridft: on-demand accept")
			return d.fail(p, fmt.Errorf("hybridft: accept from %d: %w", peer, err))
		}
	}
	p.conns = conns
	pl, err := d.payload(conns)
	if err != nil {
		d.stats.rejected.Add(1)
		d.reply(p, udcm.ConnREJ, udcm.RejResources)
		return d.fail(p, fmt.Errorf("hybridft: accept from %d: %w", peer, err))
	}
	p.msg = udcm.Msg{Type: udcm.ConnREP, Src: uint64(d.self), Dst: uint64(peer), Seq: d.job, Inc: msg.Inc, Payload: pl}
	d.pending[peer] = p
	d.send(p, now)
	return nil
}

// onREP completes our dial (d.mu held).
func (d *OnDemand) onREP(peer uint32, msg *udcm.Msg, now time.Time) *odPeer {
	p := d.peers[peer]
	switch {
	case p == nil || p.nonce != msg.Inc:
		// a REP of an attempt we abandoned (failed, closed, an earlier OnDemand): reject it, so
		// the peer closes the queue pairs it holds for it (a REJ only ends the attempt of its
		// nonce, which we will never complete)
		d.stats.ignored.Add(1)
		if a, _, err := unmarshalODPayload(msg.Payload); err == nil {
			d.stats.rejected.Add(1)
			d.reply(&odPeer{id: peer, nonce: msg.Inc, to: a.cm, toQPN: a.qpn}, udcm.ConnREJ, udcm.RejStale)
		}
		return nil
	case p.role == odDone && p.dialer:
		d.answer(p, now, true) // our RTU was lost
		return nil
	case p.role != odDialing:
		d.stats.ignored.Add(1)
		return nil
	}
	_, infos, err := unmarshalODPayload(msg.Payload)
	k := min(len(infos), len(p.conns))
	if err == nil && k == 0 {
		err = fmt.Errorf("%w: no rails", ErrMalformed)
	}
	for i := 0; err == nil && i < k; i++ {
		err = p.conns[i].Connect(infos[i])
	}
	if err != nil {
		d.stats.rejected.Add(1)
		d.reply(p, udcm.ConnREJ, udcm.RejMalformed)
		return d.fail(p, fmt.Errorf("hybridft: dial %d: %w", peer, err))
	}
	closeConns(p.conns[k:])
	p.conns = p.conns[:k:k]
	p.role, p.dialer = odDone, true
	delete(d.pending, peer)
	d.stats.dialed.Add(1)
	p.msg = udcm.Msg{Type: udcm.ConnRTU, Src: uint64(d.self), Dst: uint64(peer), Seq: d.job, Inc: p.nonce}
	d.send(p, now)
	return p
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

// payload is the Payload of our CONN_REQ/CONN_REP (marshalODPayload of our address and our
// queue pairs' ConnInfos).
func (d *OnDemand) payload(conns []*Conn) ([]byte, error) {
	infos := make([]ConnInfo, len(conns))
	for i, c := range conns {
		infos[i] = c.Local()
	}
	return marshalODPayload(d.addr, infos)
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
