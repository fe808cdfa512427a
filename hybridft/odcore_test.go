package hybridft

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/hybridft/udcm"
)

// Scripted tests of the on-demand setup core (odcore.go): each feeds events at given times and
// checks the exact actions out. Processes: 1 (the lower id), 2 and 3, two rails each.

const (
	odtJob    = 42
	odtResend = 50 * time.Millisecond
	odtGiveUp = time.Second
)

var odtT0 = time.Unix(1_000_000, 0)

func odtCM(id uint32) []string { return []string{fmt.Sprintf("cm%d.1", id), fmt.Sprintf("cm%d.2", id)} }
func odtQPN(id uint32) uint32  { return 100 + id }
func odtAddrBytes(id uint32) []byte {
	return marshalODAddr(2, odtQPN(id), odtCM(id))
}
func odtAddr(id uint32) odAddr { return odAddr{rails: 2, qpn: odtQPN(id), cm: odtCM(id)} }

// odtInfos are the ConnInfos of process id's queue pairs (version 1, so they round-trip equal);
// gen tells apart the queue pairs of successive attempts.
func odtInfos(id uint32, k, gen int) []ConnInfo {
	var cs []ConnInfo
	for r := 1; r <= k; r++ {
		cs = append(cs, ConnInfo{Addr: fmt.Sprintf("p%d/r%d", id, r), QPN: id*1000 + uint32(gen*10+r), PSN: uint32(r)})
	}
	return cs
}

func odtPayload(id uint32, infos []ConnInfo) []byte {
	pl, err := marshalODPayload(odtAddrBytes(id), infos)
	if err != nil {
		panic(err)
	}
	return pl
}

func odtMsg(t udcm.Type, from, to, nonce uint32, pl []byte) udcm.Msg {
	return udcm.Msg{Type: t, Src: uint64(from), Dst: uint64(to), Seq: odtJob, Inc: nonce, Payload: pl}
}

// REQ/REP of from with k queue pairs of attempt generation gen.
func odtREQ(from, to, nonce uint32, k, gen int) udcm.Msg {
	return odtMsg(udcm.ConnREQ, from, to, nonce, odtPayload(from, odtInfos(from, k, gen)))
}
func odtREP(from, to, nonce uint32, k, gen int) udcm.Msg {
	return odtMsg(udcm.ConnREP, from, to, nonce, odtPayload(from, odtInfos(from, k, gen)))
}
func odtRTU(from, to, nonce uint32) udcm.Msg { return odtMsg(udcm.ConnRTU, from, to, nonce, nil) }
func odtREJ(from, to, nonce uint32, st uint8) udcm.Msg {
	m := odtMsg(udcm.ConnREJ, from, to, nonce, nil)
	m.Status = st
	return m
}

// events
func evDial(peer, nonce uint32) odEvent {
	return odEvent{Kind: odDial, Peer: peer, Addr: odtAddr(peer), Nonce: nonce}
}
func evMsg(m udcm.Msg) odEvent { return odEvent{Kind: odMsg, Msg: &m} }
func evCreated(peer, self uint32, k, gen int) odEvent {
	return odEvent{Kind: odCreated, Peer: peer, Local: odtInfos(self, k, gen)}
}
func evCreateErr(peer uint32, err error) odEvent {
	return odEvent{Kind: odCreated, Peer: peer, Err: err}
}
func evConnected(peer uint32, err error) odEvent {
	return odEvent{Kind: odConnected, Peer: peer, Err: err}
}
func evUnwait(peer uint32, gen uint64) odEvent { return odEvent{Kind: odUnwait, Peer: peer, Gen: gen} }

var evTick = odEvent{Kind: odTick}

// actions
func aSend(to uint32, m udcm.Msg) odAction {
	return odAction{Kind: odSend, Peer: to, To: odtCM(to), ToQPN: odtQPN(to), Msg: m}
}
func aCreate(peer uint32, k int, remote []ConnInfo) odAction {
	return odAction{Kind: odCreate, Peer: peer, K: k, Remote: remote}
}
func aConnect(peer uint32, remote []ConnInfo) odAction {
	return odAction{Kind: odConnect, Peer: peer, Remote: remote}
}
func aClose(peer uint32) odAction { return odAction{Kind: odCloseQPs, Peer: peer} }
func aEstablished(peer uint32, waited bool) odAction {
	return odAction{Kind: odEstablished, Peer: peer, Waited: waited}
}
func aFailed(peer uint32, err error) odAction { return odAction{Kind: odFailed, Peer: peer, Err: err} }

