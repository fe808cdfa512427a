package shm

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
)

// TestPostSendSync: the synchronous post executes at once, queues no completion, and a remote
// violation returns its status, writes nothing and moves the QP to ERROR (later posts flush).
func TestPostSendSync(t *testing.T) {
	job := testJob()
	a, b := openEnd(t, job, "a"), openEnd(t, job, "b")
	connectQPs(t, a, a.qp, b, b.qp, ibv.AccessAll)
	require.True(t, a.qp.CanPostSync())
	tgt, tmr := allocMR(t, b, 4096, ibv.AccessAll)

	src := []byte("synchronous")
	st, err := a.qp.PostSendSync(&ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: tmr.Addr + 100, RKey: tmr.RKey})
	require.NoError(t, err)
	require.Equal(t, ibv.WCSuccess, st)
	require.Equal(t, "synchronous", string(tgt[100:111]))
	got := make([]byte, 11)
	st, err = a.qp.PostSendSync(&ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: tmr.Addr + 100, RKey: tmr.RKey})
	require.NoError(t, err)
	require.Equal(t, ibv.WCSuccess, st)
	require.Equal(t, src, got)
	old := make([]byte, 8)
	st, err = a.qp.PostSendSync(&ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: old, RemoteAddr: tmr.Addr + 8, RKey: tmr.RKey, CompareAdd: 5})
	require.NoError(t, err)
	require.Equal(t, ibv.WCSuccess, st)
	require.Equal(t, uint64(5), binary.LittleEndian.Uint64(tgt[8:]))
	require.Zero(t, a.cq.Len(), "a synchronous post queues no completion")

	before := append([]byte(nil), tgt...)
	st, err = a.qp.PostSendSync(&ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: tmr.Addr, RKey: tmr.RKey ^ 0xff})
	require.NoError(t, err)
	require.Equal(t, ibv.WCRemAccessErr, st)
	require.Equal(t, before, tgt, "a refused write changed the target")
	require.Equal(t, ibv.StateError, a.qp.State())
	require.Zero(t, a.cq.Len())
	st, err = a.qp.PostSendSync(&ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: tmr.Addr, RKey: tmr.RKey})
	require.NoError(t, err)
	require.Equal(t, ibv.WCWRFlushErr, st)
	require.Equal(t, before, tgt)

	// shape errors are refused before anything runs
	_, err = a.qp.PostSendSync(&ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: old[:4], RemoteAddr: tmr.Addr, RKey: tmr.RKey})
	require.True(t, errors.Is(err, ibv.ErrInvalidArgument) || errors.Is(err, ibv.ErrInvalidState), "%v", err)
}
