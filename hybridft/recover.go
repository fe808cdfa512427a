package hybridft

import (
	"time"

	"github.com/goarmci/goarmci/hybridft/apm"
	"github.com/goarmci/goarmci/hybridft/recovery"
	"github.com/goarmci/goarmci/hybridft/udcm"
	"github.com/goarmci/goarmci/ibv"
)

// Software-IBNFT: the connection re-establishment protocol of [Vishnu09 §IV.C] (Fig. 8). Its
// handshake is the pure core recCore (reccore.go: REQ/REP/ACK, per-pair sequence IDs, resend
// and retry timers, the tie-break of simultaneous starts); this file is its driver, run by the
// manager's protocol goroutine over the UD connection manager: it feeds the core kicks, ticks
// and messages and executes its actions on the queue pair ([IBA] states: ERROR to drain,
// RESET→INIT→RTR→RTS to recycle), the path repository and the request log.
//
// The record of a side is its responder's state on the failed incarnation of the queue pair:
// the expected PSN (how far it executed the peer's requests) and the atomic results it
// executed. With it the peer re-issues each failed request exactly once (recovery.Decide): an
// accumulate or atomic the responder had executed is completed, not repeated.

// protoState is a connection's re-establishment state: the core and what the driver keeps.
type protoState struct {
	recCore          // the handshake (reccore.go)
	captured  bool   // the current incarnation's failure was captured
	capInc    uint32 // the incarnation of the last capture
	pathFault bool   // the failure was the path's (mark it in the repository)
	giveBack  bool   // a planned re-establishment to return to the home path
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
	var bits uint8 // the home path's bits on the home port (Endpoint.WithPath), else 0
	if port == c.home.Port && peerPort == c.remote.Port {
		bits = c.home.PathBits
	}
	if err := c.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: rp.Addr, DLID: rp.LID + uint16(bits),
		SrcPathBits: bits, PortNum: port},
		DestQPN: peerQPN, RQPSN: rqpsn}, ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN); err != nil {
		m.log.Debug().Err(err).Msg("hybridft: QP to RTR")
		return false
	}
	attr := &ibv.QPAttr{State: ibv.StateRTS, SQPSN: sqpsn}
	if err := c.qp.Modify(attr, ibv.AttrState|ibv.AttrSQPSN|m.rtsAttrs(attr)); err != nil {
		m.log.Debug().Err(err).Msg("hybridft: QP to RTS")
		return false
	}
	c.primary, c.hasAlt = apm.Path{Port: port, PathBits: bits}, false
	return true
}

func (m *Manager) send(c *Conn, msg *udcm.Msg) {
	msg.Dst, msg.Src, msg.QPN = c.remote.ID, c.id, c.qp.Num()
	if err := m.cm.Send(c.remote.CM, c.remote.CMQPN, msg); err != nil {
		m.log.Debug().Err(err).Msg("hybridft: CM send")
	}
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
	if msg.Src != c.remote.ID {
		return
	}
	m.recStep(c, recEvent{Kind: recMsg, Msg: msg}, now)
}

// recStep feeds ev to c's recovery core and executes the actions, feeding the results of the
// queue pair actions back; it reports whether the core acted (c.mu held).
func (m *Manager) recStep(c *Conn, ev recEvent, now time.Time) bool {
	ev.State, ev.Recoverable = c.state, c.recoverable
	acts := c.rec.Step(ev, now)
	acted := len(acts) > 0
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		res := recEvent{State: c.state, Recoverable: c.recoverable}
		switch a.Kind {
		case recSend:
			msg := a.Msg
			if a.Fill {
				c.fillRecord(&msg, a.FillInc)
			}
			m.send(c, &msg)
			if msg.Type == udcm.REQ {
				m.log.Debug().Uint64("conn", c.id).Uint32("seq", msg.Seq).Uint8("port", msg.Port).Msg("hybridft: REQ")
			}
			continue
		case recCapture:
			m.capture(c)
			n := c.nports()
			res.Kind, res.N, res.Need, res.CapInc, res.PSN = recCaptured, n, c.need(), c.rec.capInc, newPSN()
			if a.Choose {
				if c.rec.pathFault {
					c.paths.Fail(c.primary.Port, now)
					c.rec.pathFault = false
				}
				res.Port, res.PortOK = c.paths.Choose(c.ft.portsUp(n), c.peerUp, now)
				if c.rec.giveBack {
					res.Port, res.PortOK = c.home.Port, true
					c.rec.giveBack = false
					c.stats.giveBacks.Add(1)
				}
			}
			res.PortsUp = c.ft.portsUp(n)
		case recRecycle:
			res.Kind, res.OK = recRecycled, m.recycle(c, a.Port)
		case recConnectQP:
			res.Kind, res.OK = recConnected, m.connect(c, a.Port, a.PeerPort, a.QPN, a.RQPSN, a.SQPSN)
			res.PortsUp = c.ft.portsUp(c.nports())
		case recPeerUp:
			c.peerUp = a.Mask
			continue
		case recMarkFailed:
			if c.state == stNormal || c.state == stReady {
				c.state = stFailed
				if c.outageSince.IsZero() {
					c.outageSince = now
				}
			}
			continue
		case recStorePeer:
			c.storePeerRecord(&a.Msg)
			continue
		case recEstablished:
			c.inc = a.Inc
			c.rec.captured = false
			continue
		case recReady:
			m.ready(c)
			continue
		}
		acts = append(c.rec.Step(res, now), acts...)
	}
	return acted
}

// ready: the queue pair is re-established; re-issue when drained (c.mu held).
func (m *Manager) ready(c *Conn) {
	c.stats.recoveries.Add(1)
	c.state = stReady
	c.tryRepostLocked()
	ev := c.lg.Info().Uint32("incarnation", c.inc).Uint8("port", c.primary.Port)
	if !c.outageSince.IsZero() {
		ev = ev.Dur("outage", time.Since(c.outageSince))
	}
	ev.Msg("hybridft: connection re-established")
	m.post(item{conn: c}) // arm an alternate path
}
