package hybridft

import (
	"time"

	"github.com/goarmci/goarmci/hybridft/apm"
	"github.com/goarmci/goarmci/hybridft/recovery"
	"github.com/goarmci/goarmci/hybridft/udcm"
	"github.com/goarmci/goarmci/ibv"
)

// Software-IBNFT: the connection re-establishment protocol of seed 003 §IV.C (Fig. 8), run by
// the manager's protocol goroutine over the UD connection manager.
//
//	A (detects the fault)                         B
//	QP→ERROR (flushes), capture, RESET→INIT
//	REQ{seq, port, QPN, PSN_A, record of A}  ──▶  QP→ERROR, capture, RESET→INIT→RTR→RTS(PSN_B)
//	                                         ◀──  REP{seq, PSN_B, record of B}
//	RTR→RTS, re-issue failed requests
//	ACK{seq, record of A}                    ──▶  re-issue failed requests
//
// The record of a side is its responder's state on the failed incarnation of the queue pair:
// the expected PSN (how far it executed the peer's requests) and the atomic results it
// executed. With it the peer re-issues each failed request exactly once (recovery.Decide): an
// accumulate or atomic the responder had executed is completed, not repeated. REQ and REP are
// resent on a timer until answered; a duplicate REP is answered by a new ACK; other duplicates
// are ignored. seq, a per-pair sequence ID (§IV.D), numbers the recoveries of the connection:
// it tells a new fault from a resent message of the previous one. When both sides start at
// once, the lower connection ID keeps the initiator's role.

type phase uint8

const (
	phIdle    phase = iota
	phReqSent       // initiator, waiting for REP
	phRepSent       // responder, waiting for ACK
)

type protoState struct {
	phase     phase
	seq       uint32 // highest recovery sequence seen or used
	port      uint8  // proposed port (initiator)
	psn       uint32 // our first PSN on the recycled queue pair
	lastSend  time.Time
	retryAt   time.Time
	captured  bool
	capInc    uint32
	pathFault bool // the failure was the path's (mark it in the repository)
	giveBack  bool // a planned re-establishment to return to the home path
	acked     uint32
	lastMsg   udcm.Msg // the message to resend
}

func apmPorts(c *Conn, n uint8) apm.Ports {
	ps := apm.Ports{N: n, Up: c.ft.portsUp(n) & c.peerUp}
	for i := uint8(0); i < n; i++ {
		ps.LMC = append(ps.LMC, min(c.local.Paths[i].LMC, c.remote.Paths[i].LMC))
	}
	return ps
}

func apmAlternate(c *Conn, ps apm.Ports) (apm.Path, bool) {
	return apm.Alternate(c.home, c.primary, ps)
}

// capture moves the queue pair to ERROR if it is not there yet and records, once per failed
// incarnation, the PSNs of its flushed requests and its responder's record (c.mu held).
func (m *Manager) capture(c *Conn) {
	if c.rec.captured {
		return
	}
	st := c.qp.State()
	if st == ibv.StateReset || st == ibv.StateInit {
		return // not yet connected in this incarnation: nothing to capture
	}
	if st != ibv.StateError {
		if err := c.qp.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState); err != nil {
			m.log.Debug().Err(err).Msg("hybridft: QP to ERROR")
		}
	}
	inc := c.inc
	i := c.log.head
	c.drv.FailedRequests(func(id uint64, first, npkts uint32, mtu int) {
		for ; i != c.log.tail; i++ {
			e := c.log.at(i)
			if e.inc == inc && (e.state == esPosted || e.state == esFailed) && e.wr.ID == id {
				e.hasSent, e.sentInc = true, inc
				e.sent = recovery.Sent{FirstPSN: first, NPkts: npkts, MTU: mtu}
				i++
				return
			}
		}
	})
	r := record{atoms: map[uint32]uint64{}}
	r.epsn = c.drv.ResponderState(func(psn uint32, v uint64) { r.atoms[psn] = v })
	c.ownRec[inc] = r
	for k := range c.ownRec {
		if k+16 < inc {
			delete(c.ownRec, k)
		}
	}
	c.rec.captured, c.rec.capInc = true, inc
}

// need is the incarnation whose peer record our failed requests need (c.mu held).
func (c *Conn) need() uint32 {
	n, found := c.inc, false
	for i := c.log.head; i != c.log.tail; i++ {
		if e := c.log.at(i); e.hasSent && (e.state == esFailed || e.state == esPosted) && (!found || e.sentInc < n) {
			n, found = e.sentInc, true
		}
	}
	return n
}