// aFailedPassive: an attempt of the peer's failed: the Dials that waited on it dial anew.
func aFailedPassive(peer uint32, err error) odAction {
	return odAction{Kind: odFailed, Peer: peer, Err: err, Redial: true}
}

type odtStep struct {
	at   time.Duration // since odtT0
	ev   odEvent
	want []odAction // exact, in order; an Err matches by errors.Is
}

var errODTest = errors.New("test: queue pair error")

func odtDialUp(peer, self, nonce uint32) []odtStep {
	return []odtStep{
		{0, evDial(peer, nonce), []odAction{aCreate(peer, 2, nil)}},
		{0, evCreated(peer, self, 2, 1), []odAction{aSend(peer, odtREQ(self, peer, nonce, 2, 1))}},
	}
}

func odtJoin(ss ...[]odtStep) []odtStep {
	var out []odtStep
	for _, s := range ss {
		out = append(out, s...)
	}
	return out
}

func TestODCoreScripts(t *testing.T) {
	const a, b, c = 1, 2, 3
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		self   uint32
		script []odtStep
		stats  OnDemandStats
		role   map[uint32]odRole // final roles (0: forgotten)
	}{
		{
			name: "dial: REQ, REP, RTU", self: a,
			script: odtJoin(odtDialUp(b, a, 7), []odtStep{
				{10 * ms, evMsg(odtREP(b, a, 7, 2, 1)), []odAction{aConnect(b, odtInfos(b, 2, 1))}},
				{10 * ms, evConnected(b, nil), []odAction{aSend(b, odtRTU(a, b, 7)), aEstablished(b, true)}},
				{100 * ms, evTick, nil},
				{100 * ms, evUnwait(b, 1), nil},
			}),
			stats: OnDemandStats{Dialed: 1}, role: map[uint32]odRole{b: odDone},
		},
		{
			name: "dial: rail mismatch, k = min, extra queue pairs closed by the connect", self: a,
			script: odtJoin(odtDialUp(b, a, 7), []odtStep{
				{10 * ms, evMsg(odtREP(b, a, 7, 1, 1)), []odAction{aConnect(b, odtInfos(b, 1, 1))}},
				{10 * ms, evConnected(b, nil), []odAction{aSend(b, odtRTU(a, b, 7)), aEstablished(b, true)}},
			}),
			stats: OnDemandStats{Dialed: 1}, role: map[uint32]odRole{b: odDone},
		},
		{
			name: "lost REQ: resent every Resend while a Dial waits, not after it left, resumed by the next Dial", self: a,
			script: odtJoin(odtDialUp(b, a, 7), []odtStep{
				{49 * ms, evTick, nil},
				{50 * ms, evTick, []odAction{aSend(b, odtREQ(a, b, 7, 2, 1))}},
				{99 * ms, evTick, nil},
				{100 * ms, evTick, []odAction{aSend(b, odtREQ(a, b, 7, 2, 1))}},
				{110 * ms, evUnwait(b, 1), nil},
				{300 * ms, evTick, nil},
				{310 * ms, evDial(b, 9), []odAction{aSend(b, odtREQ(a, b, 7, 2, 1))}}, // same attempt, same nonce
				{320 * ms, evDial(b, 11), nil},                                        // a second waiter
				{359 * ms, evTick, nil},
				{360 * ms, evTick, []odAction{aSend(b, odtREQ(a, b, 7, 2, 1))}},
			}),
			stats: OnDemandStats{Resent: 3}, role: map[uint32]odRole{b: odDialing},
		},
		{
			name: "lost REP: a resent REQ is answered from the cache, rail copies within Resend/2 are not", self: b,
			script: []odtStep{
				{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
				{0, evCreated(a, b, 2, 1), []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}},
				{1 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), nil}, // the copy on rail 2
				{30 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}},
				{40 * ms, evMsg(odtRTU(a, b, 7)), []odAction{aEstablished(a, false)}},
				{41 * ms, evMsg(odtRTU(a, b, 7)), nil},                                                // duplicate RTU
				{100 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}}, // REP crossed the RTU
				{200 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), []odAction{aSend(a, odtProbe(b, a, 7))}},     // connected already: does a still hold it?
				{300 * ms, evTick, nil},
			},
			stats: OnDemandStats{Accepted: 1, Duplicates: 2, Ignored: 2}, role: map[uint32]odRole{a: odDone},
		},
		{
			name: "lost RTU: a duplicate REP is answered with the RTU", self: a,
			script: odtJoin(odtDialUp(b, a, 7), []odtStep{
				{10 * ms, evMsg(odtREP(b, a, 7, 2, 1)), []odAction{aConnect(b, odtInfos(b, 2, 1))}},
				{10 * ms, evConnected(b, nil), []odAction{aSend(b, odtRTU(a, b, 7)), aEstablished(b, true)}},
				{11 * ms, evMsg(odtREP(b, a, 7, 2, 1)), nil}, // the copy on rail 2
				{60 * ms, evMsg(odtREP(b, a, 7, 2, 1)), []odAction{aSend(b, odtRTU(a, b, 7))}},
			}),
			stats: OnDemandStats{Dialed: 1, Duplicates: 1}, role: map[uint32]odRole{b: odDone},
		},
		{
			name: "reordered: an RTU before its REQ, a REJ after the RTU", self: b,
			script: []odtStep{
				{0, evMsg(odtRTU(a, b, 7)), nil},
				{1 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
				{1 * ms, evCreated(a, b, 2, 1), []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}},
				{2 * ms, evMsg(odtRTU(a, b, 7)), []odAction{aEstablished(a, false)}},
				{3 * ms, evMsg(odtREJ(a, b, 7, udcm.RejStale)), nil},
			},
			stats: OnDemandStats{Accepted: 1, Ignored: 2}, role: map[uint32]odRole{a: odDone},
		},
		{
			name: "passive side: REP resent 16 times while nobody waits, then revived by a resent REQ", self: b,
			script: func() []odtStep {
				s := []odtStep{
					{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
					{0, evCreated(a, b, 2, 1), []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}},
				}
				for i := 1; i <= odIdleResends+3; i++ {
					var want []odAction
					if i <= odIdleResends {
						want = []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}
					}
					s = append(s, odtStep{time.Duration(i) * odtResend, evTick, want})
				}
				return append(s, odtStep{2 * time.Second, evMsg(odtREQ(a, b, 7, 2, 1)),
					[]odAction{aSend(a, odtREP(b, a, 7, 2, 1))}})
			}(),
			stats: OnDemandStats{Resent: odIdleResends, Duplicates: 1}, role: map[uint32]odRole{a: odAccepting},
		},
		{
			name: "passive side with a waiting Dial: REP resent past the idle bound; that Dial gets the connection", self: b,
			script: func() []odtStep {
				s := []odtStep{
					{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
					{0, evCreated(a, b, 2, 1), []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}},
					{0, evDial(a, 9), nil}, // no new attempt: it waits on the accepted one
				}
				for i := 1; i <= odIdleResends+2; i++ {
					s = append(s, odtStep{time.Duration(i) * odtResend, evTick, []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}})
				}
				return append(s, odtStep{time.Second, evMsg(odtRTU(a, b, 7)), []odAction{aEstablished(a, true)}})
			}(),
			stats: OnDemandStats{Resent: odIdleResends + 2, Accepted: 1}, role: map[uint32]odRole{a: odDone},
		},
		{
			name: "simultaneous dials, lower id: keeps its attempt, answers their REQ with its own (not per rail copy)", self: a,
			script: odtJoin(odtDialUp(b, a, 7), []odtStep{
				{10 * ms, evMsg(odtREQ(b, a, 8, 2, 1)), nil}, // our REQ went out 10 ms ago
				{30 * ms, evMsg(odtREQ(b, a, 8, 2, 1)), []odAction{aSend(b, odtREQ(a, b, 7, 2, 1))}},
				{31 * ms, evMsg(odtREQ(b, a, 8, 2, 1)), nil},
				{40 * ms, evMsg(odtREP(b, a, 7, 2, 2)), []odAction{aConnect(b, odtInfos(b, 2, 2))}},
				{40 * ms, evConnected(b, nil), []odAction{aSend(b, odtRTU(a, b, 7)), aEstablished(b, true)}},
				{50 * ms, evMsg(odtREQ(b, a, 8, 2, 1)), []odAction{aSend(b, odtProbe(a, b, 7))}}, // their late REQ: b holds ours?
			}),
			stats: OnDemandStats{Dialed: 1, Ignored: 1}, role: map[uint32]odRole{b: odDone},
		},
		{
			name: "simultaneous dials, higher id: gives way, accepts, its Dial gets the accepted connection", self: b,
			script: odtJoin(odtDialUp(a, b, 8), []odtStep{
				{5 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aClose(a), aCreate(a, 2, odtInfos(a, 2, 1))}},
				{5 * ms, evCreated(a, b, 2, 2), []odAction{aSend(a, odtREP(b, a, 7, 2, 2))}},
				{6 * ms, evMsg(odtREJ(a, b, 8, udcm.RejStale)), nil}, // of our abandoned attempt
				{7 * ms, evMsg(odtRTU(a, b, 7)), []odAction{aEstablished(a, true)}},
				{8 * ms, evMsg(odtREP(a, b, 8, 2, 1)), []odAction{aSend(a, odtREJ(b, a, 8, udcm.RejStale))}},
			}),
			stats: OnDemandStats{Superseded: 1, Accepted: 1, Ignored: 2, Rejected: 1}, role: map[uint32]odRole{a: odDone},
		},
		{
			name: "REJ: a stale one is ignored, the attempt's fails it; the next Dial is a new attempt", self: a,
			script: odtJoin(odtDialUp(b, a, 7), []odtStep{
				{5 * ms, evMsg(odtREJ(b, a, 9, udcm.RejResources)), nil},
				{6 * ms, evMsg(odtREJ(b, a, 7, udcm.RejResources)), []odAction{aClose(b), aFailed(b, ErrRejected)}},
				{7 * ms, evUnwait(b, 1), nil},
				{100 * ms, evTick, nil},
				{200 * ms, evDial(b, 11), []odAction{aCreate(b, 2, nil)}},
				{200 * ms, evCreated(b, a, 2, 2), []odAction{aSend(b, odtREQ(a, b, 11, 2, 2))}},
				{210 * ms, evMsg(odtREP(b, a, 7, 2, 1)), []odAction{aSend(b, odtREJ(a, b, 7, udcm.RejStale))}}, // late REP of the failed one
				{215 * ms, evUnwait(b, 1), nil},                                                                // the first Dial leaves late: the new attempt's waiter still counts
				{250 * ms, evTick, []odAction{aSend(b, odtREQ(a, b, 11, 2, 2))}},
				{260 * ms, evMsg(odtREP(b, a, 11, 2, 3)), []odAction{aConnect(b, odtInfos(b, 2, 3))}},
				{260 * ms, evConnected(b, nil), []odAction{aSend(b, odtRTU(a, b, 11)), aEstablished(b, true)}},
				{270 * ms, evConnected(b, nil), nil}, // a result nobody waits for
				{270 * ms, evCreated(b, a, 2, 4), nil},
			}),
			stats: OnDemandStats{Dialed: 1, Rejected: 2, Ignored: 2, Resent: 1}, role: map[uint32]odRole{b: odDone},
		},
		{
			name: "REJ of an accepted attempt (its dialer abandoned it): the passive side closes its queue pairs", self: b,
			script: []odtStep{
				{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
				{0, evCreated(a, b, 2, 1), []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}},
				{5 * ms, evMsg(odtREJ(a, b, 7, udcm.RejStale)), []odAction{aClose(a), aFailedPassive(a, ErrRejected)}},
				{100 * ms, evTick, nil},
			},
			stats: OnDemandStats{Rejected: 1}, role: map[uint32]odRole{a: 0},
		},
		{
			name: "another attempt while one is accepted but not confirmed: not replaced, our REP is resent (not per " +
				"rail copy); the dialer's REJ ends ours, its resent REQ is accepted; the old RTU is stale", self: b,
			script: []odtStep{
				{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
				{0, evCreated(a, b, 2, 1), []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}},
				{10 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), nil}, // within Resend/2 of our REP
				{30 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}},
				{31 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), nil},
				{32 * ms, evMsg(odtREJ(a, b, 7, udcm.RejStale)), []odAction{aClose(a), aFailedPassive(a, ErrRejected)}},
				{40 * ms, evMsg(odtREQ(a, b, 9, 2, 2)), []odAction{aCreate(a, 2, odtInfos(a, 2, 2))}},
				{40 * ms, evCreated(a, b, 2, 2), []odAction{aSend(a, odtREP(b, a, 9, 2, 2))}},
				{41 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), nil}, // a late copy of the failed attempt
				{50 * ms, evMsg(odtRTU(a, b, 7)), nil},
				{60 * ms, evMsg(odtRTU(a, b, 9)), []odAction{aEstablished(a, false)}},
			},
			stats: OnDemandStats{Accepted: 1, Ignored: 2, Rejected: 1}, role: map[uint32]odRole{a: odDone},
		},
		{
			name: "a late copy of an abandoned REQ while the dialer's current attempt is accepted: our REP confirms " +
				"the current one (RTU); the copy changes nothing", self: b,
			script: []odtStep{
				{0, evMsg(odtREQ(a, b, 9, 2, 2)), []odAction{aCreate(a, 2, odtInfos(a, 2, 2))}},
				{0, evCreated(a, b, 2, 1), []odAction{aSend(a, odtREP(b, a, 9, 2, 1))}},
				{30 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aSend(a, odtREP(b, a, 9, 2, 1))}},
				{31 * ms, evMsg(odtRTU(a, b, 9)), []odAction{aEstablished(a, false)}},
				{32 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aSend(a, odtProbe(b, a, 9))}},
				{33 * ms, evMsg(odtREQ(a, b, 7, 2, 1)), nil}, // its copy
			},
			stats: OnDemandStats{Accepted: 1, Ignored: 2}, role: map[uint32]odRole{a: odDone},
		},
		{
			name: "stale REP of an unknown attempt is rejected; an undecodable one only ignored", self: a,
			script: []odtStep{
				{0, evMsg(odtREP(b, a, 7, 2, 1)), []odAction{aSend(b, odtREJ(a, b, 7, udcm.RejStale))}},
				{1 * ms, evMsg(odtMsg(udcm.ConnREP, b, a, 7, []byte{1, 2, 3})), nil},
			},
			stats: OnDemandStats{Ignored: 2, Rejected: 1}, role: map[uint32]odRole{b: 0},
		},
		{
			name: "REP the dialer cannot decode: REJ malformed, the Dial fails", self: a,
			script: odtJoin(odtDialUp(b, a, 7), []odtStep{
				{5 * ms, evMsg(odtMsg(udcm.ConnREP, b, a, 7, []byte{1, 2, 3})),
					[]odAction{aSend(b, odtREJ(a, b, 7, udcm.RejMalformed)), aClose(b), aFailed(b, ErrMalformed)}},
			}),
			stats: OnDemandStats{Rejected: 1}, role: map[uint32]odRole{b: 0},
		},
		{
			name: "REP without rails: REJ malformed, the Dial fails", self: a,
			script: odtJoin(odtDialUp(b, a, 7), []odtStep{
				{5 * ms, evMsg(odtMsg(udcm.ConnREP, b, a, 7, odtPayload(b, nil))),
					[]odAction{aSend(b, odtREJ(a, b, 7, udcm.RejMalformed)), aClose(b), aFailed(b, ErrMalformed)}},
			}),
			stats: OnDemandStats{Rejected: 1}, role: map[uint32]odRole{b: 0},
		},
		{
			name: "connecting to the REP fails: REJ malformed, the Dial fails with the error", self: a,
			script: odtJoin(odtDialUp(b, a, 7), []odtStep{
				{5 * ms, evMsg(odtREP(b, a, 7, 2, 1)), []odAction{aConnect(b, odtInfos(b, 2, 1))}},
				{5 * ms, evConnected(b, errODTest),
					[]odAction{aSend(b, odtREJ(a, b, 7, udcm.RejMalformed)), aClose(b), aFailed(b, errODTest)}},
			}),
			stats: OnDemandStats{Rejected: 1}, role: map[uint32]odRole{b: 0},
		},
		{
			name: "creating the dial's queue pairs fails: the Dial fails, nothing sent", self: a,
			script: []odtStep{
				{0, evDial(b, 7), []odAction{aCreate(b, 2, nil)}},
				{0, evCreateErr(b, errODTest), []odAction{aClose(b), aFailed(b, errODTest)}},
			},
			role: map[uint32]odRole{b: 0},
		},
		{
			name: "accepting fails (resources): REJ resources, nothing kept", self: b,
			script: []odtStep{
				{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
				{0, evCreateErr(a, errODTest), []odAction{aSend(a, odtREJ(b, a, 7, udcm.RejResources)), aClose(a),
					aFailedPassive(a, errODTest)}},
			},
			stats: OnDemandStats{Rejected: 1}, role: map[uint32]odRole{a: 0},
		},
		{
			name: "a REP at the passive side (its own nonce) is ignored; results for unknown peers too", self: b,
			script: []odtStep{
				{0, evMsg(odtREQ(a, b, 7, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
				{0, evCreated(a, b, 2, 1), []odAction{aSend(a, odtREP(b, a, 7, 2, 1))}},
				{1 * ms, evMsg(odtREP(a, b, 7, 2, 1)), nil},
				{1 * ms, evCreated(c, b, 2, 1), nil},
				{1 * ms, evConnected(c, nil), nil},
				{1 * ms, evUnwait(c, 1), nil},
			},
			stats: OnDemandStats{Ignored: 1}, role: map[uint32]odRole{a: odAccepting, c: 0},
		},
		{
			name: "payload over udcm.MaxPayload: the dial fails; an accept is refused (REJ resources)", self: b,
			script: []odtStep{
				{0, evDial(c, 7), []odAction{aCreate(c, 2, nil)}},
				{0, odEvent{Kind: odCreated, Peer: c, Local: odtHuge()}, []odAction{aClose(c), aFailed(c, udcm.ErrMalformed)}},
				{0, evMsg(odtREQ(a, b, 5, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
				{0, odEvent{Kind: odCreated, Peer: a, Local: odtHuge()}, []odAction{aSend(a, odtREJ(b, a, 5, udcm.RejResources)),
					aClose(a), aFailedPassive(a, udcm.ErrMalformed)}},
			},
			stats: OnDemandStats{Rejected: 1}, role: map[uint32]odRole{a: 0, c: 0},
		},
		{
			name: "bad REQs: undecodable (ignored), without rails (REJ malformed, no state)", self: b,
			script: []odtStep{
				{0, evMsg(odtMsg(udcm.ConnREQ, a, b, 7, []byte{9})), nil},
				{0, evMsg(odtMsg(udcm.ConnREQ, a, b, 7, odtPayload(a, nil))),
					[]odAction{aSend(a, odtREJ(b, a, 7, udcm.RejMalformed))}},
			},
			stats: OnDemandStats{Ignored: 1, Rejected: 1}, role: map[uint32]odRole{a: 0},
		},
		{
			name: "messages of another job, for another process, from ourselves: ignored", self: b,
			script: func() []odtStep {
				other := odtREQ(a, b, 7, 2, 1)
				other.Seq++
				wrong := odtREQ(a, c, 7, 2, 1)
				self := odtREQ(b, b, 7, 2, 1)
				huge := odtREQ(a, b, 7, 2, 1)
				huge.Src = 1 << 40
				return []odtStep{{0, evMsg(other), nil}, {0, evMsg(wrong), nil}, {0, evMsg(self), nil}, {0, evMsg(huge), nil},
					{0, odEvent{Kind: odDial, Peer: b, Addr: odtAddr(b), Nonce: 1}, nil}}
			}(),
			stats: OnDemandStats{Ignored: 4}, role: map[uint32]odRole{a: 0, b: 0},
		},
		{
			name: "close: pending attempts fail with ErrClosed, established stay; later input does nothing", self: b,
			script: odtJoin(odtDialUp(c, b, 7), []odtStep{
				{0, evMsg(odtREQ(a, b, 5, 2, 1)), []odAction{aCreate(a, 2, odtInfos(a, 2, 1))}},
				{0, evCreated(a, b, 2, 2), []odAction{aSend(a, odtREP(b, a, 5, 2, 2))}},
				{1 * ms, odEvent{Kind: odClose}, []odAction{aClose(a), aFailed(a, ErrClosed), aClose(c), aFailed(c, ErrClosed)}},
				{2 * ms, odEvent{Kind: odClose}, nil},
				{3 * ms, evMsg(odtRTU(a, b, 5)), nil},
				{100 * ms, evTick, nil},
				{100 * ms, evDial(a, 3), nil},
			}),
			role: map[uint32]odRole{a: 0, c: 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runODScript(t, newODCore(tc.self, odtJob, 2, odtAddrBytes(tc.self), odtResend, odtGiveUp), tc.script, tc.stats,
				tc.role)
		})
	}
}

// runODScript feeds script to core, checking each step's actions, then the counters and the
// final roles (0: forgotten) and which peers have a resend timer.
func runODScript(t *testing.T, core *odCore, script []odtStep, stats OnDemandStats, role map[uint32]odRole) {
	t.Helper()
	for i, s := range script {
		got := core.Step(s.ev, odtT0.Add(s.at))
		requireODActions(t, s.want, got, "step %d (%v at %v)", i, s.ev.Kind, s.at)
	}
	require.Equal(t, stats, core.stats)
	for id, r := range role {
		p := core.peers[id]
		if r == 0 {
			require.Nil(t, p, "peer %d forgotten", id)
			require.Nil(t, core.pending[id])
			continue
		}
		require.NotNil(t, p, "peer %d", id)
		require.Equal(t, r, p.role, "peer %d", id)
		_, pend := core.pending[id]
		require.Equal(t, r != odDone && r != odReleasing, pend, "peer %d pending", id)
	}
}

// odtHuge are ConnInfos whose payload exceeds udcm.MaxPayload.
func odtHuge() []ConnInfo {
	cs := odtInfos(2, 16, 9)
	for i := range cs {
		cs[i].Addr = strings.Repeat("x", 250)
	}
	return cs
}

// requireODActions compares actions exactly, errors by errors.Is.
func requireODActions(t *testing.T, want, got []odAction, msgAndArgs ...any) {
	t.Helper()
	require.Len(t, got, len(want), msgAndArgs...)
	for i := range want {
		w, g := want[i], got[i]
		if w.Err != nil {
			require.ErrorIs(t, g.Err, w.Err, msgAndArgs...)
			w.Err, g.Err = nil, nil
		}
		require.Equal(t, w, g, msgAndArgs...)
	}
}

// The resend deadline: the earliest pending peer's last send plus Resend.
func TestODCoreNext(t *testing.T) {
	core := newODCore(1, odtJob, 2, odtAddrBytes(1), odtResend, odtGiveUp)
	require.True(t, core.Next().IsZero())
	core.Step(evDial(2, 7), odtT0)
	require.True(t, core.Next().IsZero(), "no REQ out yet")
	core.Step(evCreated(2, 1, 2, 1), odtT0)
	require.Equal(t, odtT0.Add(odtResend), core.Next())
	core.Step(evMsg(odtREQ(3, 1, 5, 2, 1)), odtT0.Add(10*time.Millisecond))
	core.Step(evCreated(3, 1, 2, 2), odtT0.Add(10*time.Millisecond))
	require.Equal(t, odtT0.Add(odtResend), core.Next())
	core.Step(evTick, odtT0.Add(odtResend))
	require.Equal(t, odtT0.Add(10*time.Millisecond+odtResend), core.Next())
}
