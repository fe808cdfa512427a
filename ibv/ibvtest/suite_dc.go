package ibvtest

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ConnectDC creates a DC queue pair (ibv.DC) on c in pd (nil: a new PD) with its own send and
// receive CQs of 4096 entries and moves it RESET→INIT→RTR→RTS on port with remote access flags
// access. It is destroyed at cleanup. A DC QP needs no peer: work requests name their target.
func ConnectDC(t testing.TB, c *ibv.Context, pd *ibv.PD, port uint8, access ibv.Access) *ibv.QP {
	t.Helper()
	qp := CreateQP(t, c, pd, ibv.DC, 4096, ibv.QPCap{}, false)
	must(t, "DC INIT", qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: port, AccessFlags: access},
		ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags))
	must(t, "DC RTR", qp.Modify(&ibv.QPAttr{State: ibv.StateRTR}, ibv.AttrState))
	must(t, "DC RTS", qp.Modify(&ibv.QPAttr{State: ibv.StateRTS}, ibv.AttrState))
	return qp
}

// DCTarget is a target of DC work requests: its DC QP, a registered window of its memory, and
// the address handle that reaches its port from the initiator.
type DCTarget struct {
	QP *ibv.QP
	MR *ibv.MR
	AH *ibv.AH
}

// WR addresses wr to the target: address handle, DC QP number and the window's rkey; off is the
// byte offset of the remote address in the window.
func (d DCTarget) WR(wr ibv.SendWR, off int) *ibv.SendWR {
	wr.AH, wr.RemoteQPN, wr.RKey, wr.RemoteAddr = d.AH, d.QP.Num(), d.MR.RKey, d.MR.Addr+uint64(off)
	return &wr
}

// DCTargets gives every device of ctxs a DC QP on port with a window of size zeroed bytes (all
// remote access), reached from initiator's port.
func DCTargets(t testing.TB, p Provider, initiator *ibv.QP, ctxs []*ibv.Context, port uint8, size int) []DCTarget {
	t.Helper()
	out := make([]DCTarget, len(ctxs))
	for i, c := range ctxs {
		qp := ConnectDC(t, c, nil, port, ibv.AccessAll)
		ah, err := initiator.PD().CreateAH(PathTo(QueryPort(t, c, port), port))
		must(t, "CreateAH", err)
		out[i] = DCTarget{QP: qp, MR: RegMR(t, p, qp.PD(), size, ibv.AccessAll, nil), AH: ah}
	}
	return out
}

// Window registers another window of size zeroed bytes at d's DC QP and reaches it from the DC
// QP from (so several initiators can target one DC QP, each in its own window).
func (d DCTarget) Window(t testing.TB, p Provider, from *ibv.QP, port uint8, size int) DCTarget {
	t.Helper()
	ah, err := from.PD().CreateAH(PathTo(QueryPort(t, d.QP.Context(), port), port))
	must(t, "CreateAH", err)
	return DCTarget{QP: d.QP, MR: RegMR(t, p, d.QP.PD(), size, ibv.AccessAll, nil), AH: ah}
}

// The window layout of DCExactlyOnce.
const (
	dcFA64   = 0  // fetch-add 64 counter
	dcCAS32  = 8  // compare-and-swap 32 chain
	dcFA32   = 12 // fetch-add 32 counter
	dcCAS64  = 16 // compare-and-swap 64 chain
	dcAccOff = 64 // accumulate vector (int64)
)

// DCWindow is the window size DCExactlyOnce needs for messages of msg bytes.
func DCWindow(msg int) int { return dcAccOff + 2*(msg+8) }

// DCExactlyOnce runs a mixed workload from the DC QP qa to every target at once — per target and
// round a 64-bit fetch-add, a 32-bit fetch-add, a 32- and a 64-bit compare-and-swap chain
// (old → old+1) and an int64 accumulate of msg bytes, then a write of msg bytes and a read of it
// back — and checks every fetched value and the final memory exactly: an atomic or accumulate
// applied twice, or a write lost, fails it. msg larger than the path MTU checks fragmentation.
// Windows must be DCWindow(msg) bytes, zeroed; the targets must be in this process (the test
// reads their windows).
func DCExactlyOnce(t testing.TB, qa *ibv.QP, targets []DCTarget, rounds, msg int) {
	t.Helper()
	PostDCWorkload(t, qa, targets, rounds, msg).Check(t)
}

// DCWorkload is the workload of DCExactlyOnce between its posting and its check, so that
// several initiators can run theirs at once.
type DCWorkload struct {
	qa            *ibv.QP
	targets       []DCTarget
	rounds, msg   int
	posted        uint64
	fetches       []dcFetch
	writes, reads [][]byte
}

type dcFetch struct {
	buf  []byte
	want uint64
}