// fillRecord puts our record of incarnation inc into msg (c.mu held).
func (c *Conn) fillRecord(msg *udcm.Msg, inc uint32) {
	msg.Inc = inc
	r, ok := c.ownRec[inc]
	switch {
	case ok:
		msg.EPSN = r.epsn
		for psn, v := range r.atoms {
			if len(msg.Atomics) == udcm.MaxAtomics {
				break
			}
			msg.Atomics = append(msg.Atomics, udcm.Atomic{PSN: psn, Value: v})
		}
	case inc+16 < c.inc:
		msg.Status |= udcm.RecUnknown
	default:
		msg.Status |= udcm.RecNone
	}
}

func (c *Conn) storePeerRecord(msg *udcm.Msg) {
	r := record{epsn: msg.EPSN, none: msg.Status&udcm.RecNone != 0, unknown: msg.Status&udcm.RecUnknown != 0,
		atoms: make(map[uint32]uint64, len(msg.Atomics))}
	for _, a := range msg.Atomics {
		r.atoms[a.PSN] = a.Value
	}
	c.peerRec[msg.Inc] = r
}

// recycle moves the queue pair RESET→INIT on port (c.mu held).
func (m *Manager) recycle(c *Conn, port uint8) bool {
	if err := c.qp.Modify(&ibv.QPAttr{State: ibv.StateReset}, ibv.AttrState); err != nil {
		m.log.Debug().Err(err).Msg("hybridft: QP to RESET")
		return false
	}
	if err := c.qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: port, AccessFlags: ibv.AccessAll},
		ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags); err != nil {
		m.log.Debug().Err(err).Msg("hybridft: QP to INIT")
		return false
	}
	return true
}

// connect moves the recycled queue pair to RTR and RTS on (port, peer port) (c.mu held).
func (m *Manager) connect(c *Conn, port, peerPort uint8, peerQPN, rqpsn, sqpsn uint32) bool {
	rp := c.remote.Paths[peerPort-1]
	if err := c.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: rp.Addr, DLID: rp.LID, PortNum: port},
		DestQPN: peerQPN, RQPSN: rqpsn}, ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN); err != nil {
		m.log.Debug().Err(err).Msg("hybridft: QP to RTR")
		return false
	}
	attr := &ibv.QPAttr{State: ibv.StateRTS, SQPSN: sqpsn}
	if err := c.qp.Modify(attr, ibv.AttrState|ibv.AttrSQPSN|m.rtsAttrs(attr)); err != nil {
		m.log.Debug().Err(err).Msg("hybridft: QP to RTS")
		return false
	}
	c.primary, c.hasAlt = apm.Path{Port: port}, false
	return true
}

func (m *Manager) send(c *Conn, msg *udcm.Msg, now time.Time) {
	msg.Dst, msg.Src, msg.QPN = c.remote.ID, c.id, c.qp.Num()
	c.rec.lastSend = now
	if err := m.cm.Send(c.remote.CM, c.remote.CMQPN, msg); err != nil {
		m.log.Debug().Err(err).Msg("hybridft: CM send")
	}
}

// startRecovery begins a re-establishment as initiator (A).
func (m *Manager) startRecovery(c *Conn, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stFailed || c.rec.phase != phIdle || !c.recoverable {
		return
	}
	m.capture(c)
	if c.rec.pathFault {
		c.paths.Fail(c.primary.Port, now)
		c.rec.pathFault = false
	}
	n := c.nports()
	port, ok := c.paths.Choose(c.ft.portsUp(n), c.peerUp, now)
	if c.rec.giveBack {
		port, ok = c.home.Port, true
		c.rec.giveBack = false
		c.stats.giveBacks.Add(1)
	}
	if !ok {
		// no path (partition): probe again later; the peer may also tell us a port is back
		c.rec.retryAt = now.Add(m.opts.Probe)
		c.peerUp = 1<<n - 1
		return
	}
	if !m.recycle(c, port) {
		c.rec.retryAt = now.Add(m.opts.Probe)
		return
	}
	c.rec.seq++
	c.rec.port, c.rec.psn, c.rec.phase = port, newPSN(), phReqSent
	msg := udcm.Msg{Type: udcm.REQ, Seq: c.rec.seq, Port: port, PeerPort: port, Ports: c.ft.portsUp(n),
		PSN: c.rec.psn, Need: c.need()}
	c.fillRecord(&msg, c.rec.capInc)
	c.rec.lastMsg = msg
	m.send(c, &msg, now)
	m.log.Debug().Uint64("conn", c.id).Uint32("seq", msg.Seq).Uint8("port", port).Msg("hybridft: REQ")
}

