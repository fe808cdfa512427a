package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
)

// The SRQ limit (IBV_EVENT_SRQ_LIMIT_REACHED): armed at 3 with 4 receives posted, the first
// message leaves 3 (no event), the second 2 (one event naming the SRQ), the third 1 (none: the
// limit disarmed itself); armed again, the next receive taken fires it again. A limit below 0
// or above the SRQ's entries is refused.
func TestSRQLimitReached(t *testing.T) {
	n := newMemNet()
	a, b := n.open(t, 1, Config{}), n.open(t, 1, Config{})
	pb, _ := b.QueryPort(1)
	pa, _ := a.QueryPort(1)
	pdb, err := b.AllocPD()
	require.NoError(t, err)
	srq, err := pdb.CreateSRQ(8)
	require.NoError(t, err)
	require.ErrorIs(t, srq.ArmLimit(-1), ibv.ErrInvalidArgument)
	require.ErrorIs(t, srq.ArmLimit(9), ibv.ErrInvalidArgument)
	cqb, err := b.CreateCQ(64)
	require.NoError(t, err)
	mr, err := pdb.RegMR(make([]byte, 4096), ibv.AccessAll)
	require.NoError(t, err)
	pda, _ := a.AllocPD()
	cqa, _ := a.CreateCQ(64)
	x, err := pda.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: cqa, RecvCQ: cqa})
	require.NoError(t, err)
	y, err := pdb.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: cqb, RecvCQ: cqb, SRQ: srq})
	require.NoError(t, err)
	for _, c := range []struct {
		q, peer *ibv.QP
		addr    string
	}{{x, y, pb.Addr}, {y, x, pa.Addr}} {
		require.NoError(t, c.q.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, AccessFlags: ibv.AccessAll}, ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags))
		require.NoError(t, c.q.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: c.addr, PortNum: 1}, DestQPN: c.peer.Num(), RQPSN: 1},
			ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN))
		require.NoError(t, c.q.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 1, Timeout: 1, RetryCnt: 3}, ibv.AttrState|ibv.AttrSQPSN|ibv.AttrTimeout|ibv.AttrRetryCnt))
	}
	for i := range 4 {
		require.NoError(t, srq.PostRecv(&ibv.RecvWR{ID: uint64(i), SGL: []ibv.SGE{mr.SGE(16*i, 16)}}))
	}
	require.NoError(t, srq.ArmLimit(3))
	send := func(id uint64) {
		require.NoError(t, x.PostSend(&ibv.SendWR{ID: id, Opcode: ibv.OpSend, Flags: ibv.SendSignaled, LocalBuf: []byte{byte(id)}}))
		require.Equal(t, ibv.WCSuccess, waitWC(t, cqb).Status)
		require.Equal(t, ibv.WCSuccess, waitWC(t, cqa).Status)
	}
	// nextEvent is the next event of b; a marker posted behind shows that none came before it.
	nextEvent := func() ibv.AsyncEvent {
		provider.PostEvent(b, ibv.AsyncEvent{Type: ibv.EventCommEst, Detail: "marker"})
		ev, err := b.GetAsyncEvent(context.Background())
		require.NoError(t, err)
		if ev.Detail != "marker" {
			m, err := b.GetAsyncEvent(context.Background())
			require.NoError(t, err)
			require.Equal(t, "marker", m.Detail, "one event at most")
		}
		return ev
	}
	send(1) // 3 left: not below the limit
	require.Equal(t, "marker", nextEvent().Detail)
	send(2) // 2 left
	ev := nextEvent()
	require.Equal(t, ibv.EventSRQLimitReached, ev.Type)
	require.Same(t, srq, ev.SRQ)
	send(3) // 1 left: disarmed
	require.Equal(t, "marker", nextEvent().Detail)
	require.NoError(t, srq.ArmLimit(2))
	send(4) // 0 left
	require.Equal(t, ibv.EventSRQLimitReached, nextEvent().Type)
	require.Equal(t, "SRQ_LIMIT_REACHED", ibv.EventSRQLimitReached.String())
}
