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

// ErrRejected: the peer refused an on-demand connection (CONN_REJ: its admission refused it, it
// could not create or connect its queue pairs, or could not decode ours).
var ErrRejected = errors.New("hybridft: connection rejected by the peer")

// ErrNotConnected: OnDemand.Disconnect of a peer without an established connection (never
// dialed, not established yet, or already disconnected).
var ErrNotConnected = errors.New("hybridft: not connected to the peer")

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
// attempt stays: D's resent REQ is answered from the cache). A REQ of another attempt while P
// holds one accepted but not confirmed is answered with that REP too, never replaces it: P cannot
// tell a late copy of a REQ D abandoned from a REQ that abandons P's attempt, and D confirms the
// attempt P holds (RTU) or rejects it (REJ), after which its resent REQ is accepted. A late copy
// of the REQ of an attempt that ended at P (failed, disconnected) within 16 resend periods is
// ignored. The CM sends every message on every rail; the copies of a message are answered once
// (a duplicate within Options.Resend/2 of the last send is not answered), so the message count
// grows linearly with the rails.
//
// Simultaneous dials (both sides dial each other before either REQ arrives): the lower process
// id's REQ wins. The higher side closes its pending queue pairs, accepts the lower's REQ, and
// its waiting Dial returns the accepted connections; the lower side ignores the higher's REQ and
// resends its own at once. So each pair of processes has exactly one queue pair per rail, and
// accept is called exactly once per connected peer on each side, whichever side initiated,
// before any Dial of that peer returns. Messages of another job or for another process, stale
// nonces and undecodable payloads are ignored (OnDemandStats.Ignored). A Dial whose context
// ends leaves its pending queue pairs in place (the passive side may have connected to them):
// a later Dial resumes the same attempt.
//
// Admission ([Takagi15 §3.4]: a rank bounds its RC connections, the target refuses past its
// bound): a CONN_REQ of a peer P holds nothing for is put to the consumer's admit (SetAdmit)
// once per attempt; a refusal answers CONN_REJ (udcm.RejRefused) and creates nothing, and the
// dialer's Dial fails with ErrRejected. A REQ that meets P's own dial of D (simultaneous dials)
// is not put to admit: P's consumer asked for that connection.
//
// Teardown (the IBA CM's DREQ/DREP, §12.6, on CONN_DREQ/CONN_DREP; Inc is the connection's
// attempt nonce, the same at both ends; the DREQ carries the sender's address):
//
//	closer C (Disconnect, its use drained)         other end O (manager goroutine)
//	CONN_DREQ{nonce}                       ──▶     release(C, conns, done): O's consumer drains
//	  (resent every Options.Resend until              and closes the conns, then calls done
//	   the DREP, for at most the partition
//	   timeout: then ErrPartition)
//	                                        ◀──    CONN_DREP{nonce}; O forgets C
//	C forgets O; Disconnect returns nil
//	(C's consumer closes its conns)
//
// After that either side's Dial is a new attempt: new queue pairs, a new nonce. A DREQ of a
// connection O does not have (its DREP was lost and C resent the DREQ; or C's connection is older
// than O's) is answered at once and changes nothing. Both ends disconnecting at once: a DREQ that
// meets the receiver's own pending DREQ is answered at once and the peer forgotten, so both
// Disconnects return nil; a Disconnect while the consumer releases the peer's DREQ answers that
// DREQ at once. A CONN_REQ of a peer being disconnected is ignored (that peer forgot the
// connection, its Dial resends the REQ after the disconnect ends), and a local Dial of a peer
// being disconnected waits for the disconnect to end, then dials anew; so a Disconnect racing a
// Dial of the other end ends with both ends forgotten (the Dial had returned the old
// connections, which its end's release then takes back) or both connected anew, never one end
// of each. Only a Disconnect that fails (its context, ErrPartition), or an OnDemand closed and
// opened again, may leave the other end holding its end of a connection; that end's own
// Disconnect is then answered at once, and a
// new CONN_REQ of the end that forgot is answered with a probe (a CONN_DREQ with
// udcm.DREQProbe: answered with a CONN_DREP only by a peer that does not hold the connection),
// whose answer makes the holder release its end as if asked; the resent REQ is then accepted.
// (A late copy of an earlier REQ is probed too; the peer, holding the connection, ignores it.)
//
// The consumer sees each peer's connections in order, so it can keep its own table of them:
// accept(conns) (or the Dial that returns them) comes before any release of conns and before a
// Disconnect can tear them down; the call of release(conns)'s done, or the CONN_DREP that ends a
// Disconnect of conns, comes before the accept of the peer's next connections (which may run
// before that Disconnect has returned: tell connections apart by identity).
//
// The protocol is the pure core odCore (odcore.go: events in, actions out, time as an argument;
// its transitions are scripted in odcore_test.go and odcore_admit_disconnect_test.go); OnDemand
// is its driver: it holds the lock around the core, creates, connects and closes the queue
// pairs, sends on the CM, asks admit, runs accept and release and wakes the Dials and
// Disconnects.
type OnDemand struct {
	m      *Manager
	eps    []*Endpoint
	self   uint32
	accept func(peer uint32, conns []*Conn)
	addr   []byte // Addr()

	mu      sync.Mutex
	core    *odCore            // the protocol (odcore.go)
	links   map[uint32]*odLink // the driver's side of each of core's peers
	admit   func(peer uint32) bool
	release func(peer uint32, conns []*Conn, done func())
	drop    func(*udcm.Msg) bool // tests: drop this incoming message
}

