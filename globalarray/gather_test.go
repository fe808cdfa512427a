package globalarray

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// subsOf turns row-major element indexes of dims into subscripts.
func subsOf(dims []int, idx []int) [][]int {
	subs := make([][]int, len(idx))
	for i, x := range idx {
		s := make([]int, len(dims))
		for d := len(dims) - 1; d >= 0; d-- {
			s[d] = x % dims[d]
			x /= dims[d]
		}
		subs[i] = s
	}
	return subs
}

// acrossJobs runs body in jobs of 1, 2, 4 and 5 ranks over shared memory and over tcp (the
// job shapes of the GA calls' tests).
func acrossJobs(t *testing.T, body func(ctx context.Context, t testing.TB, rt *rma.Runtime)) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		for _, np := range []int{1, 2, 4, 5} {
			t.Run(fmt.Sprintf("%s/np%d", tr, np), func(t *testing.T) {
				rmatest.Run(t, np, body, rmatest.Transport(tr))
			})
		}
	}
}

// gatherScatter checks NGA_Scatter, NGA_Gather and NGA_Scatter_acc against a serial model: every
// rank scatters to the elements it is assigned (index mod np), every rank gathers a random
// sample (with repeats) of the whole array, and every rank scatter-accumulates into a random
// sample with repeats, each repeat adding again.
func gatherScatter[T Elem](ctx context.Context, t testing.TB, rt *rma.Runtime, dims []int, opts ...Option) {
	a, err := Create[T](ctx, rt, "gs", dims, opts...)
	require.NoError(t, err)
	me, np := rt.Rank(), rt.Size()
	n := 1
	for _, e := range dims {
		n *= e
	}
	want := make([]T, n)
	var mine []int
	for x := 0; x < n; x++ {
		want[x] = val[T](x + 1)
		if x%np == me {
			mine = append(mine, x)
		}
	}
	v := make([]T, len(mine))
	for i, x := range mine {
		v[i] = want[x]
	}
	require.NoError(t, a.Scatter(ctx, subsOf(dims, mine), v))
	require.NoError(t, a.Sync(ctx))
	require.Equal(t, want, getAll(ctx, t, a), "after Scatter")

	rng := rand.New(rand.NewPCG(uint64(me), 7))
	sample := make([]int, 3*n/2+1)
	for i := range sample {
		sample[i] = rng.IntN(n)
	}
	got := make([]T, len(sample))
	require.NoError(t, a.Gather(ctx, subsOf(dims, sample), got))
	for i, x := range sample {
		require.Equal(t, want[x], got[i], "Gather element %d (index %d)", i, x)
	}
	require.NoError(t, a.Sync(ctx))

	alpha := val[T](3)
	for r := 0; r < np; r++ {
		rr := rand.New(rand.NewPCG(uint64(r), 11)) // every rank draws every rank's sample
		idx := make([]int, n+3)
		add := make([]T, len(idx))
		for i := range idx {
			idx[i] = rr.IntN(n)
			add[i] = val[T](i%4 + 1)
			want[idx[i]] += alpha * add[i]
		}
		if r == me {
			require.NoError(t, a.ScatterAcc(ctx, subsOf(dims, idx), add, alpha))
		}
	}
	require.NoError(t, a.Sync(ctx))
	require.Equal(t, want, getAll(ctx, t, a), "after ScatterAcc")
	require.NoError(t, a.Destroy(ctx))
}

func TestGatherScatter(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		gatherScatter[float64](ctx, t, rt, []int{9, 7})
		gatherScatter[int32](ctx, t, rt, []int{5, 3, 4})
		gatherScatter[complex128](ctx, t, rt, []int{11})
	})
}

// TestGatherScatterBadInput: a subscript out of bounds or of the wrong length anywhere in the
// list, or a value list of another length, is refused before any element moves.
func TestGatherScatterBadInput(t *testing.T) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		t.Run(string(tr), func(t *testing.T) {
			rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				a, err := Create[int64](ctx, rt, "bad", []int{4, 4})
				require.NoError(t, err)
				require.NoError(t, a.Fill(ctx, 5))
				good := [][]int{{0, 0}, {3, 3}, {2, 1}}
				cases := []struct {
					name string
					subs [][]int
					n    int
					want error
				}{
					{"row out of bounds last", append(good, []int{4, 0}), 4, ErrOutOfBounds},
					{"negative column first", append([][]int{{0, -1}}, good...), 4, ErrOutOfBounds},
					{"subscript of one index", append(good, []int{1}), 4, ErrShape},
					{"fewer values", good, 2, ErrShape},
				}
				for _, c := range cases {
					v := make([]int64, c.n)
					for i := range v {
						v[i] = 99
					}
					for _, call := range []struct {
						name string
						f    func() error
					}{
						{"Scatter", func() error { return a.Scatter(ctx, c.subs, v) }},
						{"ScatterAcc", func() error { return a.ScatterAcc(ctx, c.subs, v, 1) }},
						{"Gather", func() error { return a.Gather(ctx, c.subs, v) }},
					} {
						err := call.f()
						require.True(t, errors.Is(err, c.want), "%s %s: %v", call.name, c.name, err)
						for i := range v {
							require.Equal(t, int64(99), v[i], "%s %s wrote the values", call.name, c.name)
						}
					}
				}
				require.NoError(t, a.Sync(ctx))
				for _, x := range getAll(ctx, t, a) {
					require.Equal(t, int64(5), x, "bad input changed the array")
				}
				require.NoError(t, a.Destroy(ctx))
				require.True(t, errors.Is(a.Gather(ctx, good, make([]int64, 3)), ErrDestroyed))
			}, rmatest.Transport(tr))
		})
	}
}

// TestGopProdAbs checks GA_Gop's "*", "absmax" and "absmin" at 1, 2, 4 and 5 ranks: rank r
// contributes (r+1)·(−1)^r, so the product, the largest and the smallest magnitude are known.
func TestGopProdAbs(t *testing.T) {
	for _, np := range []int{1, 2, 4, 5} {
		t.Run(fmt.Sprintf("np%d", np), func(t *testing.T) {
			rmatest.Run(t, np, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				me := rt.Rank()
				x := float64(me + 1)
				if me%2 == 1 {
					x = -x
				}
				prod := 1.0
				for r := 0; r < np; r++ {
					v := float64(r + 1)
					if r%2 == 1 {
						v = -v
					}
					prod *= v
				}
				d := []float64{x, x, x}
				require.NoError(t, GopProd(ctx, rt, d[:1]))
				require.NoError(t, GopAbsMax(ctx, rt, d[1:2]))
				require.NoError(t, GopAbsMin(ctx, rt, d[2:3]))
				require.Equal(t, []float64{prod, float64(np), 1}, d)
				i := []int64{-int64(me) - 1}
				require.NoError(t, GopAbsMin(ctx, rt, i))
				require.Equal(t, int64(1), i[0], "absmin is a magnitude even of one negative value")
				z := []complex128{complex(0, 1)} // i^np
				require.NoError(t, GopProd(ctx, rt, z))
				want := []complex128{1, 1i, -1, -1i}[np%4]
				require.Equal(t, want, z[0])
				require.True(t, errors.Is(GopAbsMax(ctx, rt, z), ErrType), "absmax of complex values")
			})
		})
	}
}
