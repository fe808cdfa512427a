package globalarray

import (
	"context"
	"errors"
	"fmt"
	"math/cmplx"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// gemmCase multiplies op(A)·op(B) (m×k by k×n) into C with alpha and beta and compares every
// element with a serial triple loop.
func gemmCase[T Floating](ctx context.Context, t testing.TB, rt *rma.Runtime, m, n, k int, transA, transB bool, tol float64, opts ...Option) {
	ad, bd := []int{m, k}, []int{k, n}
	if transA {
		ad = []int{k, m}
	}
	if transB {
		bd = []int{n, k}
	}
	a, err := Create[T](ctx, rt, "ga", ad, opts...)
	require.NoError(t, err)
	b, err := Create[T](ctx, rt, "gb", bd, append([]Option{Chunk(-1, 5)}, opts...)...)
	require.NoError(t, err)
	c, err := Create[T](ctx, rt, "gc", []int{m, n}, opts...)
	require.NoError(t, err)
	ma, mb, mc := make([]T, m*k), make([]T, k*n), make([]T, m*n)
	for i := range ma {
		ma[i] = val[T](i%13 - 6)
	}
	for i := range mb {
		mb[i] = val[T](i%7 - 3)
	}
	for i := range mc {
		mc[i] = val[T](i % 5)
	}
	setAll(ctx, t, a, ma)
	setAll(ctx, t, b, mb)
	setAll(ctx, t, c, mc)
	opA := func(i, p int) T { // op(A)[i][p]
		if transA {
			return ma[p*m+i]
		}
		return ma[i*k+p]
	}
	opB := func(p, j int) T {
		if transB {
			return mb[j*k+p]
		}
		return mb[p*n+j]
	}
	alpha, beta := val[T](2), val[T](-1)
	require.NoError(t, Gemm(ctx, transA, transB, alpha, a, b, beta, c))
	got := getAll(ctx, t, c)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s T
			for p := 0; p < k; p++ {
				s += opA(i, p) * opB(p, j)
			}
			want := alpha*s + beta*mc[i*n+j]
			d := complex128Of(got[i*n+j] - want)
			require.LessOrEqual(t, cmplx.Abs(d), tol*(1+cmplx.Abs(complex128Of(want))), "C[%d][%d] transA %v transB %v", i, j, transA, transB)
		}
	}
	require.True(t, errors.Is(Gemm(ctx, transA, transB, alpha, a, b, beta, a), ErrShape), "C = A")
	for _, x := range []*Array[T]{a, b, c} {
		require.NoError(t, x.Destroy(ctx))
	}
}

func complex128Of[T Floating](x T) complex128 {
	switch v := any(x).(type) {
	case float32:
		return complex(float64(v), 0)
	case float64:
		return complex(v, 0)
	case complex64:
		return complex128(v)
	case complex128:
		return v
	}
	panic("type")
}

func TestGemm(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				gemmCase[float64](ctx, t, rt, 11, 9, 13, ta, tb, 0)
			}
		}
		gemmCase[float64](ctx, t, rt, 6, 5, 2*gemmPanel+17, false, true, 0) // several panels
		gemmCase[complex128](ctx, t, rt, 7, 8, 9, true, false, 0)
		gemmCase[float32](ctx, t, rt, 9, 7, 10, false, false, 1e-6)
		gemmCase[complex64](ctx, t, rt, 5, 6, 7, false, true, 1e-6)
	})
}

// BenchmarkGemm multiplies two n×n float64 matrices on np in-process ranks over shared memory;
// GFLOP/s = 2n³ per operation.
func BenchmarkGemm(b *testing.B) {
	for _, np := range []int{1, 2} {
		for _, n := range []int{512, 1024} {
			b.Run(fmt.Sprintf("np%d/n%d", np, n), func(b *testing.B) {
				err := rmatest.Start(context.Background(), np, func(ctx context.Context, rt *rma.Runtime) error {
					var x [3]*Array[float64]
					for i := range x {
						a, err := Create[float64](ctx, rt, fmt.Sprint("g", i), []int{n, n})
						if err != nil {
							return err
						}
						if err := a.Fill(ctx, 1); err != nil {
							return err
						}
						x[i] = a
					}
					if rt.Rank() == 0 {
						b.ResetTimer()
					}
					for i := 0; i < b.N; i++ {
						if err := Gemm(ctx, false, false, 1, x[0], x[1], 0, x[2]); err != nil {
							return err
						}
					}
					if rt.Rank() == 0 {
						b.StopTimer()
						b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					}
					for _, a := range x {
						if err := a.Destroy(ctx); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
