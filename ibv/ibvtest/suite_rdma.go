package ibvtest

import (
	"fmt"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RDMASizes are the message sizes of the RDMA cases: edges of words and pages, and large.
var RDMASizes = []int{1, 7, 8, 4095, 4096, 4097, 65536, 1<<20 + 3, 16 << 20}

// guard is the number of bytes checked on each side of every target for stray writes.
const guard = 61

// splitSGL cuts n bytes of mr starting at byte offset off into up to three SGEs separated by gaps
// of gap bytes, returning the SGL and the offsets of the pieces.
func splitSGL(mr *ibv.MR, off, n, gap int) ([]ibv.SGE, []int) {
	k := 3
	if n < k {
		k = n
	}
	var sgl []ibv.SGE
	var offs []int
	rest := n
	for i := 0; i < k; i++ {
		l := n / k
		if i == k-1 {
			l = rest
		}
		sgl = append(sgl, mr.SGE(off, l))
		offs = append(offs, off)
		off += l + gap
		rest -= l
	}
	return sgl, offs
}

func (s *suite) testRDMA(t *testing.T) {
	qa, qb := s.connect(t)
	max := 0
	limit := s.maxMsg(qa.Context())
	for _, n := range RDMASizes {
		if uint64(n) <= limit && n > max {
			max = n
		}
	}
	span := max + 2*guard + 8
	bg := Pattern(0xb9, span+2*guard) // what the target and unused local memory hold before
	data := Pattern(0xda, span)       // what is moved
	target := RegMR(t, s.p, qb.PD(), span, ibv.AccessAll, nil)
	// The local MR holds a gathered/scattered message of up to max bytes in three pieces with gaps.
	local := RegMR(t, s.p, qa.PD(), span+2*guard, ibv.AccessLocalWrite, nil)
	tb, lb := target.Buf(), local.Buf()
	id := uint64(0)

	post := func(wr *ibv.SendWR) {
		t.Helper()
		id++
		wr.ID = id
		wr.Flags |= ibv.SendSignaled
		require.NoError(t, qa.PostSend(wr))
		wc := WaitWC(t, qa.SendCQ())
		require.Equal(t, ibv.WCSuccess, wc.Status, "%v of %d bytes: %+v", wr.Opcode, wr.LocalLen(), wc)
		assert.Equal(t, id, wc.WRID)
		assert.Equal(t, provider.WCOpcodeOf(wr.Opcode), wc.Opcode)
		assert.Equal(t, qa.Num(), wc.QPNum)
	}

	for _, n := range RDMASizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			if uint64(n) > limit {
				t.Skipf("%d bytes is above the provider's maximum message size %d", n, limit)
			}
			region := tb[:n+2*guard]
			want := make([]byte, len(region))
			remote := target.Addr + guard

			t.Run("WriteLocalBuf", func(t *testing.T) {
				copy(region, bg)
				post(&ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data[:n], RemoteAddr: remote, RKey: target.RKey})
				copy(want, bg)
				copy(want[guard:], data[:n])
				SameBytes(t, "target after write", want, region)
			})
			t.Run("ReadLocalBuf", func(t *testing.T) {
				copy(region, data)
				dst := make([]byte, n+2*guard)
				copy(dst, bg)
				post(&ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: dst[guard : guard+n], RemoteAddr: remote, RKey: target.RKey})
				copy(want, bg)
				copy(want[guard:], data[guard:guard+n])
				SameBytes(t, "local buffer after read", want, dst)
				SameBytes(t, "target after read", data[:len(region)], region)
			})
			t.Run("WriteSGL", func(t *testing.T) {
				copy(region, bg)
				copy(lb, bg)
				sgl, offs := splitSGL(local, guard, n, guard)
				var msg []byte
				for i, sge := range sgl {
					piece := data[len(msg) : len(msg)+int(sge.Length)]
					copy(lb[offs[i]:], piece)
					msg = append(msg, piece...)
				}
				post(&ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: sgl, RemoteAddr: remote, RKey: target.RKey})
				copy(want, bg)
				copy(want[guard:], msg)
				SameBytes(t, "target after gather write", want, region)
			})
			t.Run("ReadSGL", func(t *testing.T) {
				copy(region, data)
				copy(lb, bg)
				sgl, offs := splitSGL(local, guard, n, guard)
				post(&ibv.SendWR{Opcode: ibv.OpRDMARead, SGL: sgl, RemoteAddr: remote, RKey: target.RKey})
				wantL := append([]byte(nil), bg[:len(lb)]...)
				pos := guard
				for i, sge := range sgl {
					copy(wantL[offs[i]:], data[pos:pos+int(sge.Length)])
					pos += int(sge.Length)
				}
				SameBytes(t, "local memory after scatter read", wantL, lb)
			})
		})
	}
}

