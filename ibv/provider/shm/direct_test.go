//go:build linux

package shm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
)

// TestMapRemote: a view of a peer's region is the target memory itself (stores land there,
// loads see what RDMA writes put there), its bounds are the ones asked for, and bad accesses
// fail with the verbs errors and map nothing; the view's mapping reference keeps the peer's
// buffer mapped until Release.
func TestMapRemote(t *testing.T) {
	a, b := pair(t)
	require.True(t, a.qp.CanMapRemote())
	tgt, tmr := allocMR(t, b, 8192, ibv.AccessAll)
	_, romr := allocMR(t, b, 4096, ibv.AccessLocalWrite|ibv.AccessRemoteRead)

	v, err := a.qp.MapRemote(tmr.RKey, tmr.Addr+100, 1000, ibv.AccessRemoteWrite|ibv.AccessRemoteRead)
	require.NoError(t, err)
	require.Len(t, v.Mem, 1000)
	require.Equal(t, 1000, cap(v.Mem), "no access past the asked range through the view")
	require.True(t, v.Usable())
	copy(v.Mem, pattern(1000, 3))
	require.Equal(t, pattern(1000, 3), tgt[100:1100], "a store through the view is at the target")
	wc := do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{9, 8, 7}, RemoteAddr: tmr.Addr + 100, RKey: tmr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, []byte{9, 8, 7}, v.Mem[:3], "the view sees an RDMA write")

	dev := provider.DeviceDriver(a.ctx).(*device)
	dev.mu.Lock()
	p := dev.peers[b.addr]
	dev.mu.Unlock()
	refs := func() (n int) { // mapping references held on b's buffers
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, m := range p.maps {
			n += m.refs
		}
		return n
	}
	held := refs()
	v.Release()
	v.Release() // idempotent
	require.Nil(t, v.Mem)
	require.Equal(t, held-1, refs(), "Release gives the mapping reference back")

	before := append([]byte(nil), tgt...)
	for _, c := range []struct {
		name     string
		rkey     uint32
		addr, n  uint64
		need     ibv.Access
		sentinel error
	}{
		{"bad rkey", tmr.RKey ^ 0x5500, tmr.Addr, 8, ibv.AccessRemoteWrite, ibv.ErrInvalidKey},
		{"past end", tmr.RKey, tmr.Addr + 8190, 8, ibv.AccessRemoteWrite, ibv.ErrOutOfBounds},
		{"before start", tmr.RKey, tmr.Addr - 1, 8, ibv.AccessRemoteRead, ibv.ErrOutOfBounds},
		{"write on read-only", romr.RKey, romr.Addr, 8, ibv.AccessRemoteWrite, ibv.ErrAccess},
	} {
		_, err := a.qp.MapRemote(c.rkey, c.addr, c.n, c.need)
		require.ErrorIs(t, err, c.sentinel, c.name)
	}
	require.Equal(t, before, tgt, "failed MapRemote calls change nothing")

	// a QP outside RTS gives no view; a view of a QP moved to ERROR is not usable
	v, err = a.qp.MapRemote(tmr.RKey, tmr.Addr, 8, ibv.AccessRemoteRead)
	require.NoError(t, err)
	require.NoError(t, a.qp.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState))
	require.False(t, v.Usable())
	v.Release()
	_, err = a.qp.MapRemote(tmr.RKey, tmr.Addr, 8, ibv.AccessRemoteRead)
	require.ErrorIs(t, err, ibv.ErrInvalidState)
}
