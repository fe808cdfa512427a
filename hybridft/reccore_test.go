package hybridft

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/hybridft/udcm"
)

// Scripted tests of the software recovery core (reccore.go): each feeds events at given times
// and checks the exact actions out. Connection IDs: A 0x11 (the lower, keeps the initiator's
// role), B 0x21; two ports each.

const (
	rctA, rctB   = 0x11, 0x21
	rctResend    = 50 * time.Millisecond
	rctProbe     = 100 * time.Millisecond
	rctPSNA      = 0x100
	rctPSNB      = 0x200
	rctQPNA      = 55
	rctQPNB      = 77
	rctAllPorts  = 3
	rctPortCount = 2
)

var rctT0 = time.Unix(2_000_000, 0)

// events
func rStart(st connState) recEvent { return recEvent{Kind: recStart, State: st, Recoverable: true} }
func rTick(st connState) recEvent  { return recEvent{Kind: recTick, State: st, Recoverable: true} }
func rMsg(st connState, m udcm.Msg) recEvent {
	return recEvent{Kind: recMsg, State: st, Recoverable: true, Msg: &m}
}

// rChosen is the capture result of an initiator that chose port (ok) with our ports up.
func rChosen(port uint8, ok bool, up uint32, psn, need, capInc uint32) recEvent {
	return recEvent{Kind: recCaptured, State: stFailed, Recoverable: true, Need: need, CapInc: capInc, PortsUp: up,
		N: rctPortCount, PSN: psn, Port: port, PortOK: ok}
}

// rCaptured is the capture result of a responder.
func rCaptured(up uint32, psn, need uint32) recEvent {
	return recEvent{Kind: recCaptured, State: stFailed, Recoverable: true, Need: need, PortsUp: up, N: rctPortCount, PSN: psn}
}
func rRecycled(ok bool) recEvent {
	return recEvent{Kind: recRecycled, State: stFailed, Recoverable: true, OK: ok}
}
func rConnected(ok bool) recEvent {
	return recEvent{Kind: recConnected, State: stFailed, Recoverable: true, OK: ok, PortsUp: rctAllPorts}
}

// messages as they arrive (the driver adds Dst, Src and QPN on sending; arriving ones have them)
func mREQ(seq uint32, port, peerPort uint8) udcm.Msg {
	return udcm.Msg{Type: udcm.REQ, Src: rctA, Dst: rctB, QPN: rctQPNA, Seq: seq, Port: port, PeerPort: peerPort,
		Ports: rctAllPorts, PSN: rctPSNA, Inc: seq - 1, EPSN: 9, Atomics: []udcm.Atomic{{PSN: 8, Value: 42}}, Need: seq - 1}
}
func mREQFromB(seq uint32) udcm.Msg {
	m := mREQ(seq, 1, 1)
	m.Src, m.Dst, m.QPN, m.PSN = rctB, rctA, rctQPNB, rctPSNB
	return m
}
func mREP(seq uint32, status uint8, ports uint32) udcm.Msg {
	return udcm.Msg{Type: udcm.REP, Status: status, Src: rctB, Dst: rctA, QPN: rctQPNB, Seq: seq, Port: 1, PeerPort: 1,
		Ports: ports, PSN: rctPSNB, Inc: seq - 1, EPSN: 3, Need: seq - 1}
}
func mACK(seq uint32) udcm.Msg {
	return udcm.Msg{Type: udcm.ACK, Src: rctA, Dst: rctB, QPN: rctQPNA, Seq: seq, Port: 1, PeerPort: 1, Ports: rctAllPorts,
		Inc: seq - 1, EPSN: 4}
}

