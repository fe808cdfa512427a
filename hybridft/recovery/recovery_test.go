package recovery

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
)

func TestDecide(t *testing.T) {
	atoms := map[uint32]uint64{100: 41}
	look := func(p uint32) (uint64, bool) { v, ok := atoms[p]; return v, ok }
	s := func(first, n uint32) Sent { return Sent{FirstPSN: first, NPkts: n, MTU: 1024} }
	cases := []struct {
		name string
		op   ibv.Opcode
		len  uint64
		s    Sent
		ok   bool
		epsn uint32
		want Action
	}{
		{"never sent", ibv.OpAccumulate, 8, Sent{}, false, 50, Action{Kind: Repost}},
		{"not reached", ibv.OpAccumulate, 8, s(100, 1), true, 100, Action{Kind: Repost}},
		{"acc executed", ibv.OpAccumulate, 8, s(100, 1), true, 101, Action{Kind: Complete}},
		{"write executed", ibv.OpRDMAWrite, 4096, s(100, 4), true, 110, Action{Kind: Complete}},
		{"acc half", ibv.OpAccumulate, 4096, s(100, 4), true, 102, Action{Kind: RepostTail, Offset: 2048}},
		{"read executed", ibv.OpRDMARead, 8, s(100, 1), true, 101, Action{Kind: Repost}},
		{"fadd executed", ibv.OpAtomicFetchAdd, 8, s(100, 1), true, 101, Action{Kind: CompleteAtomic, Value: 41}},
		{"fadd lost record", ibv.OpAtomicFetchAdd, 8, s(99, 1), true, 101, Action{Kind: Fail}},
		{"psn wrap", ibv.OpAccumulate, 8, s(0xffffff, 1), true, 0, Action{Kind: Complete}},
		{"psn wrap not reached", ibv.OpAccumulate, 8, s(0, 1), true, 0xffffff, Action{Kind: Repost}},
		{"send half", ibv.OpSend, 4096, s(100, 4), true, 102, Action{Kind: Repost}},
	}
	for _, c := range cases {
		require.Equal(t, c.want, Decide(c.op, c.len, c.s, c.ok, c.epsn, look), c.name)
	}
}

func TestTail(t *testing.T) {
	buf := make([]byte, 100)
	wr := Tail(ibv.SendWR{RemoteAddr: 1000, LocalBuf: buf}, 30, nil)
	require.Equal(t, uint64(1030), wr.RemoteAddr)
	require.Len(t, wr.LocalBuf, 70)
	sgl := []ibv.SGE{{Addr: 0, Length: 20, LKey: 1}, {Addr: 500, Length: 20, LKey: 2}, {Addr: 900, Length: 10, LKey: 3}}
	wr = Tail(ibv.SendWR{RemoteAddr: 0, SGL: sgl}, 25, nil)
	require.Equal(t, []ibv.SGE{{Addr: 505, Length: 15, LKey: 2}, {Addr: 900, Length: 10, LKey: 3}}, wr.SGL)
	require.Equal(t, ibv.SGE{Addr: 0, Length: 20, LKey: 1}, sgl[0], "the original SGL is untouched")
}

func TestPaths(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ps := NewPaths(1, 2)
	p, ok := ps.Choose(3, 3, t0)
	require.True(t, ok)
	require.Equal(t, uint8(1), p)
	ps.Fail(1, t0)
	p, _ = ps.Choose(3, 3, t0)
	require.Equal(t, uint8(2), p, "home in back-off")
	p, _ = ps.Choose(3, 1, t0)
	require.Equal(t, uint8(1), p, "only the failed one is up on the peer: probe it")
	_, ok = ps.Choose(2, 1, t0)
	require.False(t, ok, "no rail up on both sides: partition")
	p, _ = ps.Choose(3, 3, t0.Add(time.Second))
	require.Equal(t, uint8(1), p, "home again after the back-off")
	ps.Fail(2, t0.Add(time.Second))
	p, _ = ps.Choose(3, 3, t0.Add(1100*time.Millisecond))
	require.Equal(t, uint8(1), p)
}
