package hybridft

import (
	"fmt"
	"math"
	"time"

	"github.com/goarmci/goarmci/hybridft/udcm"
)

// odCore is the pure state machine of the on-demand connection setup ([Sridhar08]; the
// CONN_REQ/REP/RTU/REJ exchange of OnDemand's type doc, after the InfiniBand CM of [IBA §12.6]),
// in the style of etcd/raft's Step: events in, actions out. It starts no goroutine, reads no
// clock (time is Step's argument), does no I/O, takes no lock and draws no random number (a
// dial's nonce comes in its event); the driver (OnDemand) holds its lock around Step, executes
// the actions in order and feeds the result of a queue pair action (odCreated, odConnected)
// back before the actions that follow it.
//
// Timers: the core arms one resend deadline per pending peer (lastSend + resend, see Next);
// the driver delivers odTick at least every resend/2, as the Manager's protocol goroutine does.
type odCore struct {
	self, job uint32
	rails     int           // our rail count (endpoints)
	addr      []byte        // our on-demand address (the payload's first part)
	resend    time.Duration // Options.Resend

	peers   map[uint32]*odPeer // every peer dialed or accepted
	pending map[uint32]*odPeer // those not established yet (resend timers)
	closed  bool
	gen     uint64 // last odPeer.gen handed out
	stats   OnDemandStats
}

type odRole uint8

const (
	odDialing   odRole = iota + 1 // our CONN_REQ is out (or our queue pairs are being created), INIT
	odAccepting                   // their CONN_REQ accepted, our CONN_REP out, awaiting CONN_RTU
	odDone                        // established
)

// odPeer is the core's state of one peer.
type odPeer struct {
	id       uint32
	gen      uint64 // this entry's identity (a failed peer's next entry has another)
	role     odRole
	dialer   bool   // established by our dial (else accepted)
	nonce    uint32 // the dialer's attempt
	k        int    // our queue pairs of the attempt (one per rail)
	to       []string
	toQPN    uint32
	msg      udcm.Msg // to resend: CONN_REQ (dialing), CONN_REP (accepting, accepted), CONN_RTU (dialed)
	sent     bool     // msg was sent once (it exists)
	lastSend time.Time
	resends  int
	waiters  int
}

// odEventKind says what happened.
type odEventKind uint8

const (
	odDial      odEventKind = iota + 1 // a Dial of Peer waits (Addr, Nonce: a fresh odd nonce, used if a new attempt starts)
	odUnwait                           // a Dial of Peer stopped waiting (Gen: the entry it waited on)
	odMsg                              // Msg arrived
	odTick                             // the resend timers' time: Now
	odCreated                          // result of odCreate: Local are our queue pairs' ConnInfos, or Err
	odConnected                        // result of odConnect: Err
	odClose                            // the OnDemand closes
)

// odEvent is an input of odCore.Step.
type odEvent struct {
	Kind  odEventKind
	Peer  uint32
	Addr  odAddr    // odDial
	Nonce uint32    // odDial
	Gen   uint64    // odUnwait
	Msg   *udcm.Msg // odMsg (not retained: Payload is decoded, the header copied)
	Local []ConnInfo
	Err   error
}

// odActionKind says what the driver must do.
type odActionKind uint8

const (
	odSend        odActionKind = iota + 1 // send Msg to the CM at To/ToQPN
	odCreate                              // create K queue pairs of Peer (rails 0..K-1), connect each to Remote[i] if Remote is set; answer odCreated
	odConnect                             // connect Peer's queue pairs to Remote (one each, in order), close those past len(Remote); answer odConnected
	odCloseQPs                            // close Peer's queue pairs
	odEstablished                         // Peer is connected: run accept, wake its Dials (Waited: a Dial was waiting)
	odFailed                              // Peer's attempt ended with Err: its Dials return Err, the peer is forgotten
)

// odAction is an output of odCore.Step.
type odAction struct {
	Kind   odActionKind
	Peer   uint32
	To     []string
	ToQPN  uint32
	Msg    udcm.Msg
	K      int
	Remote []ConnInfo
	Waited bool
	Err    error
}