// actions
func xSend(m udcm.Msg, fill bool, inc uint32) recAction {
	return recAction{Kind: recSend, Msg: m, Fill: fill, FillInc: inc}
}
func xCapture(choose bool) recAction { return recAction{Kind: recCapture, Choose: choose} }
func xRecycle(port uint8) recAction  { return recAction{Kind: recRecycle, Port: port} }
func xConnect(port, peerPort uint8, qpn, rqpsn, sqpsn uint32) recAction {
	return recAction{Kind: recConnectQP, Port: port, PeerPort: peerPort, QPN: qpn, RQPSN: rqpsn, SQPSN: sqpsn}
}
func xPeerUp(mask uint32) recAction     { return recAction{Kind: recPeerUp, Mask: mask} }
func xStore(m udcm.Msg) recAction       { return recAction{Kind: recStorePeer, Msg: m} }
func xEstablished(inc uint32) recAction { return recAction{Kind: recEstablished, Inc: inc} }

var (
	xMarkFailed = recAction{Kind: recMarkFailed}
	xReady      = recAction{Kind: recReady}
)

// what we send (unfilled: the driver adds our record)
func oREQ(seq uint32, port uint8, up uint32, psn, need uint32) udcm.Msg {
	return udcm.Msg{Type: udcm.REQ, Seq: seq, Port: port, PeerPort: port, Ports: up, PSN: psn, Need: need}
}
func oREP(seq uint32, port, peerPort uint8, up uint32, psn, need uint32) udcm.Msg {
	return udcm.Msg{Type: udcm.REP, Seq: seq, Port: port, PeerPort: peerPort, Ports: up, PSN: psn, Need: need}
}
func oACK(seq uint32, port, peerPort uint8) udcm.Msg {
	return udcm.Msg{Type: udcm.ACK, Seq: seq, Port: port, PeerPort: peerPort, Ports: rctAllPorts}
}

type rctStep struct {
	at   time.Duration
	ev   recEvent
	want []recAction
}

// rctInitiate is A's start of recovery seq on port (its REQ out at at).
func rctInitiate(at time.Duration, seq uint32, port uint8) []rctStep {
	return []rctStep{
		{at, rStart(stFailed), []recAction{xCapture(true)}},
		{at, rChosen(port, true, rctAllPorts, rctPSNA, seq-1, seq-1), []recAction{xRecycle(port)}},
		{at, rRecycled(true), []recAction{xSend(oREQ(seq, port, rctAllPorts, rctPSNA, seq-1), true, seq-1)}},
	}
}

// rctAnswer is B's answer to A's REQ seq (B working until then).
func rctAnswer(at time.Duration, seq uint32) []rctStep {
	req := mREQ(seq, 1, 1)
	return []rctStep{
		{at, rMsg(stNormal, req), []recAction{xPeerUp(rctAllPorts), xMarkFailed, xCapture(false)}},
		{at, rCaptured(rctAllPorts, rctPSNB, seq-1), []recAction{xStore(req), xRecycle(1)}},
		{at, rRecycled(true), []recAction{xConnect(1, 1, rctQPNA, rctPSNA, rctPSNB)}},
		{at, rConnected(true), []recAction{xEstablished(seq),
			xSend(oREP(seq, 1, 1, rctAllPorts, rctPSNB, seq-1), true, seq-1)}},
	}
}

// rctComplete is A's completion on B's REP seq.
func rctComplete(at time.Duration, seq uint32) []rctStep {
	rep := mREP(seq, udcm.StatusOK, rctAllPorts)
	return []rctStep{
		{at, rMsg(stFailed, rep), []recAction{xPeerUp(rctAllPorts), xStore(rep), xConnect(1, 1, rctQPNB, rctPSNB, rctPSNA)}},
		{at, rConnected(true), []recAction{xEstablished(seq), xSend(oACK(seq, 1, 1), true, seq-1), xReady}},
	}
}

