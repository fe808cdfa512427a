package hybridft

import (
	"time"

	"github.com/goarmci/goarmci/hybridft/udcm"
)

// recCore is the pure state machine of one connection's software re-establishment
// ([Vishnu09 §IV.C], Fig. 8; the per-pair sequence IDs of [Vishnu09 §IV.D]), in the style of
// etcd/raft's Step: events in, actions out. It starts no goroutine, reads no clock (time is
// Step's argument), does no I/O, takes no lock and draws no random number (a fresh PSN comes in
// an event). The driver (the Manager's protocol goroutine, recover.go) holds the connection's
// lock around Step, executes the actions in order and feeds the result of a queue pair action
// (recCaptured, recRecycled, recConnected) back before the actions that follow it.
//
//	A (initiator)                                 B (responder)
//	recCapture (QP→ERROR, drain, capture),
//	recRecycle (RESET→INIT on the chosen port)
//	REQ{seq, port, PSN_A, record of A}      ──▶  recMarkFailed, recCapture, recStorePeer,
//	                                             recRecycle, recConnectQP (RTR, RTS: PSN_B),
//	                                        ◀──  recEstablished, REP{seq, PSN_B, record of B}
//	recStorePeer, recConnectQP (RTR, RTS),
//	recEstablished, ACK{seq, record of A},
//	recReady (re-issue exactly once)        ──▶  recStorePeer, recReady
//
// REQ and REP are resent every resend until answered (recTick); a duplicate REQ is answered by
// the cached REP, a duplicate REP by the cached ACK, other duplicates and messages of an older
// sequence are ignored. When both sides start at once, the lower connection ID keeps the
// initiator's role. A REP with StatusPathDown sends the initiator back to choosing a path at its
// next tick; a failed recycle or connect retries after probe; no path retries after probe.
// Messages carry our responder record (Fill): the driver fills it in at each send from the
// incarnation FillInc's captured record, which does not change once captured.
type recCore struct {
	id            uint64        // our connection identifier (the tie-break)
	resend, probe time.Duration // Options.Resend, Options.Probe

	phase    phase
	seq      uint32 // highest recovery sequence seen or used
	port     uint8  // proposed port (initiator)
	psn      uint32 // our first PSN on the recycled queue pair
	lastSend time.Time
	retryAt  time.Time
	acked    uint32   // the sequence our last ACK confirmed
	lastMsg  udcm.Msg // the message to resend (REQ, REP, ACK; its record filled at send)
	lastInc  uint32   // the incarnation whose record lastMsg carries

	op   recOp    // the exchange waiting for a queue pair action's result
	in   udcm.Msg // the message that exchange answers (REQ, REP), or the REQ it will send
	next udcm.Msg // the REP it will send (opAnswer)
	inc  uint32   // the incarnation of our record the REQ carries (opStart)
}

type phase uint8

const (
	phIdle    phase = iota
	phReqSent       // initiator, waiting for REP
	phRepSent       // responder, waiting for ACK
)

type recOp uint8

const (
	opNone     recOp = iota
	opStart          // initiator: capture, choose a path, recycle, send REQ
	opAnswer         // responder: capture, recycle, connect, send REP
	opComplete       // initiator: connect on the REP, send ACK
)

type recEventKind uint8

const (
	recStart     recEventKind = iota + 1 // a kick: the connection may have failed (State)
	recTick                              // the timers' time: resend, retry
	recMsg                               // Msg arrived (REQ, REP or ACK from the connection's peer)
	recCaptured                          // result of recCapture: Need, CapInc, PortsUp, PSN, N; with Choose: Port, PortOK
	recRecycled                          // result of recRecycle: OK
	recConnected                         // result of recConnectQP: OK, PortsUp
	recAbort                             // the connection was given up (partition timeout)
)

// recEvent is an input of recCore.Step.
type recEvent struct {
	Kind        recEventKind
	State       connState // the connection's state now
	Recoverable bool      // it can be re-established (a recovery driver, connected with v2 info)
	Msg         *udcm.Msg // recMsg (copied when kept)

	Need    uint32 // the incarnation whose peer record our failed requests need
	CapInc  uint32 // the incarnation our captured record describes
	PortsUp uint32 // our ports up, bit p-1 for port p
	N       uint8  // the connection's port count
	PSN     uint32 // a fresh 24-bit PSN
	Port    uint8  // recCaptured after a Choose: the path repository's port
	PortOK  bool   // a port was found
	OK      bool   // recRecycled, recConnected
}

type recActionKind uint8

