package hybridft

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/goarmci/goarmci/hybridft/udcm"
)

// odCore is the pure state machine of the on-demand connection setup and teardown ([Sridhar08];
// the CONN_REQ/REP/RTU/REJ and CONN_DREQ/DREP exchanges of OnDemand's type doc, after the
// InfiniBand CM of [IBA §12.6], with the admission at the target of [Takagi15 §3.4]), in the
// style of etcd/raft's Step: events in, actions out. It starts no goroutine, reads no clock
// (time is Step's argument), does no I/O, takes no lock and draws no random number (a dial's
// nonce comes in its event); the driver (OnDemand) holds its lock around Step, executes the
// actions in order and feeds the result of a queue pair action (odCreated, odConnected, and
// odReleased without a release callback) back before the actions that follow it. The answers
// of the consumer (odAdmit, odRelease) come back later as events (odAdmitted, odReleased): the
// driver asks without its lock held.
//
// Timers: the core arms one resend deadline per pending peer (lastSend + resend, see Next);
// the driver delivers odTick at least every resend/2, as the Manager's protocol goroutine does.
type odCore struct {
	self, job uint32
	rails     int           // our rail count (endpoints)
	addr      []byte        // our on-demand address (the payload's first part)
	resend    time.Duration // Options.Resend
	giveUp    time.Duration // Options.PartitionTimeout: a CONN_DREQ unanswered this long gives up (<= 0: see tick)
	admission bool          // new peers' CONN_REQs are put to the consumer (odAdmit); else all are accepted

	peers     map[uint32]*odPeer  // every peer dialed, accepted, or being disconnected
	pending   map[uint32]*odPeer  // those with a resend timer: not established yet, or our CONN_DREQ out
	admitting map[uint32]uint32   // peer -> nonce of its CONN_REQ put to the consumer (odAdmit out)
	recent    map[uint32]odRecent // the last answer given to each peer without keeping its state
	ended     map[uint32]odRecent // the last attempt of each peer that ended here (failed, disconnected)
	closed    bool
	gen       uint64 // last odPeer.gen handed out
	stats     OnDemandStats
}

// odRecent is what the core remembers of a peer past its state, for odIdleResends resend
// periods (tick), so that the copies of a message (one per rail, each on its own path and
// delay) and its resends still in flight meet the same answer:
//
//   - recent: an answer given without keeping state (typ): the CONN_REJ of a refused CONN_REQ,
//     a CONN_DREP, or the probe (CONN_DREQ) answering a CONN_REQ while connected. The messages
//     it answered are not answered again within resend/2, and a refused attempt is not put to
//     the consumer again.
//   - ended: the attempt (nonce) of the peer's last connection or attempt that ended here
//     (failed, disconnected): a late copy of its CONN_REQ would otherwise be taken for a new
//     attempt (queue pairs created, admit asked, for nothing).
type odRecent struct {
	typ   udcm.Type
	nonce uint32
	at    time.Time
}

type odRole uint8

const (
	odDialing   odRole = iota + 1 // our CONN_REQ is out (or our queue pairs are being created), INIT
	odAccepting                   // their CONN_REQ accepted, our CONN_REP out, awaiting CONN_RTU
	odDone                        // established
	odClosing                     // our Disconnect: our CONN_DREQ is out, awaiting CONN_DREP
	odReleasing                   // their CONN_DREQ: the consumer releases the connections, then our CONN_DREP
)

// odPeer is the core's state of one peer.
type odPeer struct {
	id       uint32
	gen      uint64 // this entry's identity (a failed or disconnected peer's next entry has another)
	role     odRole
	dialer   bool   // established by our dial (else accepted)
	nonce    uint32 // the dialer's attempt: the connection's identity at both ends
	k        int    // our queue pairs of the attempt (one per rail)
	to       []string
	toQPN    uint32
	msg      udcm.Msg // to resend: CONN_REQ (dialing), CONN_REP (accepting, accepted), CONN_RTU (dialed), CONN_DREQ (closing)
	sent     bool     // msg was sent once (it exists)
	lastSend time.Time
	resends  int
	waiters  int       // Dials waiting (dialing, accepting)
	leavers  int       // Disconnects waiting (closing)
	since    time.Time // closing: when our first CONN_DREQ went out
}

// odEventKind says what happened.
type odEventKind uint8