// odLink is what the driver holds for one of the core's peers: the queue pairs and the Dials'
// rendezvous.
type odLink struct {
	peer    uint32
	gen     uint64 // the core's odPeer.gen
	conns   []*Conn
	handed  bool          // the consumer got the connections (accept, Dial or Connected)
	done    chan struct{} // closed when established (after accept returned) or failed
	err     error
	redial  bool          // failed: the attempt was the peer's, its Dials start their own
	gone    chan struct{} // closed when the peer is forgotten after a disconnect, or it ended with goneErr
	goneErr error
}

// odAfter is what step leaves to do once d.mu is released: the calls into the consumer and the
// wake-ups that follow them.
type odAfter struct {
	fin          []*odLink  // attempts ended: accept, then wake the Dials
	admit        []udcm.Msg // CONN_REQs to put to admitFn, answered by odAdmitted
	admitFn      func(peer uint32) bool
	release      []odReleaseCall // connections to hand to release
	notConnected bool            // a Disconnect found no established connection
}

// odReleaseCall is one call of the consumer's release.
type odReleaseCall struct {
	fn    func(peer uint32, conns []*Conn, done func())
	peer  uint32
	conns []*Conn
	done  func()
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
	Refused    int64 // CONN_REQs refused by admit (SetAdmit)
	// Disconnected counts connections torn down by CONN_DREQ/DREP, whichever end asked.
	Disconnected int64
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
	d.core = newODCore(self, job, len(eps), d.addr, m.opts.Resend, m.opts.PartitionTimeout)
	if !m.od.CompareAndSwap(nil, d) {
		return nil, fmt.Errorf("hybridft: on-demand: %w: the manager has one already", ibv.ErrBusy)
	}
	return d, nil
}

// Addr is what a peer needs to Dial this process: the connection manager's addresses (one per
// rail) and queue pair number and the rail count, a few dozen bytes independent of the job size
// (exchange it through the bootstrap's all-gather).
func (d *OnDemand) Addr() []byte { return append([]byte(nil), d.addr...) }

