package ibvtest

import (
	"context"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// violation is one request the responder must refuse (IBA §9.7.4.1.5 memory access validation:
// a violation completes with an error status and changes nothing).
type violation struct {
	name   string
	needs  func(s *suite) bool
	access ibv.Access // target MR's access flags
	qpAcc  *ibv.Access
	wr     func(mr *ibv.MR, badKey uint32) ibv.SendWR
}

const (
	violMR    = 64 // target MR size, bytes (a multiple of 8)
	violGuard = 64 // bytes outside the MR on each side, checked too (keeps the MR 8-byte aligned)
)

func always(*suite) bool        { return true }
func withAtomics(s *suite) bool { return s.caps.Atomics }
func withAcc(s *suite) bool     { return s.caps.Accumulate }

func accessPtr(a ibv.Access) *ibv.Access { return &a }

var violations = []violation{
	{"WriteWrongRKey", always, ibv.AccessAll, nil, func(mr *ibv.MR, bad uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: bad}
	}},
	{"ReadWrongRKey", always, ibv.AccessAll, nil, func(mr *ibv.MR, bad uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: bad}
	}},
	{"WriteLKeyAsRKey", always, ibv.AccessAll, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: mr.LKey}
	}},
	{"AtomicWrongRKey", withAtomics, ibv.AccessAll, nil, func(mr *ibv.MR, bad uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: bad, CompareAdd: 1}
	}},
	{"WriteOneBytePastEnd", always, ibv.AccessAll, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr + violMR - 7, RKey: mr.RKey}
	}},
	{"WriteBeforeStart", always, ibv.AccessAll, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr - 1, RKey: mr.RKey}
	}},
	{"WriteLongerThanMR", always, ibv.AccessAll, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: make([]byte, violMR+1), RemoteAddr: mr.Addr, RKey: mr.RKey}
	}},
	{"ReadOneBytePastEnd", always, ibv.AccessAll, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr + violMR - 7, RKey: mr.RKey}
	}},
	{"AtomicPastEnd", withAtomics, ibv.AccessAll, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpAtomicSwap64, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr + violMR, RKey: mr.RKey, CompareAdd: 1}
	}},
	{"AccumulatePastEnd", withAcc, ibv.AccessAll, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccInt32, Scale: 1, LocalBuf: make([]byte, 8),
			RemoteAddr: mr.Addr + violMR - 4, RKey: mr.RKey}
	}},
	{"WriteWithoutRemoteWrite", always, ibv.AccessLocalWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: mr.RKey}
	}},
	{"ReadWithoutRemoteRead", always, ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteAtomic, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: mr.RKey}
	}},
	{"AtomicWithoutRemoteAtomic", withAtomics, ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: mr.RKey, CompareAdd: 1}
	}},
	{"CmpSwapWithoutRemoteAtomic", withAtomics, ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: mr.RKey,
			CompareAdd: le64(mr.Buf()), Swap: 1}
	}},
	{"AccumulateWithoutRemoteAtomic", withAcc, ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead, nil, func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccInt64, Scale: 1, LocalBuf: make([]byte, 16), RemoteAddr: mr.Addr, RKey: mr.RKey}
	}},
	{"WriteQPWithoutRemoteWrite", always, ibv.AccessAll, accessPtr(ibv.AccessRemoteRead), func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: mr.RKey}
	}},
	{"ReadQPWithoutRemoteRead", always, ibv.AccessAll, accessPtr(ibv.AccessRemoteWrite), func(mr *ibv.MR, _ uint32) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: mr.RKey}
	}},
}

// badKey returns a key that names no MR of c.
func badKey(c *ibv.Context, k uint32) uint32 {
	for d := uint32(0x5a5a00); ; d += 0x100 {
		if bad := k ^ d; provider.LookupRKey(c, bad) == nil && provider.LookupLKey(c, bad) == nil {
			return bad
		}
	}
}

