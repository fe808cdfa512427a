package hybridft

import (
	"testing"
	"time"

	"github.com/goarmci/goarmci/hybridft/udcm"
)

// Scripted tests of the core's admission and disconnect (CONN_DREQ/DREP): the harness and the
// setup's helpers are those of odcore_test.go. Processes 1 (a), 2 (b), 3 (c).

// DREQ carries the sender's address; DREP nothing.
func odtDREQ(from, to, nonce uint32) udcm.Msg {
	return odtMsg(udcm.ConnDREQ, from, to, nonce, odtAddrBytes(from))
}
func odtDREP(from, to, nonce uint32) udcm.Msg { return odtMsg(udcm.ConnDREP, from, to, nonce, nil) }

// odtProbe: a DREQ that asks whether the receiver still holds the connection (udcm.DREQProbe).
func odtProbe(from, to, nonce uint32) udcm.Msg {
	m := odtDREQ(from, to, nonce)
	m.Status = udcm.DREQProbe
	return m
}

func evAdmitted(m udcm.Msg, ok bool) odEvent { return odEvent{Kind: odAdmitted, Msg: &m, OK: ok} }
func evDisconnect(peer uint32) odEvent       { return odEvent{Kind: odDisconnect, Peer: peer} }
func evLeave(peer uint32, gen uint64) odEvent {
	return odEvent{Kind: odLeave, Peer: peer, Gen: gen}
}
func evReleased(peer uint32, gen uint64) odEvent {
	return odEvent{Kind: odReleased, Peer: peer, Gen: gen}
}

var evClose = odEvent{Kind: odClose}

func aAdmit(peer uint32, m udcm.Msg) odAction       { return odAction{Kind: odAdmit, Peer: peer, Msg: m} }
func aRelease(peer uint32) odAction                 { return odAction{Kind: odRelease, Peer: peer} }
func aGone(peer uint32, err error) odAction         { return odAction{Kind: odGone, Peer: peer, Err: err} }
func aNotConnected(peer uint32) odAction            { return odAction{Kind: odNotConnected, Peer: peer} }
func odtREJRefused(from, to, nonce uint32) udcm.Msg { return odtREJ(from, to, nonce, udcm.RejRefused) }

// odtDialed: self dials peer with nonce, established at 10 ms, the Dial gone (entry gen 1).
func odtDialed(peer, self, nonce uint32) []odtStep {
	return odtJoin(odtDialUp(peer, self, nonce), []odtStep{
		{10 * time.Millisecond, evMsg(odtREP(peer, self, nonce, 2, 1)), []odAction{aConnect(peer, odtInfos(peer, 2, 1))}},
		{10 * time.Millisecond, evConnected(peer, nil), []odAction{aSend(peer, odtRTU(self, peer, nonce)), aEstablished(peer, true)}},
		{10 * time.Millisecond, evUnwait(peer, 1), nil},
	})
}

// odtAccepted: self accepts peer's dial of nonce, established at 10 ms (entry gen 1).
func odtAccepted(peer, self, nonce uint32) []odtStep {
	return []odtStep{
		{0, evMsg(odtREQ(peer, self, nonce, 2, 1)), []odAction{aCreate(peer, 2, odtInfos(peer, 2, 1))}},
		{0, evCreated(peer, self, 2, 1), []odAction{aSend(peer, odtREP(self, peer, nonce, 2, 1))}},
		{10 * time.Millisecond, evMsg(odtRTU(peer, self, nonce)), []odAction{aEstablished(peer, false)}},
	}
}

