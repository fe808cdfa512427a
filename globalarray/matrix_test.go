package globalarray

import (
	"context"
	"errors"
	"math"
	"math/cmplx"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// matrixOps checks Transpose (between differently distributed arrays), Symmetrize, the diagonal
// calls and the norms against a serial model.
func matrixOps[T Elem](ctx context.Context, t testing.TB, rt *rma.Runtime) {
	const m, n = 5, 7
	a, err := Create[T](ctx, rt, "ma", []int{m, n})
	require.NoError(t, err)
	b, err := Create[T](ctx, rt, "mb", []int{n, m}, Chunk(2, -1))
	require.NoError(t, err)
	ma := make([]T, m*n)
	for i := range ma {
		ma[i] = signed[T](i)
	}
	setAll(ctx, t, a, ma)
	require.NoError(t, Transpose(ctx, a, b))
	mb := make([]T, n*m)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			mb[j*m+i] = ma[i*n+j]
		}
	}
	require.Equal(t, mb, getAll(ctx, t, b), "Transpose")

	// the norms of a: 1-norm = largest column sum of magnitudes, infinity-norm = largest row sum
	var n1, ninf float64
	for j := 0; j < n; j++ {
		s := 0.0
		for i := 0; i < m; i++ {
			s += absOf(ma[i*n+j])
		}
		n1 = math.Max(n1, s)
	}
	for i := 0; i < m; i++ {
		s := 0.0
		for j := 0; j < n; j++ {
			s += absOf(ma[i*n+j])
		}
		ninf = math.Max(ninf, s)
	}
	got1, err := Norm1(ctx, a)
	require.NoError(t, err)
	require.InDelta(t, n1, got1, 1e-9*n1)
	gotInf, err := NormInfinity(ctx, a)
	require.NoError(t, err)
	require.InDelta(t, ninf, gotInf, 1e-9*ninf)

	// a square matrix: symmetrize, then the diagonal calls
	s, err := Create[T](ctx, rt, "ms", []int{6, 6})
	require.NoError(t, err)
	ms := make([]T, 36)
	for i := range ms {
		ms[i] = val[T](4 * (i + 1)) // even: the halves are exact in integer types too
	}
	setAll(ctx, t, s, ms)
	require.NoError(t, Symmetrize(ctx, s))
	want := make([]T, 36)
	for i := 0; i < 6; i++ {
		for j := 0; j < 6; j++ {
			want[i*6+j] = (ms[i*6+j] + ms[j*6+i]) / T(2)
		}
	}
	require.Equal(t, want, getAll(ctx, t, s), "Symmetrize")
	v, err := Create[T](ctx, rt, "mv", []int{6})
	require.NoError(t, err)
	dv := make([]T, 6)
	for i := range dv {
		dv[i] = val[T](10 * (i + 1))
	}
	setAll(ctx, t, v, dv)
	require.NoError(t, AddDiagonal(ctx, s, v))
	for i := 0; i < 6; i++ {
		want[i*7] += dv[i]
	}
	require.Equal(t, want, getAll(ctx, t, s), "AddDiagonal")
	require.NoError(t, SetDiagonal(ctx, s, v))
	for i := 0; i < 6; i++ {
		want[i*7] = dv[i]
	}
	require.Equal(t, want, getAll(ctx, t, s), "SetDiagonal")
	require.NoError(t, s.ScalePatch(ctx, []int{0, 0}, []int{5, 5}, val[T](3)))
	require.NoError(t, GetDiagonal(ctx, s, v))
	for i := range dv {
		dv[i] *= val[T](3)
	}
	require.Equal(t, dv, getAll(ctx, t, v), "GetDiagonal")

	// bad input
	require.True(t, errors.Is(Transpose(ctx, a, a), ErrShape))
	require.True(t, errors.Is(Symmetrize(ctx, a), ErrShape))
	require.True(t, errors.Is(SetDiagonal(ctx, s, a), ErrShape))
	_, err = Norm1(ctx, v)
	require.True(t, errors.Is(err, ErrShape))
	require.Equal(t, ma, getAll(ctx, t, a), "bad input changed a")
	for _, arr := range []*Array[T]{a, b, s, v} {
		require.NoError(t, arr.Destroy(ctx))
	}
}

// absOf is |x| as a float64.
func absOf[T Elem](x T) float64 {
	switch v := any(x).(type) {
	case int32:
		return math.Abs(float64(v))
	case int64:
		return math.Abs(float64(v))
	case float32:
		return math.Abs(float64(v))
	case float64:
		return math.Abs(v)
	case complex64:
		return cmplx.Abs(complex128(v))
	case complex128:
		return cmplx.Abs(v)
	}
	panic("type")
}

func TestMatrixOps(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		matrixOps[float64](ctx, t, rt)
		matrixOps[int32](ctx, t, rt)
		matrixOps[complex128](ctx, t, rt)
	})
}