const (
	recSend        recActionKind = iota + 1 // send Msg to the peer's CM (Fill: with our record of FillInc)
	recCapture                              // QP→ERROR if not there, capture flushed requests and the responder record once per incarnation; with Choose also mark a path fault and choose a port (recovery.Paths); answer recCaptured
	recRecycle                              // QP RESET→INIT on Port; answer recRecycled
	recConnectQP                            // QP RTR (Port, PeerPort, QPN, RQPSN) → RTS (SQPSN); answer recConnected
	recPeerUp                               // the peer's ports up are Mask
	recMarkFailed                           // a working connection is failed now (the peer saw the fault first)
	recStorePeer                            // keep the peer's responder record Msg carries
	recEstablished                          // the queue pair is incarnation Inc (a new capture is due at its next fault)
	recReady                                // re-established: re-issue the failed requests exactly once
)

// recAction is an output of recCore.Step.
type recAction struct {
	Kind     recActionKind
	Msg      udcm.Msg
	Fill     bool
	FillInc  uint32
	Choose   bool
	Port     uint8
	PeerPort uint8
	QPN      uint32
	RQPSN    uint32
	SQPSN    uint32
	Mask     uint32
	Inc      uint32
}

func newRecCore(id uint64, resend, probe time.Duration) recCore {
	return recCore{id: id, resend: resend, probe: probe}
}

// Next is when the core's timer fires for a connection in state st (zero: none): the resend
// of the pending REQ or REP, else the retry of a failed connection's recovery.
func (c *recCore) Next(st connState) time.Time {
	switch {
	case c.phase != phIdle:
		return c.lastSend.Add(c.resend)
	case st == stFailed && c.op == opNone:
		return c.retryAt
	}
	return time.Time{}
}

// Step applies ev at time now and returns the actions to execute, in order.
func (c *recCore) Step(ev recEvent, now time.Time) []recAction {
	var out []recAction
	switch ev.Kind {
	case recStart:
		out = c.start(ev, out)
	case recTick:
		switch {
		case c.phase != phIdle && now.Sub(c.lastSend) >= c.resend:
			out = c.resendLast(now, out)
		case ev.State == stFailed && c.phase == phIdle && !now.Before(c.retryAt):
			out = c.start(ev, out)
		}
	case recMsg:
		if ev.State == stDead || !ev.Recoverable {
			break
		}
		switch ev.Msg.Type {
		case udcm.REQ:
			out = c.onREQ(ev, now, out)
		case udcm.REP:
			out = c.onREP(ev, now, out)
		case udcm.ACK:
			if ev.Msg.Seq != c.seq || c.phase != phRepSent {
				break
			}
			c.phase = phIdle
			out = append(out, recAction{Kind: recStorePeer, Msg: copyRecMsg(ev.Msg)}, recAction{Kind: recReady})
		}
	case recCaptured:
		out = c.captured(ev, now, out)
	case recRecycled:
		out = c.recycled(ev, now, out)
	case recConnected:
		out = c.connected(ev, now, out)
	case recAbort:
		c.phase, c.op = phIdle, opNone
	}
	return out
}

func copyRecMsg(m *udcm.Msg) udcm.Msg {
	cp := *m
	cp.Atomics = append([]udcm.Atomic(nil), m.Atomics...)
	cp.Payload = nil
	return cp
}

func (c *recCore) start(ev recEvent, out []recAction) []recAction {
	if ev.State != stFailed || c.phase != phIdle || !ev.Recoverable || c.op != opNone {
		return out
	}
	c.op = opStart
	return append(out, recAction{Kind: recCapture, Choose: true})
}

func (c *recCore) send(m udcm.Msg, fill bool, inc uint32, keep bool, now time.Time, out []recAction) []recAction {
	c.lastSend = now
	if keep {
		c.lastMsg, c.lastInc = m, inc
	}
	return append(out, recAction{Kind: recSend, Msg: m, Fill: fill, FillInc: inc})
}

func (c *recCore) resendLast(now time.Time, out []recAction) []recAction {
	return c.send(c.lastMsg, true, c.lastInc, false, now, out)
}