// SetAdmit sets the admission of connections peers ask for ([Takagi15 §3.4]: the target's
// half of the bound on RC connections per process): admit(peer) is called on the manager's
// protocol goroutine, without the OnDemand's lock, once per attempt of a peer that has nothing
// here (not for that attempt's resends and copies); true accepts (queue pairs are created, accept
// runs when the dialer confirms), false refuses: CONN_REJ, nothing is created, the dialer's Dial
// fails with ErrRejected. A REQ that meets our own dial of that peer is not put to admit (our
// consumer asked for the connection). An accepted attempt may still end without a connection
// (the dialer gives it up, or it was a late copy of a REQ the dialer had abandoned): accept is
// then never called for it. admit must not block; it may
// call the OnDemand's non-blocking methods (Connected, Stats), not Dial or Disconnect (an
// eviction it decides runs on another goroutine). nil (the default) admits every peer. Set it
// before the OnDemand is used.
func (d *OnDemand) SetAdmit(admit func(peer uint32) bool) {
	d.mu.Lock()
	d.admit, d.core.admission = admit, admit != nil
	d.mu.Unlock()
}

// SetRelease sets how the consumer gives back the connections of a peer that disconnects
// (its CONN_DREQ, [IBA §12.6]; or its answer to our probe: it no longer holds them, see the type
// doc): release(peer, conns, done) is called once per connection torn
// down, on the manager's protocol goroutine without the OnDemand's lock; it must not block: the
// consumer stops using conns (one per rail; drains what is in flight, on its own goroutine if that
// takes time), closes them, then calls done, once, from any goroutine; only then does the
// OnDemand forget the peer and answer CONN_DREP (later calls of done do nothing). Until then
// Connected(peer) is nil and a Dial of peer waits. nil (the default) closes the connections and
// answers at once. Set it before the OnDemand is used.
func (d *OnDemand) SetRelease(release func(peer uint32, conns []*Conn, done func())) {
	d.mu.Lock()
	d.release = release
	d.mu.Unlock()
}

// Stats returns the protocol counters.
func (d *OnDemand) Stats() OnDemandStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.core.stats
}

// Dial returns the connections to peer (one per rail, rail i on eps[i]), creating them on first
// use through the protocol of the type doc; addr is the peer's Addr (read when no connection to
// peer exists or is being made). It is idempotent and safe for concurrent callers: later and
// concurrent Dials of the peer return the same connections, a Dial during the peer's own dial
// waits for that, a Dial during a disconnect of the peer waits for it to end and then makes new
// connections. The connections belong to the caller (Close them before the manager's devices);
// the slice is a copy. A Dial that waits on the peer's own dial which then fails (the peer gave
// it up) makes an attempt of its own. Errors: ibv.ErrInvalidArgument (peer is self),
// ErrMalformed (addr), ErrRejected (the peer refused: its admission, or its resources),
// ErrClosed, the context's error (the attempt stays pending and a later Dial resumes it), those
// of creating queue pairs.
func (d *OnDemand) Dial(ctx context.Context, peer uint32, addr []byte) ([]*Conn, error) {
	if peer == d.self {
		return nil, fmt.Errorf("hybridft: dial: %w: peer %d is this process", ibv.ErrInvalidArgument, peer)
	}
	for {
		conns, again, err := d.dialOnce(ctx, peer, addr)
		if !again {
			return conns, err
		}
	}
}

