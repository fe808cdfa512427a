package ibv_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/accum"
)

// TestApplyAtomic checks every word atomic's operands and result (the verbs convention: a
// fetch-and-add adds CompareAdd, a swap stores CompareAdd, a compare-and-swap stores Swap where the
// word equals CompareAdd), and that bad opcodes and words change nothing.
func TestApplyAtomic(t *testing.T) {
	mem := make([]byte, 16)
	le := binary.LittleEndian
	le.PutUint64(mem, 40)
	le.PutUint32(mem[8:], 7)
	cases := []struct {
		op              ibv.Opcode
		off             int
		compareAdd, swp uint64
		old, now        uint64
	}{
		{ibv.OpAtomicFetchAdd, 0, 2, 0, 40, 42},
		{ibv.OpAtomicSwap64, 0, 9, 0, 42, 9},
		{ibv.OpAtomicCmpSwap, 0, 8, 100, 9, 9}, // no match: unchanged
		{ibv.OpAtomicCmpSwap, 0, 9, 100, 9, 100},
		{ibv.OpAtomicFetchAdd32, 8, 1<<32 + 3, 0, 7, 10}, // the low 32 bits of the operand
		{ibv.OpAtomicSwap32, 8, 5, 0, 10, 5},
		{ibv.OpAtomicCmpSwap32, 8, 5, 6, 5, 6},
	}
	for _, c := range cases {
		n := c.op.AtomicSize()
		old, err := ibv.ApplyAtomic(c.op, mem[c.off:c.off+n], c.compareAdd, c.swp)
		require.NoError(t, err, "%v", c.op)
		require.Equal(t, c.old, old, "%v old value", c.op)
		now := uint64(le.Uint32(mem[c.off:]))
		if n == 8 {
			now = le.Uint64(mem[c.off:])
		}
		require.Equal(t, c.now, now, "%v new value", c.op)
	}
	before := append([]byte(nil), mem...)
	_, err := ibv.ApplyAtomic(ibv.OpRDMAWrite, mem[:8], 1, 0)
	require.True(t, errors.Is(err, ibv.ErrInvalidArgument), "%v", err)
	_, err = ibv.ApplyAtomic(ibv.OpAtomicFetchAdd, mem[4:12], 1, 0)
	require.True(t, errors.Is(err, accum.ErrShape), "misaligned: %v", err)
	_, err = ibv.ApplyAtomic(ibv.OpAtomicFetchAdd, mem[:4], 1, 0)
	require.True(t, errors.Is(err, accum.ErrShape), "short word: %v", err)
	require.Equal(t, before, mem, "failed atomics changed memory")
}

// TestWCErrorIs: a failed completion's error matches the sentinel of its status and no other.
func TestWCErrorIs(t *testing.T) {
	cases := map[ibv.WCStatus][]error{
		ibv.WCRemAccessErr:   {ibv.ErrAccess},
		ibv.WCLocProtErr:     {ibv.ErrAccess},
		ibv.WCRetryExcErr:    {ibv.ErrRetryExceeded, ibv.ErrUnreachable},
		ibv.WCRNRRetryExcErr: {ibv.ErrRetryExceeded, ibv.ErrUnreachable},
		ibv.WCWRFlushErr:     {ibv.ErrFlushed},
		ibv.WCRemInvReqErr:   {ibv.ErrInvalidArgument},
		ibv.WCGeneralErr:     nil,
	}
	all := []error{ibv.ErrAccess, ibv.ErrRetryExceeded, ibv.ErrUnreachable, ibv.ErrFlushed, ibv.ErrInvalidArgument}
	for st, want := range cases {
		err := fmt.Errorf("wrapped: %w", &ibv.WCError{Status: st})
		for _, s := range all {
			require.Equal(t, slices.Contains(want, s), errors.Is(err, s), "%v is %v", st, s)
		}
		require.Contains(t, err.Error(), st.String())
	}
}

// A release store through a view lands whole at its offset, mixes with atomics on the word, and
// a word outside the view or misaligned is refused without a store.
func TestRemoteViewStoreRelease64(t *testing.T) {
	v := &ibv.RemoteView{Mem: make([]byte, 32)}
	require.NoError(t, v.StoreRelease64(8, 41))
	old, err := v.Atomic(ibv.OpAtomicFetchAdd, 8, 1, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(41), old)
	require.Equal(t, uint64(42), binary.LittleEndian.Uint64(v.Mem[8:]))
	require.ErrorIs(t, v.StoreRelease64(32, 1), ibv.ErrOutOfBounds)
	require.ErrorIs(t, v.StoreRelease64(-8, 1), ibv.ErrOutOfBounds)
	require.ErrorIs(t, v.StoreRelease64(4, 1), accum.ErrShape)
	require.Equal(t, make([]byte, 8), v.Mem[:8])
	require.Equal(t, make([]byte, 16), v.Mem[16:])
}