// expectErrorThenFlush waits for the failed completion of wrid with status want, checks that the
// QP is in ERROR, then posts a valid write of fresh bytes to probe (which must come back
// WCWRFlushErr and change nothing).
func expectErrorThenFlush(t *testing.T, qa *ibv.QP, wrid uint64, want ibv.WCStatus, probe *ibv.MR) {
	t.Helper()
	wc := WaitWC(t, qa.SendCQ())
	assert.Equal(t, wrid, wc.WRID)
	require.Equal(t, want, wc.Status, "completion %+v", wc)
	assert.Equal(t, qa.Num(), wc.QPNum)
	assert.Equal(t, ibv.StateError, qa.State(), "the QP is in ERROR once the error completion is visible")
	before := append([]byte(nil), probe.Buf()...)
	require.NoError(t, qa.PostSend(&ibv.SendWR{ID: wrid + 1, Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled,
		LocalBuf: Pattern(0xf1, 8), RemoteAddr: probe.Addr, RKey: probe.RKey}))
	wc = WaitWC(t, qa.SendCQ())
	assert.Equal(t, wrid+1, wc.WRID)
	assert.Equal(t, ibv.WCWRFlushErr, wc.Status, "a request posted after the error is flushed")
	SameBytes(t, "target of the flushed write", before, probe.Buf())
	checkQueuesEmpty(t, qa, "after the flush")
}

func (s *suite) testRemoteViolations(t *testing.T) {
	s.needRC(t)
	a, b := s.two(t)
	for i, v := range violations {
		t.Run(v.name, func(t *testing.T) {
			if !v.needs(s) {
				t.Skip("provider declares the operation unsupported")
			}
			qa, qb := ConnectRCWith(t, a, b, RCOptions{Port: s.port, AccessB: v.qpAcc})
			init := Pattern(uint64(0x700+i), violMR+2*violGuard)
			// The MR covers the middle of a larger buffer: the guards are outside it.
			buf := s.p.Alloc(t, violMR+2*violGuard)
			copy(buf, init)
			mr, err := qb.PD().RegMR(buf[violGuard:violGuard+violMR], v.access)
			require.NoError(t, err)
			t.Cleanup(func() { _ = mr.Dereg() })
			probe := RegMR(t, s.p, qb.PD(), 8, ibv.AccessAll, Pattern(0x44, 8))
			wr := v.wr(mr, badKey(b, mr.RKey))
			wr.ID = 10
			wr.Flags = ibv.SendSignaled
			var localBefore []byte
			if wr.LocalBuf != nil {
				localBefore = append([]byte(nil), wr.LocalBuf...)
			}
			require.NoError(t, qa.PostSend(&wr))
			expectErrorThenFlush(t, qa, 10, ibv.WCRemAccessErr, probe)
			SameBytes(t, "target memory (MR and its surroundings)", init, buf)
			if wr.Opcode != ibv.OpRDMARead && !wr.Opcode.IsAtomic() || wr.Opcode == ibv.OpAccumulate {
				SameBytes(t, "local source buffer", localBefore, wr.LocalBuf)
			}
		})
	}
}

func (s *suite) testLocalViolations(t *testing.T) {
	s.needRC(t)
	a, b := s.two(t)
	cases := []struct {
		name string
		wr   func(l, ro *ibv.MR, target *ibv.MR) ibv.SendWR
	}{
		{"WriteBadLKey", func(l, _, tg *ibv.MR) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{{Addr: l.Addr, Length: 8, LKey: badKey(l.PD().Context(), l.LKey)}},
				RemoteAddr: tg.Addr, RKey: tg.RKey}
		}},
		{"WriteRKeyAsLKey", func(l, _, tg *ibv.MR) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{{Addr: l.Addr, Length: 8, LKey: l.RKey}},
				RemoteAddr: tg.Addr, RKey: tg.RKey}
		}},
		{"WriteSGEPastEnd", func(l, _, tg *ibv.MR) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{l.SGE(0, 4), l.SGE(int(l.Length)-3, 4)},
				RemoteAddr: tg.Addr, RKey: tg.RKey}
		}},
		{"ReadIntoMRWithoutLocalWrite", func(_, ro, tg *ibv.MR) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpRDMARead, SGL: []ibv.SGE{ro.SGE(0, 8)}, RemoteAddr: tg.Addr, RKey: tg.RKey}
		}},
		{"ReadBadLKey", func(l, _, tg *ibv.MR) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.OpRDMARead, SGL: []ibv.SGE{{Addr: l.Addr, Length: 8, LKey: badKey(l.PD().Context(), l.LKey)}},
				RemoteAddr: tg.Addr, RKey: tg.RKey}
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			qa, qb := ConnectRCWith(t, a, b, RCOptions{Port: s.port})
			init := Pattern(uint64(0x800+i), 64)
			target := RegMR(t, s.p, qb.PD(), 64, ibv.AccessAll, init)
			l := RegMR(t, s.p, qa.PD(), 64, ibv.AccessLocalWrite, Pattern(9, 64))
			ro := RegMR(t, s.p, qa.PD(), 64, ibv.AccessRemoteRead, Pattern(10, 64))
			roBefore := append([]byte(nil), ro.Buf()...)
			wr := c.wr(l, ro, target)
			wr.ID = 20
			wr.Flags = ibv.SendSignaled
			require.NoError(t, qa.PostSend(&wr))
			expectErrorThenFlush(t, qa, 20, ibv.WCLocProtErr, target)
			SameBytes(t, "target", init, target.Buf())
			SameBytes(t, "read-only local MR", roBefore, ro.Buf())
		})
	}
}