// dialOnce waits for a disconnect of peer in progress to end, or joins or starts an attempt and
// waits for it. again: dial anew (the disconnect ended; or the attempt was the peer's and it
// failed, see odAction.Redial).
func (d *OnDemand) dialOnce(ctx context.Context, peer uint32, addr []byte) ([]*Conn, bool, error) {
	d.mu.Lock()
	if d.core.closed {
		d.mu.Unlock()
		return nil, false, ErrClosed
	}
	if p, l := d.core.peers[peer], d.links[peer]; p != nil && l != nil && (p.role == odClosing || p.role == odReleasing) {
		d.mu.Unlock()
		select {
		case <-l.gone:
			return nil, true, nil
		case <-ctx.Done():
			return nil, false, fmt.Errorf("hybridft: dial %d: %w", peer, ctx.Err())
		case <-d.m.ctx.Done():
			return nil, false, fmt.Errorf("hybridft: dial %d: %w", peer, ErrClosed)
		}
	}
	ev := odEvent{Kind: odDial, Peer: peer, Nonce: rand.Uint32() | 1}
	if d.core.peers[peer] == nil {
		a, err := unmarshalODAddr(addr)
		if err != nil {
			d.mu.Unlock()
			return nil, false, fmt.Errorf("hybridft: dial %d: %w", peer, err)
		}
		ev.Addr = a
	}
	after := d.step(ev, time.Now())
	l := d.links[peer]
	if l == nil || d.core.peers[peer] == nil { // creating its queue pairs failed
		d.mu.Unlock()
		d.finish(after)
		for _, f := range after.fin {
			if f.err != nil {
				return nil, false, f.err
			}
		}
		return nil, false, fmt.Errorf("hybridft: dial %d: %w", peer, ErrClosed)
	}
	d.mu.Unlock()
	d.finish(after)
	err := d.await(ctx, l.done, "dial", peer)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.core.Step(odEvent{Kind: odUnwait, Peer: peer, Gen: l.gen}, time.Now())
	select {
	case <-l.done: // established or failed meanwhile: that is the answer
		if l.err != nil {
			return nil, l.redial && err == nil && !d.core.closed, l.err
		}
		l.handed = true
		return append([]*Conn(nil), l.conns...), false, nil
	default:
	}
	return nil, false, err
}

// Disconnect tears down the connections to peer by agreement of both ends (CONN_DREQ/DREP, the
// IBA CM's DREQ/DREP [IBA §12.6]; the eviction of an idle connection of [Takagi15 §3.4]): those
// Connected(peer) returns (established, accept has returned), which the caller has stopped
// using (drained). It sends a CONN_DREQ (resent every Options.Resend),
// waits for the peer's CONN_DREP (the peer's release has run), forgets the peer and returns; the
// caller then closes its connections. A later Dial of peer, from either end, makes new ones.
// Concurrent Disconnects of a peer wait for the same exchange. Errors: ErrNotConnected (no
// established connection to peer: never dialed, not established yet, already disconnected),
// ErrPartition (no CONN_DREP within Options.PartitionTimeout: the peer is forgotten here),
// ErrClosed, the context's error (the exchange goes on: a later Disconnect waits for it; a Dial
// of peer waits for it to end).
func (d *OnDemand) Disconnect(ctx context.Context, peer uint32) error {
	d.mu.Lock()
	if d.core.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	l := d.links[peer]
	if l != nil {
		select {
		case <-l.done: // established, and accept has returned
		default:
			l = nil // accept has not run yet: the consumer does not know this connection
		}
	}
	if l == nil {
		d.mu.Unlock()
		return fmt.Errorf("hybridft: disconnect %d: %w", peer, ErrNotConnected)
	}
	after := d.step(odEvent{Kind: odDisconnect, Peer: peer}, time.Now())
	d.mu.Unlock()
	d.finish(after)
	if after.notConnected {
		return fmt.Errorf("hybridft: disconnect %d: %w", peer, ErrNotConnected)
	}
	err := d.await(ctx, l.gone, "disconnect", peer)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.core.Step(odEvent{Kind: odLeave, Peer: peer, Gen: l.gen}, time.Now())
	select {
	case <-l.gone: // ended meanwhile: that is the answer
		return l.goneErr
	default:
	}
	return err
}

// Connected returns the connections to peer if they are established (accept has run), else
// nil (also while they are being disconnected); it never starts a connection.
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
// stay. Disconnects in progress return ErrClosed (a release in progress finishes with the
// consumer; its done does nothing). Messages that arrive later are dropped. Close the OnDemand
// before its Manager.
func (d *OnDemand) Close() error {
	d.mu.Lock()
	if d.core.closed {
		d.mu.Unlock()
		return nil
	}
	after := d.step(odEvent{Kind: odClose}, time.Now())
	for id, l := range d.links {
		if p := d.core.peers[id]; p != nil && p.role == odDone && !l.handed {
			closeConns(l.conns)
			l.conns = nil
		}
	}
	d.mu.Unlock()
	d.m.od.CompareAndSwap(d, nil)
	for _, l := range after.fin {
		close(l.done)
	}
	return nil
}