func (m *Manager) resend(c *Conn, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rec.phase == phIdle {
		return
	}
	msg := c.rec.lastMsg
	m.send(c, &msg, now)
}

func (m *Manager) handleMsg(msg *udcm.Msg, now time.Time) {
	m.mu.Lock()
	c := m.conns[msg.Dst]
	m.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if msg.Src != c.remote.ID || c.state == stDead || !c.recoverable {
		return
	}
	n := c.nports()
	switch msg.Type {
	case udcm.REQ:
		switch {
		case msg.Seq < c.rec.seq:
			return
		case msg.Seq == c.rec.seq:
			if c.rec.phase == phRepSent {
				m.send(c, &c.rec.lastMsg, now) // duplicate REQ: the REP was lost
				return
			}
			if c.rec.phase != phReqSent || c.id < msg.Src {
				return // a duplicate of a finished exchange, or we keep the initiator's role
			}
		}
		c.rec.seq = msg.Seq
		c.peerUp = msg.Ports
		if c.state == stNormal || c.state == stReady {
			c.state = stFailed
			if c.outageSince.IsZero() {
				c.outageSince = now
			}
		}
		m.capture(c)
		c.storePeerRecord(msg)
		c.rec.phase = phIdle
		port := msg.PeerPort
		rep := udcm.Msg{Type: udcm.REP, Seq: msg.Seq, Port: port, PeerPort: msg.Port, Ports: c.ft.portsUp(n), Need: c.need()}
		if port == 0 || port > n || msg.Port == 0 || msg.Port > n || rep.Ports&(1<<(port-1)) == 0 {
			rep.Status = udcm.StatusPathDown
			m.send(c, &rep, now)
			c.rec.retryAt = now.Add(4 * m.opts.Probe) // leave the next move to the initiator
			return
		}
		c.rec.psn = newPSN()
		if !m.recycle(c, port) || !m.connect(c, port, msg.Port, msg.QPN, msg.PSN, c.rec.psn) {
			c.rec.retryAt = now.Add(m.opts.Probe)
			return
		}
		c.inc = msg.Seq
		c.rec.captured = false
		rep.PSN = c.rec.psn
		c.fillRecord(&rep, msg.Need)
		c.rec.lastMsg, c.rec.phase = rep, phRepSent
		m.send(c, &rep, now)
	case udcm.REP:
		if msg.Seq != c.rec.seq {
			return
		}
		if c.rec.phase == phIdle && c.rec.acked == msg.Seq {
			ack := c.rec.lastMsg // our ACK was lost
			m.send(c, &ack, now)
			return
		}
		if c.rec.phase != phReqSent {
			return
		}
		c.peerUp = msg.Ports
		c.rec.phase = phIdle
		if msg.Status&udcm.StatusPathDown != 0 {
			c.rec.retryAt = now // choose another path at the next tick
			return
		}
		c.storePeerRecord(msg)
		if !m.connect(c, c.rec.port, msg.Port, msg.QPN, msg.PSN, c.rec.psn) {
			c.rec.retryAt = now.Add(m.opts.Probe)
			return
		}
		c.inc = msg.Seq
		c.rec.captured = false
		ack := udcm.Msg{Type: udcm.ACK, Seq: msg.Seq, Port: c.rec.port, PeerPort: msg.Port, Ports: c.ft.portsUp(n)}
		c.fillRecord(&ack, msg.Need)
		c.rec.lastMsg, c.rec.acked = ack, msg.Seq
		m.send(c, &ack, now)
		m.ready(c)
	case udcm.ACK:
		if msg.Seq != c.rec.seq || c.rec.phase != phRepSent {
			return
		}
		c.storePeerRecord(msg)
		c.rec.phase = phIdle
		m.ready(c)
	}
}

// ready: the queue pair is re-established; re-issue when drained (c.mu held).
func (m *Manager) ready(c *Conn) {
	c.stats.recoveries.Add(1)
	c.state = stReady
	c.tryRepostLocked()
	m.log.Debug().Uint64("conn", c.id).Uint32("inc", c.inc).Uint8("port", c.primary.Port).Msg("hybridft: re-established")
	m.post(item{conn: c}) // arm an alternate path
}