// PostDCWorkload posts the work requests of DCExactlyOnce; Check waits for them and checks.
func PostDCWorkload(t testing.TB, qa *ibv.QP, targets []DCTarget, rounds, msg int) *DCWorkload {
	t.Helper()
	msg -= msg % 8
	w := &DCWorkload{qa: qa, targets: targets, rounds: rounds, msg: msg}
	post := func(wr *ibv.SendWR) {
		t.Helper()
		w.posted++
		wr.ID, wr.Flags = w.posted, ibv.SendSignaled
		require.NoError(t, qa.PostSend(wr))
	}
	atomic := func(d DCTarget, op ibv.Opcode, off int, cmpAdd, swap, want uint64) {
		t.Helper()
		b := make([]byte, op.AtomicSize())
		w.fetches = append(w.fetches, dcFetch{b, want})
		post(d.WR(ibv.SendWR{Opcode: op, LocalBuf: b, CompareAdd: cmpAdd, Swap: swap}, off))
	}
	accSrc := make([][]byte, len(targets))
	for j := range targets {
		accSrc[j] = make([]byte, msg)
		for k := 0; k < msg; k += 8 {
			binary.LittleEndian.PutUint64(accSrc[j][k:], uint64(j+1+k))
		}
	}
	for _, d := range targets {
		put64(d.MR.Buf()[dcCAS64:], 1<<40) // the 64-bit chain runs above 32 bits
	}
	for i := 0; i < rounds; i++ {
		for j, d := range targets {
			u := uint64(i)
			atomic(d, ibv.OpAtomicFetchAdd, dcFA64, 1, 0, u)
			atomic(d, ibv.OpAtomicFetchAdd32, dcFA32, 3, 0, 3*u)
			atomic(d, ibv.OpAtomicCmpSwap32, dcCAS32, u, u+1, u)
			atomic(d, ibv.OpAtomicCmpSwap, dcCAS64, 1<<40+u, 1<<40+u+1, 1<<40+u)
			post(d.WR(ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccInt64, Scale: 1, LocalBuf: accSrc[j]}, dcAccOff))
		}
	}
	w.writes = make([][]byte, len(targets))
	w.reads = make([][]byte, len(targets))
	for j, d := range targets {
		w.writes[j] = Pattern(uint64(0xdc00+j)^uint64(qa.Num())<<32, msg)
		w.reads[j] = make([]byte, msg)
		post(d.WR(ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: w.writes[j]}, dcAccOff+msg+8))
		post(d.WR(ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: w.reads[j]}, dcAccOff+msg+8))
	}
	return w
}

// Check waits for the completions of the workload and checks the fetched values and the
// windows (see DCExactlyOnce).
func (w *DCWorkload) Check(t testing.TB) {
	t.Helper()
	qa, msg, fetches, writes, reads := w.qa, w.msg, w.fetches, w.writes, w.reads
	seen := make(map[uint64]bool, w.posted)
	for range w.posted {
		wc := WaitWC(t, qa.SendCQ())
		require.Equal(t, ibv.WCSuccess, wc.Status, "WR %d: %v", wc.WRID, wc.Status)
		require.False(t, seen[wc.WRID], "WR %d completed twice", wc.WRID)
		seen[wc.WRID] = true
		assert.Equal(t, qa.Num(), wc.QPNum)
	}
	for k, f := range fetches {
		var got uint64
		if len(f.buf) == 4 {
			got = uint64(le32(f.buf))
			f.want = uint64(uint32(f.want))
		} else {
			got = le64(f.buf)
		}
		assert.Equal(t, f.want, got, "fetched value %d", k)
	}
	r := uint64(w.rounds)
	for j, d := range w.targets {
		win := d.MR.Buf()
		assert.Equal(t, r, le64(win[dcFA64:]), "target %d: fetch-add 64", j)
		assert.Equal(t, uint32(3*r), le32(win[dcFA32:]), "target %d: fetch-add 32", j)
		assert.Equal(t, uint32(r), le32(win[dcCAS32:]), "target %d: compare-and-swap 32", j)
		assert.Equal(t, 1<<40+r, le64(win[dcCAS64:]), "target %d: compare-and-swap 64", j)
		for k := 0; k < msg; k += 8 {
			if got, want := le64(win[dcAccOff+k:]), r*uint64(j+1+k); got != want {
				t.Errorf("target %d: accumulate element %d = %d, want %d", j, k/8, got, want)
				break
			}
		}
		SameBytes(t, "written window", writes[j], win[dcAccOff+msg+8:dcAccOff+2*msg+8])
		SameBytes(t, "read back", writes[j], reads[j])
	}
}