func (s *suite) testDeregisteredMR(t *testing.T) {
	s.needRC(t)
	a, b := s.two(t)
	for _, op := range []ibv.Opcode{ibv.OpRDMAWrite, ibv.OpRDMARead, ibv.OpAtomicFetchAdd} {
		t.Run(op.String(), func(t *testing.T) {
			if op.IsAtomic() && !s.caps.Atomics {
				t.Skip("provider declares no atomics")
			}
			qa, qb := ConnectRCWith(t, a, b, RCOptions{Port: s.port})
			init := Pattern(0x99, 64)
			buf := s.p.Alloc(t, 64)
			copy(buf, init)
			mr, err := qb.PD().RegMR(buf, ibv.AccessAll)
			require.NoError(t, err)
			// It works while registered.
			require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 1, Opcode: ibv.OpRDMARead, Flags: ibv.SendSignaled,
				LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: mr.RKey}))
			WaitOK(t, qa.SendCQ(), 1)
			addr, rkey := mr.Addr, mr.RKey
			require.NoError(t, mr.Dereg())
			probe := RegMR(t, s.p, qb.PD(), 8, ibv.AccessAll, nil)
			wr := ibv.SendWR{ID: 2, Opcode: op, Flags: ibv.SendSignaled, LocalBuf: make([]byte, 8),
				RemoteAddr: addr, RKey: rkey, CompareAdd: 1}
			require.NoError(t, qa.PostSend(&wr))
			expectErrorThenFlush(t, qa, 2, ibv.WCRemAccessErr, probe)
			SameBytes(t, "deregistered memory", init, buf)
		})
	}
}

// testAsyncQPFatal: a remote access error moves the requester's QP to ERROR and reports
// EventQPFatal for it on the requester's device.
func (s *suite) testAsyncQPFatal(t *testing.T) {
	qa, qb := s.connect(t)
	mr := RegMR(t, s.p, qb.PD(), 16, ibv.AccessAll, nil)
	require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 3, Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled,
		LocalBuf: make([]byte, 8), RemoteAddr: mr.Addr, RKey: badKey(qb.Context(), mr.RKey)}))
	wc := WaitWC(t, qa.SendCQ())
	require.Equal(t, ibv.WCRemAccessErr, wc.Status)
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	var seen []ibv.AsyncEvent
	for {
		ev, err := qa.Context().GetAsyncEvent(ctx)
		require.NoError(t, err, "no QP_FATAL for QP %d; events seen: %v", qa.Num(), seen)
		if ev.Type == ibv.EventQPFatal && ev.QPNum == qa.Num() {
			break
		}
		seen = append(seen, ev)
	}
	assert.Equal(t, ibv.StateError, qa.State())
	// The context ends a wait with no event.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for {
		ev, err := qa.Context().GetAsyncEvent(ctx2)
		if err != nil {
			assert.ErrorIs(t, err, context.Canceled)
			break
		}
		assert.NotEqual(t, ibv.EventQPFatal, ev.Type, "a second QP_FATAL for one error: %v", ev)
	}
}
