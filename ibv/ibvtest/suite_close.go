package ibvtest

import (
	"context"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testClose: closing a device stops its goroutines (checked after the test's cleanups), releases
// blocked waiters with ErrClosed and refuses new work; closing with requests in flight is safe.
func (s *suite) testClose(t *testing.T) {
	t.Run("Idle", func(t *testing.T) {
		testutil.CheckGoroutines(t)
		a, b := s.two(t)
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
		require.NoError(t, a.Close(), "a second Close is a no-op")
	})
	t.Run("AfterTraffic", func(t *testing.T) {
		s.needRC(t)
		testutil.CheckGoroutines(t)
		a, b := s.two(t)
		qa, qb := ConnectRCWith(t, a, b, RCOptions{Port: s.port})
		mr := RegMR(t, s.p, qb.PD(), 4096, ibv.AccessAll, nil)
		require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 1, Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled,
			LocalBuf: Pattern(1, 4096), RemoteAddr: mr.Addr, RKey: mr.RKey}))
		WaitOK(t, qa.SendCQ(), 1)

		cq := qa.SendCQ()
		waitErr := make(chan error, 1)
		go func() { waitErr <- cq.Wait(context.Background()) }()
		evErr := make(chan error, 1)
		go func() {
			_, err := a.GetAsyncEvent(context.Background())
			evErr <- err
		}()
		require.NoError(t, a.Close())
		assert.ErrorIs(t, <-waitErr, ibv.ErrClosed, "CQ.Wait on a closed device")
		// Events posted before Close may be delivered first; then ErrClosed.
		err := <-evErr
		for err == nil {
			_, err = a.GetAsyncEvent(context.Background())
		}
		assert.ErrorIs(t, err, ibv.ErrClosed)
		_, err = a.AllocPD()
		assert.ErrorIs(t, err, ibv.ErrClosed)
		_, err = a.CreateCQ(4)
		assert.ErrorIs(t, err, ibv.ErrClosed)
		_, err = qa.PD().RegMR(make([]byte, 8), ibv.AccessAll)
		assert.ErrorIs(t, err, ibv.ErrClosed)
		err = qa.PostSend(&ibv.SendWR{ID: 2, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: mr.Addr, RKey: mr.RKey})
		assert.ErrorIs(t, err, ibv.ErrClosed, "PostSend on a QP of a closed device")
		assert.ErrorIs(t, qa.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState), ibv.ErrClosed)
		require.NoError(t, b.Close())
	})
	t.Run("InFlight", func(t *testing.T) {
		s.needRC(t)
		testutil.CheckGoroutines(t)
		a, b := s.two(t)
		qa, qb := ConnectRCWith(t, a, b, RCOptions{Port: s.port})
		const n = 1 << 20
		mr := RegMR(t, s.p, qb.PD(), n, ibv.AccessAll, nil)
		src := Pattern(2, n)
		for i := 0; i < 16; i++ {
			op := ibv.OpRDMAWrite
			if i%2 == 1 {
				op = ibv.OpRDMARead
			}
			buf := src
			if op == ibv.OpRDMARead {
				buf = make([]byte, n)
			}
			require.NoError(t, qa.PostSend(&ibv.SendWR{ID: uint64(i), Opcode: op, Flags: ibv.SendSignaled,
				LocalBuf: buf, RemoteAddr: mr.Addr, RKey: mr.RKey}))
		}
		// Close the target first, then the origin, with requests in flight: no panic, no hang,
		// no goroutine left.
		require.NoError(t, b.Close())
		require.NoError(t, a.Close())
	})
}