func (c *recCore) captured(ev recEvent, now time.Time, out []recAction) []recAction {
	switch c.op {
	case opStart:
		if !ev.PortOK {
			// no path (partition): probe again later; the peer may also tell us a port is back
			c.op, c.retryAt = opNone, now.Add(c.probe)
			return append(out, recAction{Kind: recPeerUp, Mask: 1<<ev.N - 1})
		}
		c.port, c.psn, c.inc = ev.Port, ev.PSN, ev.CapInc
		c.in = udcm.Msg{Type: udcm.REQ, Port: ev.Port, PeerPort: ev.Port, Ports: ev.PortsUp, PSN: ev.PSN, Need: ev.Need}
		return append(out, recAction{Kind: recRecycle, Port: ev.Port})
	case opAnswer:
		req := &c.in
		out = append(out, recAction{Kind: recStorePeer, Msg: copyRecMsg(req)})
		c.phase = phIdle
		port := req.PeerPort
		rep := udcm.Msg{Type: udcm.REP, Seq: req.Seq, Port: port, PeerPort: req.Port, Ports: ev.PortsUp, Need: ev.Need}
		if port == 0 || port > ev.N || req.Port == 0 || req.Port > ev.N || rep.Ports&(1<<(port-1)) == 0 {
			rep.Status = udcm.StatusPathDown
			c.op, c.retryAt = opNone, now.Add(4*c.probe) // leave the next move to the initiator
			return c.send(rep, false, 0, false, now, out)
		}
		c.psn = ev.PSN
		c.next = rep
		return append(out, recAction{Kind: recRecycle, Port: port})
	}
	return out
}

func (c *recCore) recycled(ev recEvent, now time.Time, out []recAction) []recAction {
	switch c.op {
	case opStart:
		c.op = opNone
		if !ev.OK {
			c.retryAt = now.Add(c.probe)
			return out
		}
		c.seq++
		req := c.in
		req.Seq = c.seq
		c.phase = phReqSent
		return c.send(req, true, c.inc, true, now, out)
	case opAnswer:
		if !ev.OK {
			c.op, c.retryAt = opNone, now.Add(c.probe)
			return out
		}
		req := &c.in
		return append(out, recAction{Kind: recConnectQP, Port: req.PeerPort, PeerPort: req.Port, QPN: req.QPN,
			RQPSN: req.PSN, SQPSN: c.psn})
	}
	return out
}

func (c *recCore) connected(ev recEvent, now time.Time, out []recAction) []recAction {
	op := c.op
	if op != opAnswer && op != opComplete {
		return out
	}
	c.op = opNone
	if !ev.OK {
		c.retryAt = now.Add(c.probe)
		return out
	}
	in := &c.in
	out = append(out, recAction{Kind: recEstablished, Inc: in.Seq})
	if op == opAnswer {
		rep := c.next // built at the capture
		rep.PSN = c.psn
		c.phase = phRepSent
		return c.send(rep, true, in.Need, true, now, out)
	}
	ack := udcm.Msg{Type: udcm.ACK, Seq: in.Seq, Port: c.port, PeerPort: in.Port, Ports: ev.PortsUp}
	c.acked = in.Seq
	out = c.send(ack, true, in.Need, true, now, out)
	return append(out, recAction{Kind: recReady})
}

func (c *recCore) onREQ(ev recEvent, now time.Time, out []recAction) []recAction {
	msg := ev.Msg
	switch {
	case msg.Seq < c.seq:
		return out
	case msg.Seq == c.seq:
		if c.phase == phRepSent {
			return c.resendLast(now, out) // duplicate REQ: the REP was lost
		}
		if c.phase != phReqSent || c.id < msg.Src {
			return out // a duplicate of a finished exchange, or we keep the initiator's role
		}
	}
	c.seq = msg.Seq
	out = append(out, recAction{Kind: recPeerUp, Mask: msg.Ports})
	if ev.State == stNormal || ev.State == stReady {
		out = append(out, recAction{Kind: recMarkFailed})
	}
	c.op, c.in = opAnswer, copyRecMsg(msg)
	return append(out, recAction{Kind: recCapture})
}

func (c *recCore) onREP(ev recEvent, now time.Time, out []recAction) []recAction {
	msg := ev.Msg
	if msg.Seq != c.seq {
		return out
	}
	if c.phase == phIdle && c.acked == msg.Seq {
		return c.resendLast(now, out) // our ACK was lost
	}
	if c.phase != phReqSent {
		return out
	}
	out = append(out, recAction{Kind: recPeerUp, Mask: msg.Ports})
	c.phase = phIdle
	if msg.Status&udcm.StatusPathDown != 0 {
		c.retryAt = now // choose another path at the next tick
		return out
	}
	c.op, c.in = opComplete, copyRecMsg(msg)
	return append(out, recAction{Kind: recStorePeer, Msg: copyRecMsg(msg)},
		recAction{Kind: recConnectQP, Port: c.port, PeerPort: msg.Port, QPN: msg.QPN, RQPSN: msg.PSN, SQPSN: c.psn})
}
