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
	e := newSRQEnds(t, 4096)
	srq, mr, cqa, cqb, b := e.srq, e.mr, e.cqa, e.cqb, e.b
	require.ErrorIs(t, srq.ArmLimit(-1), ibv.ErrInvalidArgument)
	require.ErrorIs(t, srq.ArmLimit(9), ibv.ErrInvalidArgument)
	x, _ := e.connect(t)
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