func TestODCoreDisconnectScripts(t *testing.T) {
	const a, b, c = 1, 2, 3
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		self   uint32
		giveUp time.Duration // 0: odtGiveUp
		script []odtStep
		stats  OnDemandStats
		role   map[uint32]odRole
	}{
		{
			name: "disconnect: DREQ resent until the DREP, then forgotten; a late DREP ignored; the next Dial is a new attempt",
			self: a,
			script: odtJoin(odtDialed(b, a, 7), []odtStep{
				{100 * ms, evDisconnect(b), []odAction{aSend(b, odtDREQ(a, b, 7))}},
				{100 * ms, evDisconnect(b), nil},              // a second Disconnect joins
				{101 * ms, evMsg(odtREP(b, a, 7, 2, 1)), nil}, // a late REP: not answered with the RTU any more
				{149 * ms, evTick, nil},
				{150 * ms, evTick, []odAction{aSend(b, odtDREQ(a, b, 7))}},
				{160 * ms, evMsg(odtDREP(b, a, 7)), []odAction{aGone(b, nil)}},
				{161 * ms, evMsg(odtDREP(b, a, 7)), nil}, // the copy on rail 2
				{170 * ms, evLeave(b, 1), nil},
				{170 * ms, evLeave(b, 1), nil},
				{200 * ms, evDial(b, 9), []odAction{aCreate(b, 2, nil)}},
				{200 * ms, evCreated(b, a, 2, 2), []odAction{aSend(b, odtREQ(a, b, 9, 2, 2))}},
				{210 * ms, evMsg(odtREP(b, a, 9, 2, 3)), []odAction{aConnect(b, odtInfos(b, 2, 3))}},
				{210 * ms, evConnected(b, nil), []odAction{aSend(b, odtRTU(a, b, 9)), aEstablished(b, true)}},
			}),
			stats: OnDemandStats{Dialed: 2, Resent: 1, Disconnected: 1, Ignored: 2}, role: map[uint32]odRole{b: odDone},
		},
		{
			name: "passive: DREQ calls release once; copies and resends wait for it; done sends the DREP and forgets; " +
				"a DREQ resent after (our DREP lost) is answered at once, its copies are not",
			self: b,
			script: odtJoin(odtAccepted(a, b, 7), []odtStep{
				{100 * ms, evMsg(odtDREQ(a, b, 7)), []odAction{aRelease(a)}},
				{100 * ms, evMsg(odtDREQ(a, b, 7)), nil},
				{150 * ms, evMsg(odtDREQ(a, b, 7)), nil},
				{150 * ms, evDial(a, 9), nil}, // the driver waits for the disconnect to end
				{150 * ms, evTick, nil},       // no timer while the consumer releases
				{160 * ms, evReleased(a, 1), []odAction{aSend(a, odtDREP(b, a, 7)), aGone(a, nil)}},
				{161 * ms, evReleased(a, 1), nil}, // done called twice
				{210 * ms, evMsg(odtDREQ(a, b, 7)), []odAction{aSend(a, odtDREP(b, a, 7))}},
				{211 * ms, evMsg(odtDREQ(a, b, 7)), nil},
			}),
			stats: OnDemandStats{Accepted: 1, Disconnected: 1, Ignored: 2}, role: map[uint32]odRole{a: 0},
		},
		{
			name: "lost DREQs: resent every Resend; no DREP within the give-up time: ErrPartition, forgotten", self: a,
			script: func() []odtStep {
				s := odtJoin(odtDialed(b, a, 7), []odtStep{{100 * ms, evDisconnect(b), []odAction{aSend(b, odtDREQ(a, b, 7))}}})
				for at := 150 * ms; at < 100*ms+odtGiveUp; at += odtResend {
					s = append(s, odtStep{at, evTick, []odAction{aSend(b, odtDREQ(a, b, 7))}})
				}
				return append(s, odtStep{100*ms + odtGiveUp, evTick, []odAction{aGone(b, ErrPartition)}},
					odtStep{100*ms + odtGiveUp, evMsg(odtDREP(b, a, 7)), nil})
			}(),
			stats: OnDemandStats{Dialed: 1, Resent: int64(odtGiveUp/odtResend) - 1, Ignored: 1}, role: map[uint32]odRole{b: 0},
		},
		{
			name: "no give-up time (PartitionTimeout < 0): resent while a Disconnect waits, then odIdleResends more", self: a,
			giveUp: -1,
			script: func() []odtStep {
				s := odtJoin(odtDialed(b, a, 7), []odtStep{{100 * ms, evDisconnect(b), []odAction{aSend(b, odtDREQ(a, b, 7))}}})
				at := 100 * ms
				for i := 0; i < 2*odIdleResends; i++ { // a Disconnect waits: no bound
					at += odtResend
					s = append(s, odtStep{at, evTick, []odAction{aSend(b, odtDREQ(a, b, 7))}})
				}
				s = append(s, odtStep{at, evLeave(b, 1), nil})
				// the resend count is past the idle bound already: the next tick gives up
				return append(s, odtStep{at + odtResend, evTick, []odAction{aGone(b, ErrPartition)}})
			}(),
			stats: OnDemandStats{Dialed: 1, Resent: 2 * odIdleResends}, role: map[uint32]odRole{b: 0},
		},
		{
			name: "crossing DREQs (dialer's end): the other's DREQ is answered at once and the peer forgotten; " +
				"its DREP for ours is ignored, its resent DREQ answered", self: a,
			script: odtJoin(odtDialed(b, a, 7), []odtStep{
				{100 * ms, evDisconnect(b), []odAction{aSend(b, odtDREQ(a, b, 7))}},
				{105 * ms, evMsg(odtDREQ(b, a, 7)), []odAction{aSend(b, odtDREP(a, b, 7)), aGone(b, nil)}},
				{106 * ms, evMsg(odtDREP(b, a, 7)), nil},
				{160 * ms, evMsg(odtDREQ(b, a, 7)), []odAction{aSend(b, odtDREP(a, b, 7))}},
				{200 * ms, evTick, nil},
			}),
			stats: OnDemandStats{Dialed: 1, Disconnected: 1, Ignored: 1}, role: map[uint32]odRole{b: 0},
		},
		{
			name: "crossing DREQs (accepting end): the same, no release called", self: b,
			script: odtJoin(odtAccepted(a, b, 7), []odtStep{
				{100 * ms, evDisconnect(a), []odAction{aSend(a, odtDREQ(b, a, 7))}},
				{101 * ms, evMsg(odtDREQ(a, b, 7)), []odAction{aSend(a, odtDREP(b, a, 7)), aGone(a, nil)}},
				{102 * ms, evMsg(odtDREQ(a, b, 7)), nil}, // its copy
			}),
			stats: OnDemandStats{Accepted: 1, Disconnected: 1}, role: map[uint32]odRole{a: 0},
		},
		{
			name: "DREQ racing a REQ (closing end): the REQ of the peer that forgot is ignored until the DREP, " +
				"then its resend is accepted", self: a,
			script: odtJoin(odtDialed(b, a, 7), []odtStep{
				{100 * ms, evDisconnect(b), []odAction{aSend(b, odtDREQ(a, b, 7))}},
				{110 * ms, evMsg(odtREQ(b, a, 9, 2, 1)), nil},
				{150 * ms, evTick, []odAction{aSend(b, odtDREQ(a, b, 7))}},
				{155 * ms, evMsg(odtDREP(b, a, 7)), []odAction{aGone(b, nil)}},
				{160 * ms, evMsg(odtREQ(b, a, 9, 2, 1)), []odAction{aCreate(b, 2, odtInfos(b, 2, 1))}},
				{160 * ms, evCreated(b, a, 2, 2), []odAction{aSend(b, odtREP(a, b, 9, 2, 2))}},
				{170 * ms, evMsg(odtRTU(b, a, 9)), []odAction{aEstablished(b, false)}},
			}),
			stats: OnDemandStats{Dialed: 1, Accepted: 1, Resent: 1, Ignored: 1, Disconnected: 1},
			role:  map[uint32]odRole{b: odDone},
		},
		{
			name: "DREQ racing a REQ (dialing end): released, DREP lost, re-dialing; the resent DREQ of the old " +
				"connection is answered at once and changes nothing", self: b,
			script: odtJoin(odtAccepted(a, b, 7), []odtStep{
				{100 * ms, evMsg(odtDREQ(a, b, 7)), []odAction{aRelease(a)}},
				{110 * ms, evReleased(a, 1), []odAction{aSend(a, odtDREP(b, a, 7)), aGone(a, nil)}},
				{120 * ms, evDial(a, 9), []odAction{aCreate(a, 2, nil)}},
				{120 * ms, evCreated(a, b, 2, 2), []odAction{aSend(a, odtREQ(b, a, 9, 2, 2))}},
				{150 * ms, evMsg(odtDREQ(a, b, 7)), []odAction{aSend(a, odtDREP(b, a, 7))}},
				{170 * ms, evTick, []odAction{aSend(a, odtREQ(b, a, 9, 2, 2))}},
				{180 * ms, evMsg(odtREP(a, b, 9, 2, 3)), []odAction{aConnect(a, odtInfos(a, 2, 3))}},
				{180 * ms, evConnected(a, nil), []odAction{aSend(a, odtRTU(b, a, 9)), aEstablished(a, true)}},
				{190 * ms, evMsg(odtDREQ(a, b, 7)), []odAction{aSend(a, odtDREP(b, a, 7))}}, // still of the old one
			}),
			stats: OnDemandStats{Accepted: 1, Dialed: 1, Resent: 1, Disconnected: 1}, role: map[uint32]odRole{a: odDone},
		},
		{
			name: "Disconnect without an established connection: never dialed, dialing, accepting; " +
				"while releasing their DREQ: DREP at once", self: b,
			script: odtJoin([]odtStep{
				{0, evDisconnect(c), []odAction{aNotConnected(c)}},
				{0, evDial(c, 5), []odAction{aCreate(c, 2, nil)}},
				{0, evCreated(c, b, 2, 1), []odAction{aSend(c, odtREQ(b, c, 5, 2, 1))}},
				{0, evDisconnect(c), []odAction{aNotConnected(c)}},
				{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
				{0, evCreated(a, b, 2, 2), []odAction{aSend(a, odtREP(b, a, 7, 2, 2))}},
				{1 * ms, evDisconnect(a), []odAction{aNotConnected(a)}},
				{2 * ms, evMsg(odtRTU(a, b, 7)), []odAction{aEstablished(a, false)}},
				{3 * ms, evMsg(odtDREQ(a, b, 7)), []odAction{aRelease(a)}},
				{4 * ms, evDisconnect(a), []odAction{aSend(a, odtDREP(b, a, 7)), aGone(a, nil)}},
				{5 * ms, evReleased(a, 2), nil},
				{6 * ms, evDisconnect(a), []odAction{aNotConnected(a)}},
			}),
			stats: OnDemandStats{Accepted: 1, Disconnected: 1}, role: map[uint32]odRole{a: 0, c: odDialing},
		},
		{
			name: "DREQ before the RTU (reordered): the accepting end answers, closes its unconfirmed queue pairs; " +
				"its waiting Dial dials anew; the late RTU is stale", self: b,
			script: []odtStep{
				{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
				{0, evCreated(a, b, 2, 1), []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}},
				{1 * ms, evDial(a, 9), nil},
				{2 * ms, evMsg(odtDREQ(a, b, 7)), []odAction{aSend(a, odtDREP(b, a, 7)), aClose(a), aFailedPassive(a, ErrNotConnected)}},
				{3 * ms, evMsg(odtRTU(a, b, 7)), nil},
			},
			stats: OnDemandStats{Ignored: 1}, role: map[uint32]odRole{a: 0},
		},
		{
			name: "bad and stale: a DREQ of another connection is answered and changes nothing; an undecodable one, " +
				"one from ourselves, a DREP of another connection are ignored", self: a,
			script: odtJoin(odtDialed(b, a, 7), []odtStep{
				{100 * ms, evMsg(odtDREQ(b, a, 5)), []odAction{aSend(b, odtDREP(a, b, 5))}},
				{101 * ms, evMsg(odtMsg(udcm.ConnDREQ, b, a, 7, []byte{1, 2})), nil},
				{102 * ms, evMsg(odtDREP(b, a, 5)), nil},
				{103 * ms, evMsg(odtDREQ(a, a, 7)), nil},                 // from ourselves
				{104 * ms, evReleased(b, 1), nil},                        // nothing to release
				{105 * ms, evAdmitted(odtREQ(b, a, 9, 2, 1), true), nil}, // not asked
			}),
			stats: OnDemandStats{Dialed: 1, Ignored: 3}, role: map[uint32]odRole{b: odDone},
		},
		{
			name: "late copies of the REQ of a connection torn down (slow rail): ignored, before and after the " +
				"new attempt's REQ, which they do not replace; later (past odIdleResends periods) forgotten", self: b,
			script: odtJoin(odtAccepted(a, b, 7), []odtStep{
				{20 * ms, evMsg(odtDREQ(a, b, 7)), []odAction{aRelease(a)}},
				{20 * ms, evReleased(a, 1), []odAction{aSend(a, odtDREP(b, a, 7)), aGone(a, nil)}},
				{21 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), nil},
				{22 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), []odAction{aCreate(a, 2, odtInfos(a, 2, 2))}},
				{22 * ms, evCreated(a, b, 2, 2), []odAction{aSend(a, odtREP(b, a, 9, 2, 2))}},
				{23 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), nil},
				{24 * ms, evMsg(odtRTU(a, b, 9)), []odAction{aEstablished(a, false)}},
				{20*ms + odIdleResends*odtResend, evTick, nil},
				{21*ms + odIdleResends*odtResend, evMsg(odtDREQ(a, b, 7)), []odAction{aSend(a, odtDREP(b, a, 7))}},
			}),
			stats: OnDemandStats{Accepted: 2, Disconnected: 1, Ignored: 2}, role: map[uint32]odRole{a: odDone},
		},
		{
			name: "half torn down (the peer forgot the connection: its Disconnect failed): its new REQ is answered " +
				"with a probe (not per copy); its DREP (it does not hold the connection) releases ours; then its " +
				"resent REQ is accepted", self: b,
			script: odtJoin(odtAccepted(a, b, 7), []odtStep{
				{100 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), []odAction{aSend(a, odtProbe(b, a, 7))}},
				{101 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), nil},
				{110 * ms, evMsg(odtDREP(a, b, 7)), []odAction{aRelease(a)}},
				{111 * ms, evMsg(odtDREP(a, b, 7)), nil},
				{112 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), nil},
				{120 * ms, evReleased(a, 1), []odAction{aSend(a, odtDREP(b, a, 7)), aGone(a, nil)}},
				{130 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), []odAction{aCreate(a, 2, odtInfos(a, 2, 2))}},
				{130 * ms, evCreated(a, b, 2, 2), []odAction{aSend(a, odtREP(b, a, 9, 2, 2))}},
				{140 * ms, evMsg(odtRTU(a, b, 9)), []odAction{aEstablished(a, false)}},
			}),
			stats: OnDemandStats{Accepted: 2, Disconnected: 1, Ignored: 4}, role: map[uint32]odRole{a: odDone},
		},
		{
			name: "probes: one of a connection we hold is ignored, one of a connection we do not hold is answered",
			self: a,
			script: odtJoin(odtDialed(b, a, 7), []odtStep{
				{100 * ms, evMsg(odtProbe(b, a, 7)), nil},
				{101 * ms, evMsg(odtProbe(b, a, 5)), []odAction{aSend(b, odtDREP(a, b, 5))}},
				{102 * ms, evMsg(odtProbe(c, a, 5)), []odAction{aSend(c, odtDREP(a, c, 5))}},
			}),
			stats: OnDemandStats{Dialed: 1}, role: map[uint32]odRole{b: odDone, c: 0},
		},
		{
			name: "close: disconnects in progress end with ErrClosed; later answers do nothing", self: a,
			script: odtJoin(odtDialed(b, a, 7), []odtStep{
				{20 * ms, evMsg(odtREQ(c, a, 3, 2, 1)), []odAction{aCreate(c, 2, odtInfos(c, 2, 1))}},
				{20 * ms, evCreated(c, a, 2, 2), []odAction{aSend(c, odtREP(a, c, 3, 2, 2))}},
				{21 * ms, evMsg(odtRTU(c, a, 3)), []odAction{aEstablished(c, false)}},
				{30 * ms, evDisconnect(b), []odAction{aSend(b, odtDREQ(a, b, 7))}},
				{30 * ms, evMsg(odtDREQ(c, a, 3)), []odAction{aRelease(c)}},
				{40 * ms, evClose, []odAction{aGone(b, ErrClosed), aGone(c, ErrClosed)}},
				{41 * ms, evReleased(c, 2), nil},
				{42 * ms, evMsg(odtDREP(b, a, 7)), nil},
				{43 * ms, evDisconnect(b), []odAction{aNotConnected(b)}},
				{100 * ms, evTick, nil},
			}),
			stats: OnDemandStats{Dialed: 1, Accepted: 1}, role: map[uint32]odRole{b: 0, c: 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			giveUp := tc.giveUp
			if giveUp == 0 {
				giveUp = odtGiveUp
			}
			runODScript(t, newODCore(tc.self, odtJob, 2, odtAddrBytes(tc.self), odtResend, giveUp), tc.script, tc.stats, tc.role)
		})
	}
}

