package window

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// TestLockFailureChangesNothing: a Lock that cannot take the lock word (held exclusively by
// another rank; the context expires) leaves no epoch open, so the same Lock works once the
// holder is gone, and the locked epoch then closes normally.
func TestLockFailureChangesNothing(t *testing.T) {
	each(t, []int{2}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me := rt.Rank()
		w, err := Allocate(ctx, rt, 64, 8)
		require.NoError(t, err)
		if me == 1 {
			require.NoError(t, w.Lock(ctx, LockExclusive, 0, 0))
		}
		require.NoError(t, rt.Barrier(ctx))
		if me == 0 {
			short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			err := w.Lock(short, LockShared, 0, 0)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Zero(t, w.Epochs().Locked(0), "no epoch after the failed Lock")
			require.False(t, w.Epochs().Passive())
		}
		require.NoError(t, rt.Barrier(ctx))
		if me == 1 {
			require.NoError(t, w.Unlock(ctx, 0))
		}
		require.NoError(t, rt.Barrier(ctx))
		if me == 0 {
			require.NoError(t, w.Lock(ctx, LockShared, 0, 0))
			require.Equal(t, LockShared, w.Epochs().Locked(0))
			require.NoError(t, w.Put(ctx, i64(7), 0, 1))
			require.NoError(t, w.Unlock(ctx, 0))
			require.True(t, w.Epochs().Idle())
			require.Equal(t, int64(7), geti64(w.Local(), 1))
		}
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, w.Free(ctx))
	})
}