func newODCore(self, job uint32, rails int, addr []byte, resend time.Duration) *odCore {
	return &odCore{self: self, job: job, rails: rails, addr: addr, resend: resend,
		peers: map[uint32]*odPeer{}, pending: map[uint32]*odPeer{}}
}

// Next is the earliest resend deadline of a pending peer whose timer may fire (zero: none).
func (c *odCore) Next() time.Time {
	var t time.Time
	for _, p := range c.pending {
		if !p.sent {
			continue
		}
		if d := p.lastSend.Add(c.resend); t.IsZero() || d.Before(t) {
			t = d
		}
	}
	return t
}

// Step applies ev at time now and returns the actions to execute, in order.
func (c *odCore) Step(ev odEvent, now time.Time) []odAction {
	var out []odAction
	switch ev.Kind {
	case odDial:
		out = c.dial(ev, now, out)
	case odUnwait:
		if p := c.peers[ev.Peer]; p != nil && p.gen == ev.Gen && p.waiters > 0 {
			p.waiters--
		}
	case odMsg:
		out = c.msg(ev.Msg, now, out)
	case odTick:
		out = c.tick(now, out)
	case odCreated:
		out = c.created(ev, now, out)
	case odConnected:
		out = c.connected(ev, now, out)
	case odClose:
		if c.closed {
			break
		}
		c.closed = true
		for _, p := range sortedPeers(c.pending) {
			out = append(out, odAction{Kind: odCloseQPs, Peer: p.id}, odAction{Kind: odFailed, Peer: p.id, Err: ErrClosed})
			delete(c.peers, p.id)
		}
		clear(c.pending)
	}
	return out
}

// sortedPeers lists ps by id (deterministic action order).
func sortedPeers(ps map[uint32]*odPeer) []*odPeer {
	l := make([]*odPeer, 0, len(ps))
	for _, p := range ps {
		l = append(l, p)
	}
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && l[j].id < l[j-1].id; j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
	return l
}

func (c *odCore) newPeer(id uint32) *odPeer {
	c.gen++
	p := &odPeer{id: id, gen: c.gen}
	c.peers[id] = p
	return p
}

func (c *odCore) dial(ev odEvent, now time.Time, out []odAction) []odAction {
	if c.closed || ev.Peer == c.self {
		return out
	}
	p := c.peers[ev.Peer]
	switch {
	case p == nil:
		p = c.newPeer(ev.Peer)
		p.role, p.dialer, p.nonce, p.to, p.toQPN = odDialing, false, ev.Nonce, ev.Addr.cm, ev.Addr.qpn
		p.k = min(c.rails, int(ev.Addr.rails))
		out = append(out, odAction{Kind: odCreate, Peer: p.id, K: p.k})
	case p.role == odDialing && p.waiters == 0 && p.sent:
		out = c.send(p, now, out) // resume an attempt nobody waited for
	}
	p.waiters++
	return out
}

// created completes a dial's start (our CONN_REQ) or an accept (our CONN_REP).
func (c *odCore) created(ev odEvent, now time.Time, out []odAction) []odAction {
	p := c.peers[ev.Peer]
	if p == nil || p.sent {
		return out // not waiting for queue pairs (a stale result)
	}
	what := "dial"
	if p.role == odAccepting {
		what = "accept from"
	}
	var pl []byte
	err := ev.Err
	if err == nil {
		pl, err = marshalODPayload(c.addr, ev.Local)
	}
	if err != nil {
		if p.role == odAccepting {
			c.stats.Rejected++
			out = c.reply(p, udcm.ConnREJ, udcm.RejResources, out)
		}
		return c.fail(p, fmt.Errorf("hybridft: %s %d: %w", what, p.id, err), out)
	}
	t := udcm.ConnREQ
	if p.role == odAccepting {
		t = udcm.ConnREP
	}
	p.msg = udcm.Msg{Type: t, Src: uint64(c.self), Dst: uint64(p.id), Seq: c.job, Inc: p.nonce, Payload: pl}
	c.pending[p.id] = p
	return c.send(p, now, out)
}