func TestODCoreAdmitScripts(t *testing.T) {
	const a, b = 1, 2
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		self   uint32
		script []odtStep
		stats  OnDemandStats
		role   map[uint32]odRole
	}{
		{
			name: "refused: CONN_REJ (refused), nothing created; copies and resends refused without asking again; " +
				"the next attempt is asked again, accepted once", self: b,
			script: []odtStep{
				{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aAdmit(a, odtREQ(a, b, 7, 2, 1))}},
				{0, evMsg(odtREQ(a, b, 7, 2, 1)), nil}, // its copy while admit is asked
				{0, evAdmitted(odtREQ(a, b, 7, 2, 1), false), []odAction{aSend(a, odtREJRefused(b, a, 7))}},
				{1 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), nil},
				{50 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aSend(a, odtREJRefused(b, a, 7))}},
				{60 * ms, evAdmitted(odtREQ(a, b, 7, 2, 1), false), nil}, // an answer not asked for
				{100 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), []odAction{aAdmit(a, odtREQ(a, b, 9, 2, 2))}},
				{100 * ms, evAdmitted(odtREQ(a, b, 9, 2, 2), true), []odAction{aCreate(a, 2, odtInfos(a, 2, 2))}},
				{100 * ms, evCreated(a, b, 2, 1), []odAction{aSend(a, odtREP(b, a, 9, 2, 1))}},
				{101 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), nil}, // its copy: not asked again
				{130 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), []odAction{aSend(a, odtREP(b, a, 9, 2, 1))}},
				{140 * ms, evMsg(odtRTU(a, b, 9)), []odAction{aEstablished(a, false)}},
			},
			stats: OnDemandStats{Refused: 1, Rejected: 2, Ignored: 1, Duplicates: 1, Accepted: 1},
			role:  map[uint32]odRole{a: odDone},
		},
		{
			name: "the higher id starts its own dial while admit is asked: the refusal gives way to the tie-break, " +
				"the lower id's REQ is accepted", self: b,
			script: []odtStep{
				{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aAdmit(a, odtREQ(a, b, 7, 2, 1))}},
				{0, evDial(a, 8), []odAction{aCreate(a, 2, nil)}},
				{0, evAdmitted(odtREQ(a, b, 7, 2, 1), false), []odAction{aClose(a), aCreate(a, 2, odtInfos(a, 2, 1))}},
				{0, evCreated(a, b, 2, 2), []odAction{aSend(a, odtREP(b, a, 7, 2, 2))}},
				{1 * ms, evMsg(odtRTU(a, b, 7)), []odAction{aEstablished(a, true)}},
			},
			stats: OnDemandStats{Superseded: 1, Accepted: 1}, role: map[uint32]odRole{a: odDone},
		},
		{
			name: "a REQ meeting our own dial is not put to admit (the lower id keeps its own)", self: a,
			script: odtJoin(odtDialUp(b, a, 7), []odtStep{
				{30 * ms, evMsg(odtREQ(b, a, 8, 2, 1)), []odAction{aSend(b, odtREQ(a, b, 7, 2, 1))}},
			}),
			role: map[uint32]odRole{b: odDialing},
		},
		{
			name: "close while admit is asked: the answer does nothing; a REQ after close neither", self: b,
			script: []odtStep{
				{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aAdmit(a, odtREQ(a, b, 7, 2, 1))}},
				{0, evClose, nil},
				{0, evAdmitted(odtREQ(a, b, 7, 2, 1), true), nil},
				{1 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), nil},
			},
			role: map[uint32]odRole{a: 0},
		},
		{
			name: "an undecodable REQ is not put to admit", self: b,
			script: []odtStep{
				{0, evMsg(odtMsg(udcm.ConnREQ, a, b, 7, []byte{9})), nil},
			},
			stats: OnDemandStats{Ignored: 1}, role: map[uint32]odRole{a: 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core := newODCore(tc.self, odtJob, 2, odtAddrBytes(tc.self), odtResend, odtGiveUp)
			core.admission = true
			runODScript(t, core, tc.script, tc.stats, tc.role)
		})
	}
}