func TestRecCoreScripts(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		id     uint64
		script []rctStep
		phase  phase
		seq    uint32
		op     recOp // opStart: the script ends on a capture to run
	}{
		{
			name: "initiator: REQ, REP, ACK; a duplicate REP (lost ACK) answered by the ACK", id: rctA,
			script: rctJoin(rctInitiate(0, 1, 1), rctComplete(10*ms, 1), []rctStep{
				{20 * ms, rTick(stReady), nil},
				{30 * ms, rMsg(stNormal, mREP(1, udcm.StatusOK, rctAllPorts)), []recAction{xSend(oACK(1, 1, 1), true, 0)}},
				{40 * ms, rMsg(stNormal, mACK(1)), nil}, // an ACK at the initiator: no exchange waits for it
				{500 * ms, rTick(stNormal), nil},
			}),
			phase: phIdle, seq: 1,
		},
		{
			name: "initiator: lost REQ resent every Resend until the REP", id: rctA,
			script: rctJoin(rctInitiate(0, 1, 1), []rctStep{
				{49 * ms, rTick(stFailed), nil},
				{50 * ms, rTick(stFailed), []recAction{xSend(oREQ(1, 1, rctAllPorts, rctPSNA, 0), true, 0)}},
				{99 * ms, rTick(stFailed), nil},
				{100 * ms, rTick(stFailed), []recAction{xSend(oREQ(1, 1, rctAllPorts, rctPSNA, 0), true, 0)}},
			}, rctComplete(120*ms, 1), []rctStep{{200 * ms, rTick(stReady), nil}}),
			phase: phIdle, seq: 1,
		},
		{
			name: "responder: REP; a duplicate REQ (lost REP) and the timer resend it; ACK; later duplicates and older REQs ignored",
			id:   rctB,
			script: rctJoin(rctAnswer(0, 1), []rctStep{
				{10 * ms, rMsg(stFailed, mREQ(1, 1, 1)), []recAction{xSend(oREP(1, 1, 1, rctAllPorts, rctPSNB, 0), true, 0)}},
				{20 * ms, rTick(stFailed), nil},
				{60 * ms, rTick(stFailed), []recAction{xSend(oREP(1, 1, 1, rctAllPorts, rctPSNB, 0), true, 0)}},
				{70 * ms, rMsg(stFailed, mACK(1)), []recAction{xStore(mACK(1)), xReady}},
				{80 * ms, rMsg(stReady, mACK(1)), nil},
				{90 * ms, rMsg(stNormal, mREQ(1, 1, 1)), nil},
				{100 * ms, rMsg(stNormal, mREQ(0, 1, 1)), nil},
				{200 * ms, rTick(stNormal), nil},
			}),
			phase: phIdle, seq: 1,
		},
		{
			name: "reordered: an ACK before its REQ, a REP of a later sequence, a REP of an earlier one", id: rctB,
			script: rctJoin([]rctStep{{0, rMsg(stNormal, mACK(1)), nil}}, rctAnswer(ms, 1), []rctStep{
				{2 * ms, rMsg(stFailed, mREP(2, udcm.StatusOK, rctAllPorts)), nil},
				{3 * ms, rMsg(stFailed, mREP(0, udcm.StatusOK, rctAllPorts)), nil},
			}),
			phase: phRepSent, seq: 1,
		},
		{
			name: "simultaneous starts, lower ID: ignores the peer's REQ and stays initiator", id: rctA,
			script: rctJoin(rctInitiate(0, 1, 1), []rctStep{
				{5 * ms, rMsg(stFailed, mREQFromB(1)), nil},
			}, rctComplete(10*ms, 1)),
			phase: phIdle, seq: 1,
		},
		{
			name: "simultaneous starts, higher ID: gives up its REQ and answers the lower's", id: rctB,
			script: rctJoin(rctInitiate(0, 1, 1), []rctStep{
				{5 * ms, rMsg(stFailed, mREQ(1, 1, 1)), []recAction{xPeerUp(rctAllPorts), xCapture(false)}},
				{5 * ms, rCaptured(rctAllPorts, rctPSNB, 0), []recAction{xStore(mREQ(1, 1, 1)), xRecycle(1)}},
				{5 * ms, rRecycled(true), []recAction{xConnect(1, 1, rctQPNA, rctPSNA, rctPSNB)}},
				{5 * ms, rConnected(true), []recAction{xEstablished(1), xSend(oREP(1, 1, 1, rctAllPorts, rctPSNB, 0), true, 0)}},
				{6 * ms, rMsg(stFailed, mACK(1)), []recAction{xStore(mACK(1)), xReady}},
			}),
			phase: phIdle, seq: 1,
		},
		{
			name: "a new fault during the exchange: a REQ of a higher sequence restarts the responder", id: rctB,
			script: rctJoin(rctAnswer(0, 1), []rctStep{
				{10 * ms, rMsg(stFailed, mREQ(2, 1, 1)), []recAction{xPeerUp(rctAllPorts), xCapture(false)}},
				{10 * ms, rCaptured(rctAllPorts, rctPSNB, 1), []recAction{xStore(mREQ(2, 1, 1)), xRecycle(1)}},
				{10 * ms, rRecycled(true), []recAction{xConnect(1, 1, rctQPNA, rctPSNA, rctPSNB)}},
				{10 * ms, rConnected(true), []recAction{xEstablished(2), xSend(oREP(2, 1, 1, rctAllPorts, rctPSNB, 1), true, 1)}},
				{20 * ms, rMsg(stFailed, mACK(1)), nil}, // of the old sequence
				{30 * ms, rMsg(stFailed, mACK(2)), []recAction{xStore(mACK(2)), xReady}},
			}),
			phase: phIdle, seq: 2,
		},
		{
			name: "REP PathDown: the initiator chooses another path at its next tick, with the next sequence", id: rctA,
			script: rctJoin(rctInitiate(0, 1, 1), []rctStep{
				{10 * ms, rMsg(stFailed, mREP(1, udcm.StatusPathDown, 2)), []recAction{xPeerUp(2)}},
				{10 * ms, rTick(stFailed), []recAction{xCapture(true)}},
				{10 * ms, rChosen(2, true, rctAllPorts, rctPSNA, 0, 0), []recAction{xRecycle(2)}},
				{10 * ms, rRecycled(true), []recAction{xSend(oREQ(2, 2, rctAllPorts, rctPSNA, 0), true, 0)}},
				{20 * ms, rMsg(stFailed, mREP(1, udcm.StatusOK, rctAllPorts)), nil}, // stale: older sequence
			}),
			phase: phReqSent, seq: 2,
		},
		{
			name: "responder: the proposed port is down: REP PathDown (no record), no recycle, own retry after 4 probes",
			id:   rctB,
			script: []rctStep{
				{0, rMsg(stNormal, mREQ(1, 1, 2)), []recAction{xPeerUp(rctAllPorts), xMarkFailed, xCapture(false)}},
				{0, rCaptured(1, rctPSNB, 0), []recAction{xStore(mREQ(1, 1, 2)),
					xSend(udcm.Msg{Type: udcm.REP, Status: udcm.StatusPathDown, Seq: 1, Port: 2, PeerPort: 1, Ports: 1}, false, 0)}},
				{50 * ms, rTick(stFailed), nil},
				{399 * ms, rTick(stFailed), nil},
				{400 * ms, rTick(stFailed), []recAction{xCapture(true)}},
			},
			phase: phIdle, seq: 1, op: opStart,
		},
		{
			name: "responder: a REQ proposing port 0 or past our ports: REP PathDown", id: rctB,
			script: []rctStep{
				{0, rMsg(stFailed, mREQ(1, 3, 1)), []recAction{xPeerUp(rctAllPorts), xCapture(false)}},
				{0, rCaptured(rctAllPorts, rctPSNB, 0), []recAction{xStore(mREQ(1, 3, 1)),
					xSend(udcm.Msg{Type: udcm.REP, Status: udcm.StatusPathDown, Seq: 1, Port: 1, PeerPort: 3, Ports: 3}, false, 0)}},
				{1 * ms, rMsg(stFailed, mREQ(2, 1, 0)), []recAction{xPeerUp(rctAllPorts), xCapture(false)}},
				{1 * ms, rCaptured(rctAllPorts, rctPSNB, 0), []recAction{xStore(mREQ(2, 1, 0)),
					xSend(udcm.Msg{Type: udcm.REP, Status: udcm.StatusPathDown, Seq: 2, PeerPort: 1, Ports: 3}, false, 0)}},
			},
			phase: phIdle, seq: 2,
		},
		{
			name: "no path (partition): all the peer's ports assumed up, probe again after Probe", id: rctA,
			script: []rctStep{
				{0, rStart(stFailed), []recAction{xCapture(true)}},
				{0, rChosen(0, false, 0, rctPSNA, 0, 0), []recAction{xPeerUp(rctAllPorts)}},
				{0, rStart(stFailed), []recAction{xCapture(true)}}, // a kick does not wait for the probe
				{0, rChosen(0, false, 0, rctPSNA, 0, 0), []recAction{xPeerUp(rctAllPorts)}},
				{99 * ms, rTick(stFailed), nil},
				{100 * ms, rTick(stFailed), []recAction{xCapture(true)}},
				{100 * ms, rChosen(1, true, 1, rctPSNA, 0, 0), []recAction{xRecycle(1)}},
				{100 * ms, rRecycled(true), []recAction{xSend(oREQ(1, 1, 1, rctPSNA, 0), true, 0)}},
			},
			phase: phReqSent, seq: 1,
		},
		{
			name: "initiator: recycling fails: retry after Probe, the sequence unused", id: rctA,
			script: []rctStep{
				{0, rStart(stFailed), []recAction{xCapture(true)}},
				{0, rChosen(1, true, rctAllPorts, rctPSNA, 0, 0), []recAction{xRecycle(1)}},
				{0, rRecycled(false), nil},
				{99 * ms, rTick(stFailed), nil},
				{100 * ms, rTick(stFailed), []recAction{xCapture(true)}},
			},
			phase: phIdle, seq: 0, op: opStart,
		},
		{
			name: "initiator: connecting on the REP fails: retry after Probe with the next sequence", id: rctA,
			script: rctJoin(rctInitiate(0, 1, 1), []rctStep{
				{10 * ms, rMsg(stFailed, mREP(1, udcm.StatusOK, rctAllPorts)), []recAction{xPeerUp(rctAllPorts),
					xStore(mREP(1, udcm.StatusOK, rctAllPorts)), xConnect(1, 1, rctQPNB, rctPSNB, rctPSNA)}},
				{10 * ms, rConnected(false), nil},
				{60 * ms, rMsg(stFailed, mREP(1, udcm.StatusOK, rctAllPorts)), nil}, // no ACK: not acked
				{109 * ms, rTick(stFailed), nil},
			}, rctInitiate(110*ms, 2, 1)),
			phase: phReqSent, seq: 2,
		},
		{
			name: "responder: recycle or connect fails: no REP; its duplicate REQ is not answered; own retry after Probe",
			id:   rctB,
			script: []rctStep{
				{0, rMsg(stNormal, mREQ(1, 1, 1)), []recAction{xPeerUp(rctAllPorts), xMarkFailed, xCapture(false)}},
				{0, rCaptured(rctAllPorts, rctPSNB, 0), []recAction{xStore(mREQ(1, 1, 1)), xRecycle(1)}},
				{0, rRecycled(false), nil},
				{10 * ms, rMsg(stFailed, mREQ(1, 1, 1)), nil},
				{100 * ms, rTick(stFailed), []recAction{xCapture(true)}},
				{100 * ms, rChosen(1, true, rctAllPorts, rctPSNB, 0, 0), []recAction{xRecycle(1)}},
				{100 * ms, rRecycled(true), []recAction{xSend(oREQ(2, 1, rctAllPorts, rctPSNB, 0), true, 0)}},
				{110 * ms, rMsg(stFailed, mREQ(3, 1, 1)), []recAction{xPeerUp(rctAllPorts), xCapture(false)}},
				{110 * ms, rCaptured(rctAllPorts, rctPSNB, 0), []recAction{xStore(mREQ(3, 1, 1)), xRecycle(1)}},
				{110 * ms, rRecycled(true), []recAction{xConnect(1, 1, rctQPNA, rctPSNA, rctPSNB)}},
				{110 * ms, rConnected(false), nil},
				{209 * ms, rTick(stFailed), nil},
				{210 * ms, rTick(stFailed), []recAction{xCapture(true)}},
			},
			phase: phIdle, seq: 3, op: opStart,
		},
		{
			name: "given up (partition timeout): no more resends or retries", id: rctA,
			script: rctJoin(rctInitiate(0, 1, 1), []rctStep{
				{10 * ms, recEvent{Kind: recAbort}, nil},
				{100 * ms, rTick(stDead), nil},
				{100 * ms, rStart(stDead), nil},
				{110 * ms, rMsg(stDead, mREP(1, udcm.StatusOK, rctAllPorts)), nil},
			}),
			phase: phIdle, seq: 1,
		},
		{
			name: "not recoverable, or working: nothing starts; messages ignored when not recoverable", id: rctB,
			script: []rctStep{
				{0, recEvent{Kind: recStart, State: stFailed}, nil},
				{0, rStart(stNormal), nil},
				{0, rStart(stReady), nil},
				{0, recEvent{Kind: recMsg, State: stNormal, Msg: &udcm.Msg{Type: udcm.REQ, Seq: 1, Src: rctA}}, nil},
				{0, recEvent{Kind: recTick, State: stFailed}, nil},
				{0, rRecycled(true), nil}, // a result nobody waits for
				{0, rConnected(true), nil},
				{0, rCaptured(rctAllPorts, 1, 0), nil},
			},
			phase: phIdle, seq: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newRecCore(tc.id, rctResend, rctProbe)
			for i, s := range tc.script {
				got := c.Step(s.ev, rctT0.Add(s.at))
				require.Equal(t, s.want, got, "step %d (%v at %v)", i, s.ev.Kind, s.at)
			}
			require.Equal(t, tc.phase, c.phase, "phase")
			require.Equal(t, tc.seq, c.seq, "sequence")
			require.Equal(t, tc.op, c.op, "queue pair action pending")
		})
	}
}