// connected completes our dial after the CONN_REP's connect.
func (c *odCore) connected(ev odEvent, now time.Time, out []odAction) []odAction {
	p := c.peers[ev.Peer]
	if p == nil || p.role != odDialing {
		return out
	}
	if ev.Err != nil {
		c.stats.Rejected++
		out = c.reply(p, udcm.ConnREJ, udcm.RejMalformed, out)
		return c.fail(p, fmt.Errorf("hybridft: dial %d: %w", p.id, ev.Err), out)
	}
	p.role, p.dialer = odDone, true
	delete(c.pending, p.id)
	c.stats.Dialed++
	p.msg = udcm.Msg{Type: udcm.ConnRTU, Src: uint64(c.self), Dst: uint64(p.id), Seq: c.job, Inc: p.nonce}
	out = c.send(p, now, out)
	return append(out, odAction{Kind: odEstablished, Peer: p.id, Waited: p.waiters > 0})
}

// send (re)sends p's current message.
func (c *odCore) send(p *odPeer, now time.Time, out []odAction) []odAction {
	p.lastSend, p.sent = now, true
	return append(out, odAction{Kind: odSend, Peer: p.id, To: p.to, ToQPN: p.toQPN, Msg: p.msg})
}

// answer resends p's message in answer to a duplicate, unless it went out less than resend/2
// ago: the CM sends every message on every rail, so each arrives once per rail, and answering
// each copy would multiply the messages by the rail count at every step.
func (c *odCore) answer(p *odPeer, now time.Time, dup bool, out []odAction) []odAction {
	if now.Sub(p.lastSend) < c.resend/2 {
		return out
	}
	if dup {
		c.stats.Duplicates++
	}
	return c.send(p, now, out)
}

func (c *odCore) reply(p *odPeer, t udcm.Type, status uint8, out []odAction) []odAction {
	return append(out, odAction{Kind: odSend, Peer: p.id, To: p.to, ToQPN: p.toQPN,
		Msg: udcm.Msg{Type: t, Status: status, Src: uint64(c.self), Dst: uint64(p.id), Seq: c.job, Inc: p.nonce}})
}

// fail ends p's attempt with err: its queue pairs are closed, the peer forgotten.
func (c *odCore) fail(p *odPeer, err error, out []odAction) []odAction {
	delete(c.peers, p.id)
	delete(c.pending, p.id)
	return append(out, odAction{Kind: odCloseQPs, Peer: p.id}, odAction{Kind: odFailed, Peer: p.id, Err: err})
}

func (c *odCore) tick(now time.Time, out []odAction) []odAction {
	if c.closed {
		return out
	}
	for _, p := range sortedPeers(c.pending) {
		if now.Sub(p.lastSend) < c.resend {
			continue
		}
		if p.role == odDialing && p.waiters > 0 || p.role == odAccepting && (p.waiters > 0 || p.resends < odIdleResends) {
			p.resends++
			c.stats.Resent++
			out = c.send(p, now, out)
		}
	}
	return out
}

// forUs reports whether msg is addressed to this process of this job (else it is ignored).
func (c *odCore) forUs(msg *udcm.Msg) bool {
	return msg.Seq == c.job && msg.Dst == uint64(c.self) && msg.Src <= math.MaxUint32 && msg.Src != uint64(c.self)
}