// step feeds ev to the core and executes its actions, feeding the results of queue pair actions
// back (d.mu held). It returns what is left to do: the caller passes it to finish after
// unlocking.
func (d *OnDemand) step(ev odEvent, now time.Time) odAfter {
	var after odAfter
	acts := d.core.Step(ev, now)
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		l := d.links[a.Peer]
		if l == nil && a.Kind != odSend && a.Kind != odAdmit && a.Kind != odGone && a.Kind != odNotConnected {
			l = &odLink{peer: a.Peer, done: make(chan struct{}), gone: make(chan struct{})}
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
			after.fin = append(after.fin, l)
		case odFailed:
			l.conns, l.err, l.redial = nil, a.Err, a.Redial
			delete(d.links, a.Peer)
			after.fin = append(after.fin, l)
		case odAdmit:
			after.admit, after.admitFn = append(after.admit, a.Msg), d.admit
		case odRelease:
			l.handed = true
			if d.release == nil {
				closeConns(l.conns)
				l.conns = nil
				res = d.core.Step(odEvent{Kind: odReleased, Peer: a.Peer, Gen: l.gen}, now)
			} else {
				after.release = append(after.release, odReleaseCall{fn: d.release, peer: a.Peer,
					conns: append([]*Conn(nil), l.conns...), done: d.releaseDone(a.Peer, l.gen)})
			}
		case odGone:
			if l != nil {
				l.conns, l.goneErr = nil, a.Err
				delete(d.links, a.Peer)
				close(l.gone)
			}
		case odNotConnected:
			after.notConnected = true
		}
		acts = append(res, acts...)
	}
	return after
}

// releaseDone is the done of a release call for the entry gen of peer: it tells the core, once.
func (d *OnDemand) releaseDone(peer uint32, gen uint64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			after := d.step(odEvent{Kind: odReleased, Peer: peer, Gen: gen}, time.Now())
			d.mu.Unlock()
			d.finish(after)
		})
	}
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

// finish does what step left (no lock held): accept for the attempts that succeeded, then wake
// their Dials; release; admit, whose answers go back to the core (and may leave more to do).
func (d *OnDemand) finish(after odAfter) {
	for {
		for _, l := range after.fin {
			if l.err == nil && d.accept != nil {
				d.accept(l.peer, append([]*Conn(nil), l.conns...))
			}
			close(l.done)
		}
		for _, r := range after.release {
			r.fn(r.peer, r.conns, r.done)
		}
		asks, fn := after.admit, after.admitFn
		after = odAfter{}
		for i := range asks {
			ok := fn(uint32(asks[i].Src))
			d.mu.Lock()
			next := d.step(odEvent{Kind: odAdmitted, Msg: &asks[i], OK: ok}, time.Now())
			d.mu.Unlock()
			after.fin = append(after.fin, next.fin...)
			after.release = append(after.release, next.release...)
			if len(next.admit) > 0 {
				after.admit, after.admitFn = append(after.admit, next.admit...), next.admitFn
			}
		}
		if len(after.fin)+len(after.release)+len(after.admit) == 0 {
			return
		}
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
		after := d.step(odEvent{Kind: odTick}, now)
		d.mu.Unlock()
		d.finish(after)
	}
}

func (d *OnDemand) handle(msg *udcm.Msg, now time.Time) {
	d.mu.Lock()
	if d.core.forUs(msg) && (d.core.closed || d.drop != nil && d.drop(msg)) {
		d.mu.Unlock()
		return
	}
	after := d.step(odEvent{Kind: odMsg, Msg: msg}, now)
	d.mu.Unlock()
	d.finish(after)
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

// await waits for done, ctx's end or the manager's close: nil, or the error of the op (what)
// towards peer wrapping ctx's error or ErrClosed.
func (d *OnDemand) await(ctx context.Context, done <-chan struct{}, what string, peer uint32) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("hybridft: %s %d: %w", what, peer, ctx.Err())
	case <-d.m.ctx.Done():
		return fmt.Errorf("hybridft: %s %d: %w", what, peer, ErrClosed)
	}
}