const (
	odDial       odEventKind = iota + 1 // a Dial of Peer waits (Addr, Nonce: a fresh odd nonce, used if a new attempt starts)
	odUnwait                            // a Dial of Peer stopped waiting (Gen: the entry it waited on)
	odMsg                               // Msg arrived
	odTick                              // the resend timers' time: Now
	odCreated                           // result of odCreate: Local are our queue pairs' ConnInfos, or Err
	odConnected                         // result of odConnect: Err
	odClose                             // the OnDemand closes
	odAdmitted                          // result of odAdmit: Msg is the CONN_REQ put to the consumer, OK its answer
	odDisconnect                        // a Disconnect of Peer waits
	odLeave                             // a Disconnect of Peer stopped waiting (Gen: the entry it waited on)
	odReleased                          // result of odRelease: the consumer is done with Peer's connections (Gen: the entry)
)

// odEvent is an input of odCore.Step.
type odEvent struct {
	Kind  odEventKind
	Peer  uint32
	Addr  odAddr    // odDial
	Nonce uint32    // odDial
	Gen   uint64    // odUnwait, odLeave, odReleased
	Msg   *udcm.Msg // odMsg, odAdmitted (not retained: Payload is decoded, the header copied)
	OK    bool      // odAdmitted
	Local []ConnInfo
	Err   error
}

// odActionKind says what the driver must do.
type odActionKind uint8

const (
	odSend         odActionKind = iota + 1 // send Msg to the CM at To/ToQPN
	odCreate                               // create K queue pairs of Peer (rails 0..K-1), connect each to Remote[i] if Remote is set; answer odCreated
	odConnect                              // connect Peer's queue pairs to Remote (one each, in order), close those past len(Remote); answer odConnected
	odCloseQPs                             // close Peer's queue pairs
	odEstablished                          // Peer is connected: run accept, wake its Dials (Waited: a Dial was waiting)
	odFailed                               // Peer's attempt ended with Err: its Dials return Err (or dial anew: Redial), the peer is forgotten
	odAdmit                                // ask the consumer whether to accept Peer's CONN_REQ Msg (a copy); answer odAdmitted
	odRelease                              // hand Peer's connections to the consumer to release; answer odReleased when it is done
	odGone                                 // Peer is forgotten: disconnected (Err nil), or its disconnect ended with Err; wake its Disconnects
	odNotConnected                         // a Disconnect of Peer finds no established connection to it
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
	Waited bool // odEstablished
	Redial bool // odFailed: the attempt was the peer's (accepting): the Dials that waited on it start their own
	Err    error
}

func newODCore(self, job uint32, rails int, addr []byte, resend, giveUp time.Duration) *odCore {
	return &odCore{self: self, job: job, rails: rails, addr: addr, resend: resend, giveUp: giveUp,
		peers: map[uint32]*odPeer{}, pending: map[uint32]*odPeer{}, admitting: map[uint32]uint32{},
		recent: map[uint32]odRecent{}, ended: map[uint32]odRecent{}}
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
		out = c.close(out)
	case odAdmitted:
		out = c.admitted(ev, now, out)
	case odDisconnect:
		out = c.disconnect(ev.Peer, now, out)
	case odLeave:
		if p := c.peers[ev.Peer]; p != nil && p.gen == ev.Gen && p.leavers > 0 {
			p.leavers--
		}
	case odReleased:
		if p := c.peers[ev.Peer]; p != nil && p.gen == ev.Gen && p.role == odReleasing {
			out = c.drep(p.id, p.nonce, p.to, p.toQPN, now, out)
			out = c.forget(p, now, nil, out)
		}
	}
	return out
}

// close fails the attempts in progress with ErrClosed (closing their queue pairs) and ends the
// disconnects in progress with ErrClosed (their connections are the consumer's); established
// peers stay.
func (c *odCore) close(out []odAction) []odAction {
	if c.closed {
		return out
	}
	c.closed = true
	for _, p := range sortedPeers(c.peers) {
		switch p.role {
		case odDialing, odAccepting:
			out = append(out, odAction{Kind: odCloseQPs, Peer: p.id}, odAction{Kind: odFailed, Peer: p.id, Err: ErrClosed})
			delete(c.peers, p.id)
		case odClosing, odReleasing:
			out = append(out, odAction{Kind: odGone, Peer: p.id, Err: ErrClosed})
			delete(c.peers, p.id)
		}
	}
	clear(c.pending)
	clear(c.admitting)
	return out
}