// testUnsignaled: unsignaled writes produce no completion, and a later signaled request's
// completion implies they are done (RC completes in order).
func (s *suite) testUnsignaled(t *testing.T) {
	qa, qb := s.connect(t)
	const k, n = 20, 4097
	target := RegMR(t, s.p, qb.PD(), k*n+guard, ibv.AccessAll, nil)
	data := Pattern(0x51, k*n)
	for i := 0; i < k; i++ {
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: uint64(i), Opcode: ibv.OpRDMAWrite,
			LocalBuf: data[i*n : (i+1)*n], RemoteAddr: target.Addr + uint64(i*n), RKey: target.RKey}))
	}
	flag := []byte{0xf1}
	require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 999, Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled,
		LocalBuf: flag, RemoteAddr: target.Addr + k*n, RKey: target.RKey}))
	WaitOK(t, qa.SendCQ(), 999)
	checkQueuesEmpty(t, qa, "unsignaled writes")
	want := append(append([]byte(nil), data...), 0xf1)
	want = append(want, make([]byte, guard-1)...)
	SameBytes(t, "target after unsignaled writes", want, target.Buf())

	// An unsignaled read, then a signaled write: the read is complete too.
	dst := make([]byte, n)
	require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 1000, Opcode: ibv.OpRDMARead, LocalBuf: dst,
		RemoteAddr: target.Addr + n, RKey: target.RKey}))
	require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 1001, Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled,
		LocalBuf: flag, RemoteAddr: target.Addr, RKey: target.RKey}))
	WaitOK(t, qa.SendCQ(), 1001)
	SameBytes(t, "unsignaled read", data[n:2*n], dst)
	checkQueuesEmpty(t, qa, "unsignaled read")

	// SigAll: every request is signaled regardless of its flags.
	a, b := qa.Context(), qb.Context()
	qa2, qb2 := ConnectRCWith(t, a, b, RCOptions{Port: s.port, SigAll: true})
	t2 := RegMR(t, s.p, qb2.PD(), 8, ibv.AccessAll, nil)
	for i := uint64(0); i < 3; i++ {
		require.NoError(t, qa2.PostSend(&ibv.SendWR{ID: 50 + i, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{byte(i)},
			RemoteAddr: t2.Addr + i, RKey: t2.RKey}))
	}
	for i := uint64(0); i < 3; i++ {
		WaitOK(t, qa2.SendCQ(), 50+i)
	}
	assert.Equal(t, []byte{0, 1, 2}, t2.Buf()[:3])
}

// testOrdering: an RC QP applies requests at the target in the order they were posted (IBA
// §9.5: delivery in order and exactly once), so a read after a write to the same
// place returns the written data without a fence, and the last of several writes wins.
func (s *suite) testOrdering(t *testing.T) {
	qa, qb := s.connect(t)
	target := RegMR(t, s.p, qb.PD(), 4096, ibv.AccessAll, nil)
	const k = 100
	reads := make([][]byte, k)
	vals := make([][]byte, k)
	for i := 0; i < k; i++ {
		vals[i] = Pattern(uint64(i+1), 512)
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: uint64(2 * i), Opcode: ibv.OpRDMAWrite, LocalBuf: vals[i],
			RemoteAddr: target.Addr + 100, RKey: target.RKey}))
		reads[i] = make([]byte, 512)
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: uint64(2*i + 1), Opcode: ibv.OpRDMARead, LocalBuf: reads[i],
			RemoteAddr: target.Addr + 100, RKey: target.RKey}))
	}
	require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 9999, Opcode: ibv.OpRDMARead, Flags: ibv.SendSignaled,
		LocalBuf: make([]byte, 1), RemoteAddr: target.Addr, RKey: target.RKey}))
	WaitOK(t, qa.SendCQ(), 9999)
	for i := 0; i < k; i++ {
		if !SameBytes(t, fmt.Sprintf("read %d after write %d", i, i), vals[i], reads[i]) {
			break
		}
	}
	SameBytes(t, "target after the last write", vals[k-1], target.Buf()[100:612])
	checkQueuesEmpty(t, qa, "unsignaled requests")
}

// testManyQPs: several RC connections between the same two devices carry interleaved traffic
// without mixing it up.
func (s *suite) testManyQPs(t *testing.T) {
	s.needRC(t)
	a, b := s.two(t)
	const nqp, k, n = 4, 25, 4096
	type pair struct {
		qa     *ibv.QP
		target *ibv.MR
		data   []byte
	}
	var pairs []pair
	for i := 0; i < nqp; i++ {
		qa, qb := ConnectRCWith(t, a, b, RCOptions{Port: s.port, PSNA: uint32(0x100 * (i + 1)), PSNB: uint32(0x7000 + i)})
		pairs = append(pairs, pair{qa: qa, target: RegMR(t, s.p, qb.PD(), k*n, ibv.AccessAll, nil), data: Pattern(uint64(0x40+i), k*n)})
	}
	for j := 0; j < k; j++ {
		for _, p := range pairs {
			require.NoError(t, p.qa.PostSend(&ibv.SendWR{ID: uint64(j), Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled,
				LocalBuf: p.data[j*n : (j+1)*n], RemoteAddr: p.target.Addr + uint64(j*n), RKey: p.target.RKey}))
		}
	}
	for i, p := range pairs {
		for j := 0; j < k; j++ {
			wc := WaitOK(t, p.qa.SendCQ(), uint64(j))
			assert.Equal(t, p.qa.Num(), wc.QPNum)
		}
		SameBytes(t, fmt.Sprintf("target of QP pair %d", i), p.data, p.target.Buf())
	}
}