func (s *suite) testDC(t *testing.T) {
	if !s.caps.DC {
		t.Skip("provider declares no DC support (Caps.DC false)")
	}
	a := s.p.Open(t)
	ctxs := []*ibv.Context{s.p.Open(t), s.p.Open(t), s.p.Open(t)}
	mtu := QueryPort(t, a, s.port).MTU
	t.Run("ExactlyOnceToManyPeers", func(t *testing.T) {
		qa := ConnectDC(t, a, nil, s.port, ibv.AccessAll)
		msg := 2*mtu + 40 // three packets: fragmentation to the path MTU
		DCExactlyOnce(t, qa, DCTargets(t, s.p, qa, ctxs, s.port, DCWindow(msg)), 8, msg)
	})
	t.Run("BothDirections", func(t *testing.T) {
		// one record per peer serves its requests and the peer's: two DC QPs target each other
		qa := ConnectDC(t, a, nil, s.port, ibv.AccessAll)
		tb := DCTargets(t, s.p, qa, ctxs[:1], s.port, DCWindow(64))
		ah, err := tb[0].QP.PD().CreateAH(PathTo(QueryPort(t, a, s.port), s.port))
		require.NoError(t, err)
		ta := []DCTarget{{QP: qa, MR: RegMR(t, s.p, qa.PD(), DCWindow(64), ibv.AccessAll, nil), AH: ah}}
		DCExactlyOnce(t, tb[0].QP, ta, 4, 64)
		DCExactlyOnce(t, qa, tb, 4, 64)
	})
	t.Run("Violations", func(t *testing.T) {
		// a bad rkey or bounds is NAKed: ibv.ErrAccess, nothing written, and the target's other
		// initiators are not affected
		for _, c := range []struct {
			name string
			wr   func(d DCTarget) *ibv.SendWR
		}{
			{"WrongRKey", func(d DCTarget) *ibv.SendWR {
				wr := d.WR(ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: make([]byte, 8)}, 0)
				wr.RKey ^= 0x5a5a
				return wr
			}},
			{"PastEnd", func(d DCTarget) *ibv.SendWR {
				return d.WR(ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: make([]byte, 16)}, 64-8)
			}},
			{"AtomicWrongRKey", func(d DCTarget) *ibv.SendWR {
				wr := d.WR(ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: make([]byte, 8), CompareAdd: 1}, 0)
				wr.RKey ^= 0x5a5a
				return wr
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				bad := ConnectDC(t, a, nil, s.port, ibv.AccessAll)
				good := ConnectDC(t, ctxs[1], nil, s.port, ibv.AccessAll)
				target := DCTargets(t, s.p, bad, ctxs[:1], s.port, 64)
				fill := Pattern(7, 64)
				copy(target[0].MR.Buf(), fill)
				wr := c.wr(target[0])
				wr.ID, wr.Flags = 1, ibv.SendSignaled
				require.NoError(t, bad.PostSend(wr))
				wc := WaitWC(t, bad.SendCQ())
				require.Equal(t, uint64(1), wc.WRID)
				require.ErrorIs(t, &ibv.WCError{Status: wc.Status}, ibv.ErrAccess, "status %v", wc.Status)
				SameBytes(t, "target after a refused request", fill, target[0].MR.Buf())
				assert.Equal(t, ibv.StateRTS, bad.State(), "the DC QP stays usable for its other peers")
				// another initiator still reaches the target
				ah, err := good.PD().CreateAH(PathTo(QueryPort(t, ctxs[0], s.port), s.port))
				require.NoError(t, err)
				other := target[0]
				other.AH = ah
				require.NoError(t, good.PostSend(other.WR(ibv.SendWR{ID: 2, Flags: ibv.SendSignaled, Opcode: ibv.OpRDMAWrite,
					LocalBuf: []byte{1, 2, 3}}, 0)))
				WaitOK(t, good.SendCQ(), 2)
				assert.Equal(t, []byte{1, 2, 3}, target[0].MR.Buf()[:3])
			})
		}
	})
	t.Run("PostChecks", func(t *testing.T) {
		qa := ConnectDC(t, a, nil, s.port, ibv.AccessAll)
		for _, wr := range []ibv.SendWR{
			{Opcode: ibv.OpRDMAWrite, LocalBuf: make([]byte, 8)},    // no address handle
			{Opcode: ibv.OpSend, LocalBuf: make([]byte, 8)},         // no send/receive
			{Opcode: ibv.OpRDMAWriteImm, LocalBuf: make([]byte, 8)}, // no receive queue
		} {
			err := qa.PostSend(&wr)
			assert.True(t, errors.Is(err, ibv.ErrInvalidArgument), "%v: %v", wr.Opcode, err)
		}
		assert.ErrorIs(t, qa.PostRecv(&ibv.RecvWR{}), ibv.ErrInvalidArgument)
		checkQueuesEmpty(t, qa, "refused posts")
	})
}
