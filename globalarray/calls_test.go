package globalarray

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// NGA_Strided_put/get/acc touch exactly every skip-th element of the patch.
func TestStridedPatch(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		dims := []int{7, 10}
		a, err := Create[float64](ctx, rt, "s", dims)
		require.NoError(t, err)
		defer a.Destroy(ctx)
		lo, hi, skip := []int{1, 2}, []int{6, 9}, []int{2, 3} // rows 1,3,5 × cols 2,5,8
		want := make([]float64, 70)
		if rt.Rank() == 0 {
			// a 3x3 strided patch from a buffer with ld 4 (a spare column)
			buf := []float64{1, 2, 3, -1, 4, 5, 6, -1, 7, 8, 9}
			require.NoError(t, a.StridedPut(ctx, lo, hi, skip, buf, []int{4}))
		}
		k := 1.0
		for _, r := range []int{1, 3, 5} {
			for _, c := range []int{2, 5, 8} {
				want[r*10+c] = k
				k++
			}
		}
		require.NoError(t, a.Sync(ctx))
		require.Equal(t, want, getAll(ctx, t, a))
		require.NoError(t, a.Sync(ctx))
		require.NoError(t, a.StridedAcc(ctx, lo, hi, skip, []float64{1, 1, 1, 1, 1, 1, 1, 1, 1}, nil, 10))
		require.NoError(t, a.Sync(ctx))
		got := make([]float64, 9)
		require.NoError(t, a.StridedGet(ctx, lo, hi, skip, got, nil))
		for i := range got {
			require.Equal(t, float64(i+1+10*rt.Size()), got[i])
		}
		require.NoError(t, a.Sync(ctx))
		// bad input: nothing written
		for _, c := range []struct{ lo, hi, skip []int }{
			{lo, hi, []int{0, 1}}, {lo, hi, []int{1}}, {lo, []int{7, 9}, skip}, {[]int{3, 3}, []int{2, 3}, skip},
		} {
			err := a.StridedPut(ctx, c.lo, c.hi, c.skip, make([]float64, 100), nil)
			require.Error(t, err)
		}
		require.ErrorIs(t, a.StridedPut(ctx, lo, hi, skip, make([]float64, 8), nil), ErrShape)
		require.NoError(t, a.Sync(ctx))
		require.Equal(t, got, func() []float64 {
			g := make([]float64, 9)
			require.NoError(t, a.StridedGet(ctx, lo, hi, skip, g, nil))
			return g
		}())
	})
}

// GA mutexes serialize read-modify-write sequences of plain Get and Put: every rank increments
// the same counter under mutex m, np·iters increments land.
func TestGAMutexes(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		const n, iters = 7, 5
		mu, err := CreateMutexes(ctx, rt, n)
		require.NoError(t, err)
		require.Equal(t, n, mu.Len())
		a, err := Create[int64](ctx, rt, "c", []int{n})
		require.NoError(t, err)
		for m := 0; m < n; m++ {
			for i := 0; i < iters; i++ {
				require.NoError(t, mu.Lock(ctx, m))
				v := make([]int64, 1)
				require.NoError(t, a.Get(ctx, []int{m}, []int{m}, v, nil))
				v[0]++
				require.NoError(t, a.Put(ctx, []int{m}, []int{m}, v, nil))
				require.NoError(t, rt.Fence(ctx, mustLocate(t, a, m)))
				require.NoError(t, mu.Unlock(ctx, m))
			}
		}
		require.NoError(t, a.Sync(ctx))
		for _, v := range getAll(ctx, t, a) {
			require.Equal(t, int64(iters*rt.Size()), v)
		}
		require.ErrorIs(t, mu.Lock(ctx, n), ErrOutOfBounds)
		require.ErrorIs(t, mu.Unlock(ctx, -1), ErrOutOfBounds)
		require.NoError(t, a.Destroy(ctx))
		require.NoError(t, mu.Destroy(ctx))
		_, err = CreateMutexes(ctx, rt, -1)
		require.ErrorIs(t, err, ErrShape)
	})
}

func mustLocate(t testing.TB, a *Array[int64], i int) int {
	r, err := a.Locate([]int{i})
	require.NoError(t, err)
	return r
}

// NGA_NbTest turns true once the operation completed; GA_Print_patch prints the values.
func TestNbTestAndPrint(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		a, err := Create[int32](ctx, rt, "P", []int{3, 4})
		require.NoError(t, err)
		defer a.Destroy(ctx)
		if rt.Rank() == 0 {
			h, err := a.NbPut(ctx, []int{0, 0}, []int{2, 3}, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, nil)
			require.NoError(t, err)
			for !h.Test() {
			}
			require.NoError(t, h.Wait(ctx))
			require.True(t, (*Handle)(nil).Test())
		}
		require.NoError(t, a.Sync(ctx))
		if rt.Rank() == rt.Size()-1 {
			var b bytes.Buffer
			require.NoError(t, a.PrintPatch(ctx, &b, []int{1, 1}, []int{2, 3}))
			require.Equal(t, "global array \"P\" of int32, dims [3 4], patch [1 1]..[2 3]:\nP[1, 1..3]: 6 7 8\nP[2, 1..3]: 10 11 12\n", b.String())
			b.Reset()
			require.NoError(t, a.Print(ctx, &b))
			require.Contains(t, b.String(), "P[0, 0..3]: 1 2 3 4\n")
			require.ErrorIs(t, a.PrintPatch(ctx, &b, []int{0, 0}, []int{3, 0}), ErrOutOfBounds)
		}
		require.NoError(t, a.Sync(ctx))
	})
}