// sortedPeers lists ps by id (deterministic action order).
func sortedPeers(ps map[uint32]*odPeer) []*odPeer {
	l := slices.Collect(maps.Values(ps))
	slices.SortFunc(l, func(x, y *odPeer) int { return cmp.Compare(x.id, y.id) })
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
	case p.role == odClosing || p.role == odReleasing:
		return out // the driver waits for the disconnect to end (odGone), then dials anew
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
		return c.fail(p, now, fmt.Errorf("hybridft: %s %d: %w", what, p.id, err), out)
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
		return c.fail(p, now, fmt.Errorf("hybridft: dial %d: %w", p.id, ev.Err), out)
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

// answered reports whether peer was given the stateless answer t for nonce less than resend/2
// ago (then the message is a copy: not answered again); else it records that the answer goes
// out now.
func (c *odCore) answered(peer uint32, t udcm.Type, nonce uint32, now time.Time) bool {
	if r, ok := c.recent[peer]; ok && r.typ == t && r.nonce == nonce && now.Sub(r.at) < c.resend/2 {
		return true
	}
	c.recent[peer] = odRecent{typ: t, nonce: nonce, at: now}
	return false
}

// fail ends p's attempt with err: its queue pairs are closed, the peer forgotten. The Dials that
// waited on an attempt of the peer's (accepting) start one of their own (Redial): the peer gave
// it up (its REJ, its DREQ before confirming), or a late copy of an abandoned REQ started it.
func (c *odCore) fail(p *odPeer, now time.Time, err error, out []odAction) []odAction {
	c.ended[p.id] = odRecent{nonce: p.nonce, at: now}
	delete(c.peers, p.id)
	delete(c.pending, p.id)
	return append(out, odAction{Kind: odCloseQPs, Peer: p.id},
		odAction{Kind: odFailed, Peer: p.id, Err: err, Redial: p.role == odAccepting})
}

func (c *odCore) tick(now time.Time, out []odAction) []odAction {
	if c.closed {
		return out
	}
	for _, m := range []map[uint32]odRecent{c.recent, c.ended} {
		for id, r := range m {
			if now.Sub(r.at) >= odIdleResends*c.resend {
				delete(m, id)
			}
		}
	}
	for _, p := range sortedPeers(c.pending) {
		if p.role == odClosing && (c.giveUp > 0 && now.Sub(p.since) >= c.giveUp ||
			c.giveUp <= 0 && p.leavers == 0 && p.resends >= odIdleResends) {
			out = c.forget(p, now, fmt.Errorf("hybridft: disconnect %d: %w: no CONN_DREP in %v", p.id, ErrPartition,
				now.Sub(p.since)), out)
			continue
		}
		if now.Sub(p.lastSend) < c.resend {
			continue
		}
		if p.role == odClosing || p.role == odDialing && p.waiters > 0 || p.role == odAccepting && (p.waiters > 0 || p.resends < odIdleResends) {
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
		return c.onREQ(peer, msg, now, false, out)
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
		if p := c.peers[peer]; p != nil && (p.role == odDialing || p.role == odAccepting) && p.nonce == msg.Inc {
			c.stats.Rejected++
			return c.fail(p, now, fmt.Errorf("hybridft: peer %d: %w (status %d)", peer, ErrRejected, msg.Status), out)
		}
		c.stats.Ignored++
	case udcm.ConnDREQ:
		return c.onDREQ(peer, msg, now, out)
	case udcm.ConnDREP:
		p := c.peers[peer]
		switch {
		case p != nil && p.role == odClosing && p.nonce == msg.Inc:
			return c.forget(p, now, nil, out)
		case p != nil && p.role == odDone && p.nonce == msg.Inc:
			// the answer to our probe: the peer does not hold the connection any more; release
			// ours as if it had asked (DREQ)
			p.role = odReleasing
			return append(out, odAction{Kind: odRelease, Peer: peer})
		}
		c.stats.Ignored++ // a copy, or the answer to a DREQ of an earlier connection
	}
	return out
}

// onREQ is the passive side and the tie-break of simultaneous dials: the lower id's REQ wins.
// With admission, a CONN_REQ of a peer we hold nothing for is first put to the consumer
// (odAdmit), unless admitted says it was (odAdmitted).
func (c *odCore) onREQ(peer uint32, msg *udcm.Msg, now time.Time, admitted bool, out []odAction) []odAction {
	a, infos, err := unmarshalODPayload(msg.Payload)
	if err != nil {
		c.stats.Ignored++ // no address to answer to
		return out
	}
	if len(infos) == 0 {
		c.stats.Rejected++
		return c.reply(&odPeer{id: peer, nonce: msg.Inc, to: a.cm, toQPN: a.qpn}, udcm.ConnREJ, udcm.RejMalformed, out)
	}
	if e, ok := c.ended[peer]; ok && e.nonce == msg.Inc {
		c.stats.Ignored++ // a late copy of an attempt that ended here
		return out
	}
	p := c.peers[peer]
	switch {
	case p == nil && c.admission && !admitted:
		return c.admit(peer, msg, a, now, out)
	case p == nil:
		p = c.newPeer(peer)
	case p.role == odClosing || p.role == odReleasing:
		c.stats.Ignored++ // a peer that forgot the connection being torn down: it resends after the disconnect
		return out
	case p.role == odDialing && c.self < peer:
		return c.answer(p, now, false, out) // our REQ wins: make sure the peer has it (our Dial may be gone)
	case p.role == odDialing:
		c.stats.Superseded++ // theirs wins: our Dials get the accepted connections
		out = append(out, odAction{Kind: odCloseQPs, Peer: peer})
	case p.role == odAccepting && p.nonce != msg.Inc:
		// another attempt while one is accepted but not confirmed: which is the newer is unknown
		// (a late copy of a REQ the dialer abandoned, or the dialer abandoned ours). Our REP says
		// which one we hold: the dialer confirms it (RTU), or rejects it (REJ) and its resent REQ
		// is accepted then. Replacing ours could close queue pairs the dialer has connected to.
		if !p.sent {
			return out
		}
		return c.answer(p, now, false, out)
	case p.nonce == msg.Inc && (p.role == odAccepting || !p.dialer):
		return c.answer(p, now, true, out) // our REP was lost (or crossed the RTU)
	case p.role == odDone && p.nonce != msg.Inc:
		// another attempt while connected: a late copy of an earlier REQ, or the peer no longer
		// holds our connection (its Disconnect failed, its OnDemand was opened again). A probe
		// DREQ asks: only a peer that does not hold the connection answers it (DREP), and we
		// then release it, after which the peer's resent REQ is accepted.
		c.stats.Ignored++
		if c.answered(peer, udcm.ConnDREQ, p.nonce, now) {
			return out
		}
		return append(out, odAction{Kind: odSend, Peer: peer, To: p.to, ToQPN: p.toQPN, Msg: udcm.Msg{Type: udcm.ConnDREQ,
			Status: udcm.DREQProbe, Src: uint64(c.self), Dst: uint64(peer), Seq: c.job, Inc: p.nonce, Payload: c.addr}})
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

// ---- admission ----

// admit puts a CONN_REQ of a peer we hold nothing for to the consumer, once per attempt: a copy
// or resend while it is asked is ignored, one of an attempt refused is refused again without
// asking (its copies within resend/2 not even answered).
func (c *odCore) admit(peer uint32, msg *udcm.Msg, a odAddr, now time.Time, out []odAction) []odAction {
	if n, ok := c.admitting[peer]; ok && n == msg.Inc {
		c.stats.Ignored++
		return out
	}
	if r, ok := c.recent[peer]; ok && r.typ == udcm.ConnREJ && r.nonce == msg.Inc {
		return c.refuse(peer, msg.Inc, a, now, out)
	}
	c.admitting[peer] = msg.Inc
	m := *msg
	m.Payload, m.Atomics = slices.Clone(msg.Payload), nil
	return append(out, odAction{Kind: odAdmit, Peer: peer, Msg: m})
}

// admitted continues the CONN_REQ the consumer answered: accepted, or refused with a CONN_REJ
// (RejRefused) that creates nothing. If we started a dial of that peer meanwhile, the REQ meets
// it as any other (the tie-break of simultaneous dials).
func (c *odCore) admitted(ev odEvent, now time.Time, out []odAction) []odAction {
	msg := ev.Msg
	if msg == nil || msg.Type != udcm.ConnREQ || !c.forUs(msg) {
		return out
	}
	peer := uint32(msg.Src)
	if n, ok := c.admitting[peer]; !ok || n != msg.Inc || c.closed {
		return out // not asked (or no longer: closed)
	}
	delete(c.admitting, peer)
	if !ev.OK && c.peers[peer] == nil {
		c.stats.Refused++
		a, _, err := unmarshalODPayload(msg.Payload)
		if err != nil {
			return out
		}
		return c.refuse(peer, msg.Inc, a, now, out)
	}
	return c.onREQ(peer, msg, now, true, out)
}

// refuse answers a refused attempt with a CONN_REJ (RejRefused), not its copies.
func (c *odCore) refuse(peer, nonce uint32, a odAddr, now time.Time, out []odAction) []odAction {
	if c.answered(peer, udcm.ConnREJ, nonce, now) {
		return out
	}
	c.stats.Rejected++
	return c.reply(&odPeer{id: peer, nonce: nonce, to: a.cm, toQPN: a.qpn}, udcm.ConnREJ, udcm.RejRefused, out)
}

// ---- disconnect (the IBA CM's DREQ/DREP) ----

// disconnect starts or joins our Disconnect of peer. A connection whose CONN_DREQ from the peer
// the consumer is releasing is torn down at once: the consumer has stopped using it too (that is
// what calling Disconnect says), so the peer gets its CONN_DREP now.
func (c *odCore) disconnect(peer uint32, now time.Time, out []odAction) []odAction {
	p := c.peers[peer]
	switch {
	case c.closed || p == nil || p.role == odDialing || p.role == odAccepting:
		return append(out, odAction{Kind: odNotConnected, Peer: peer})
	case p.role == odReleasing:
		out = c.drep(p.id, p.nonce, p.to, p.toQPN, now, out)
		return c.forget(p, now, nil, out)
	case p.role == odDone:
		p.role, p.since, p.resends, p.leavers = odClosing, now, 0, 0
		p.msg = udcm.Msg{Type: udcm.ConnDREQ, Src: uint64(c.self), Dst: uint64(p.id), Seq: c.job, Inc: p.nonce, Payload: c.addr}
		c.pending[peer] = p
		out = c.send(p, now, out)
	}
	p.leavers++
	return out
}

// onDREQ is the passive side of a disconnect. A CONN_DREQ names the connection by its attempt
// nonce; one of a connection we no longer have (our CONN_DREP was lost) or never had is answered
// at once and changes nothing. Crossing CONN_DREQs (both ends' Disconnect): each end answers the
// other's and forgets the peer; both Disconnects return nil.
func (c *odCore) onDREQ(peer uint32, msg *udcm.Msg, now time.Time, out []odAction) []odAction {
	a, err := unmarshalODAddr(msg.Payload)
	if err != nil {
		c.stats.Ignored++ // malformed
		return out
	}
	p := c.peers[peer]
	if p == nil || p.nonce != msg.Inc {
		return c.drep(peer, msg.Inc, a.cm, a.qpn, now, out)
	}
	if msg.Status&udcm.DREQProbe != 0 {
		return out // we hold the connection: a probe changes nothing
	}
	switch p.role {
	case odDone:
		p.role = odReleasing
		return append(out, odAction{Kind: odRelease, Peer: peer})
	case odClosing:
		out = c.drep(p.id, p.nonce, p.to, p.toQPN, now, out)
		return c.forget(p, now, nil, out)
	case odAccepting:
		// the dialer got our REP and disconnects before its RTU reached us: our consumer never
		// had these queue pairs
		out = c.drep(p.id, p.nonce, p.to, p.toQPN, now, out)
		return c.fail(p, now, fmt.Errorf("hybridft: accept from %d: %w: the peer disconnected before confirming", peer,
			ErrNotConnected), out)
	}
	c.stats.Ignored++ // releasing: a copy or a resend, answered when the consumer is done
	return out
}

// drep sends a CONN_DREP for the connection of attempt nonce, not to the copies of its DREQ.
func (c *odCore) drep(peer, nonce uint32, to []string, qpn uint32, now time.Time, out []odAction) []odAction {
	if c.answered(peer, udcm.ConnDREP, nonce, now) {
		return out
	}
	return append(out, odAction{Kind: odSend, Peer: peer, To: to, ToQPN: qpn,
		Msg: udcm.Msg{Type: udcm.ConnDREP, Src: uint64(c.self), Dst: uint64(peer), Seq: c.job, Inc: nonce}})
}

// forget ends p's disconnect with err (nil: the connection is torn down at both ends); the peer
// is forgotten, its next Dial a new attempt.
func (c *odCore) forget(p *odPeer, now time.Time, err error, out []odAction) []odAction {
	c.ended[p.id] = odRecent{nonce: p.nonce, at: now}
	delete(c.peers, p.id)
	delete(c.pending, p.id)
	if err == nil {
		c.stats.Disconnected++
	}
	return append(out, odAction{Kind: odGone, Peer: p.id, Err: err})
}
