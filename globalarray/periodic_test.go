package globalarray

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// wrap is i modulo n in [0, n).
func wrap(i, n int) int { return ((i % n) + n) % n }

// periodicOps checks PeriodicPut, PeriodicGet and PeriodicAcc with patches that wrap around
// both dimensions, a padded buffer (ld larger than the patch), and bad input.
func periodicOps[T Elem](ctx context.Context, t testing.TB, rt *rma.Runtime) {
	dims := []int{6, 5}
	a, err := Create[T](ctx, rt, "per", dims)
	require.NoError(t, err)
	m := make([]T, 30)
	setAll(ctx, t, a, m)
	lo, hi := []int{-2, 3}, []int{1, 6} // rows 4, 5, 0, 1; columns 3, 4, 0, 1
	buf := make([]T, 16)
	for i := range buf {
		buf[i] = val[T](i + 1)
	}
	if rt.Rank() == 0 {
		require.NoError(t, a.PeriodicPut(ctx, lo, hi, buf, nil))
	}
	require.NoError(t, a.Sync(ctx))
	for i := 0; i < 4; i++ {
		for j := 0; j < 4; j++ {
			m[wrap(lo[0]+i, 6)*5+wrap(lo[1]+j, 5)] = buf[i*4+j]
		}
	}
	require.Equal(t, m, getAll(ctx, t, a), "PeriodicPut")

	// every rank reads a patch wrapping the other way into a padded buffer (ld = 7)
	glo, ghi := []int{4, -1}, []int{8, 2} // rows 4, 5, 0, 1, 2; columns 4, 0, 1, 2
	got := make([]T, 5*7)
	require.NoError(t, a.PeriodicGet(ctx, glo, ghi, got, []int{7}))
	for i := 0; i < 5; i++ {
		for j := 0; j < 4; j++ {
			require.Equal(t, m[wrap(glo[0]+i, 6)*5+wrap(glo[1]+j, 5)], got[i*7+j], "PeriodicGet (%d, %d)", i, j)
		}
	}
	require.NoError(t, a.Sync(ctx))

	// every rank accumulates 2·ones over the same wrapped patch
	ones := make([]T, 16)
	for i := range ones {
		ones[i] = val[T](1)
	}
	require.NoError(t, a.PeriodicAcc(ctx, lo, hi, ones, nil, val[T](2)))
	require.NoError(t, a.Sync(ctx))
	for i := 0; i < 4; i++ {
		for j := 0; j < 4; j++ {
			m[wrap(lo[0]+i, 6)*5+wrap(lo[1]+j, 5)] += val[T](2 * rt.Size())
		}
	}
	require.Equal(t, m, getAll(ctx, t, a), "PeriodicAcc")

	// bad input: longer than a period, hi < lo, wrong bounds, short buffer
	require.True(t, errors.Is(a.PeriodicPut(ctx, []int{0, 0}, []int{6, 0}, make([]T, 7), nil), ErrOutOfBounds))
	require.True(t, errors.Is(a.PeriodicPut(ctx, []int{2, 0}, []int{1, 0}, buf, nil), ErrOutOfBounds))
	require.True(t, errors.Is(a.PeriodicGet(ctx, []int{0}, []int{1}, buf, nil), ErrShape))
	require.True(t, errors.Is(a.PeriodicAcc(ctx, lo, hi, buf[:15], nil, val[T](1)), ErrShape))
	require.NoError(t, a.Sync(ctx))
	require.Equal(t, m, getAll(ctx, t, a), "bad input changed the array")
	require.NoError(t, a.Destroy(ctx))
}

func TestPeriodic(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		periodicOps[float64](ctx, t, rt)
		periodicOps[int32](ctx, t, rt)
	})
}