func rctJoin(ss ...[]rctStep) []rctStep {
	var out []rctStep
	for _, s := range ss {
		out = append(out, s...)
	}
	return out
}

// A message the core keeps is a copy: the driver's buffer may be reused.
func TestRecCoreCopiesMessages(t *testing.T) {
	c := newRecCore(rctB, rctResend, rctProbe)
	req := mREQ(1, 1, 1)
	acts := c.Step(rMsg(stNormal, req), rctT0)
	require.Len(t, acts, 3)
	req.Atomics[0].Value, req.PSN = 0, 0
	acts = c.Step(rCaptured(rctAllPorts, rctPSNB, 0), rctT0)
	require.Equal(t, uint64(42), acts[0].Msg.Atomics[0].Value)
	acts = c.Step(rRecycled(true), rctT0)
	require.Equal(t, uint32(rctPSNA), acts[0].RQPSN)
}

// The timer deadline: the pending message's resend, else a failed connection's retry.
func TestRecCoreNext(t *testing.T) {
	c := newRecCore(rctA, rctResend, rctProbe)
	require.True(t, c.Next(stNormal).IsZero())
	require.Equal(t, time.Time{}, c.Next(stFailed), "a failed connection retries at once")
	c.Step(rStart(stFailed), rctT0)
	c.Step(rChosen(0, false, 0, rctPSNA, 0, 0), rctT0)
	require.Equal(t, rctT0.Add(rctProbe), c.Next(stFailed), "no path: probe")
	for _, s := range rctInitiate(rctProbe, 1, 1) {
		c.Step(s.ev, rctT0.Add(s.at))
	}
	require.Equal(t, rctT0.Add(rctProbe+rctResend), c.Next(stFailed), "REQ resend")
	c.Step(rTick(stFailed), rctT0.Add(rctProbe+rctResend))
	require.Equal(t, rctT0.Add(rctProbe+2*rctResend), c.Next(stFailed))
}