func (c *odCore) msg(msg *udcm.Msg, now time.Time, out []odAction) []odAction {
	if !c.forUs(msg) {
		c.stats.Ignored++
		return out
	}
	if c.closed {
		return out
	}
	peer := uint32(msg.Src)
	switch msg.Type {
	case udcm.ConnREQ:
		return c.onREQ(peer, msg, now, out)
	case udcm.ConnREP:
		return c.onREP(peer, msg, now, out)
	case udcm.ConnRTU:
		if p := c.peers[peer]; p != nil && p.role == odAccepting && p.nonce == msg.Inc {
			p.role = odDone
			delete(c.pending, peer)
			c.stats.Accepted++
			return append(out, odAction{Kind: odEstablished, Peer: peer, Waited: p.waiters > 0})
		}
		c.stats.Ignored++ // stale, or a duplicate RTU
	case udcm.ConnREJ:
		if p := c.peers[peer]; p != nil && p.role != odDone && p.nonce == msg.Inc {
			c.stats.Rejected++
			return c.fail(p, fmt.Errorf("hybridft: peer %d: %w (status %d)", peer, ErrRejected, msg.Status), out)
		}
		c.stats.Ignored++
	}
	return out
}

// onREQ is the passive side and the tie-break of simultaneous dials: the lower id's REQ wins.
func (c *odCore) onREQ(peer uint32, msg *udcm.Msg, now time.Time, out []odAction) []odAction {
	a, infos, err := unmarshalODPayload(msg.Payload)
	if err != nil {
		c.stats.Ignored++ // no address to answer to
		return out
	}
	if len(infos) == 0 {
		c.stats.Rejected++
		return c.reply(&odPeer{id: peer, nonce: msg.Inc, to: a.cm, toQPN: a.qpn}, udcm.ConnREJ, udcm.RejMalformed, out)
	}
	p := c.peers[peer]
	switch {
	case p == nil:
		p = c.newPeer(peer)
	case p.role == odDialing && c.self < peer:
		return c.answer(p, now, false, out) // our REQ wins: make sure the peer has it (our Dial may be gone)
	case p.role == odDialing:
		c.stats.Superseded++ // theirs wins: our Dials get the accepted connections
		out = append(out, odAction{Kind: odCloseQPs, Peer: peer})
	case p.role == odAccepting && p.nonce != msg.Inc:
		out = append(out, odAction{Kind: odCloseQPs, Peer: peer}) // a new attempt replaces one never confirmed
	case p.nonce == msg.Inc && (p.role == odAccepting || !p.dialer):
		return c.answer(p, now, true, out) // our REP was lost (or crossed the RTU)
	default:
		c.stats.Ignored++ // stale: connected already
		return out
	}
	p.role, p.dialer, p.nonce, p.to, p.toQPN, p.resends, p.sent = odAccepting, false, msg.Inc, a.cm, a.qpn, 0, false
	p.k = min(len(infos), c.rails)
	delete(c.pending, peer) // pending again once our REP is out
	return append(out, odAction{Kind: odCreate, Peer: peer, K: p.k, Remote: infos[:p.k]})
}

// onREP completes our dial.
func (c *odCore) onREP(peer uint32, msg *udcm.Msg, now time.Time, out []odAction) []odAction {
	p := c.peers[peer]
	switch {
	case p == nil || p.nonce != msg.Inc:
		// a REP of an attempt we abandoned (failed, closed, an earlier OnDemand): reject it, so
		// the peer closes the queue pairs it holds for it (a REJ only ends the attempt of its
		// nonce, which we will never complete)
		c.stats.Ignored++
		if a, _, err := unmarshalODPayload(msg.Payload); err == nil {
			c.stats.Rejected++
			out = c.reply(&odPeer{id: peer, nonce: msg.Inc, to: a.cm, toQPN: a.qpn}, udcm.ConnREJ, udcm.RejStale, out)
		}
		return out
	case p.role == odDone && p.dialer:
		return c.answer(p, now, true, out) // our RTU was lost
	case p.role != odDialing || !p.sent:
		c.stats.Ignored++
		return out
	}
	_, infos, err := unmarshalODPayload(msg.Payload)
	k := min(len(infos), p.k)
	if err == nil && k == 0 {
		err = fmt.Errorf("%w: no rails", ErrMalformed)
	}
	if err != nil {
		return c.connected(odEvent{Kind: odConnected, Peer: peer, Err: err}, now, out)
	}
	p.k = k
	return append(out, odAction{Kind: odConnect, Peer: peer, Remote: infos[:k]})
}
