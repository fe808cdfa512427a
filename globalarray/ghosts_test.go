package globalarray

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// linear is the row-major index of subscript s in dims.
func linear(dims, s []int) int {
	x := 0
	for d := range dims {
		x = x*dims[d] + s[d]
	}
	return x
}

// eachStorage calls fn for every element of this rank's storage (ghost cells included, from
// AccessGhosts) with its index in data and the array subscript it mirrors (wrapped
// periodically), and whether it is a ghost cell.
func eachStorage[T Elem](a *Array[T], data []T, sdims, ld []int, fn func(i int, sub []int, ghost bool)) {
	n := len(sdims)
	if len(data) == 0 {
		return
	}
	lo, hi := a.Distribution(a.me)
	w, dims := a.GhostWidths(), a.Dims()
	pos := make([]int, n)
	sub := make([]int, n)
	for {
		i, ghost := 0, false
		for d := 0; d < n; d++ {
			if d > 0 {
				i *= ld[d-1]
			}
			i += pos[d]
			g := lo[d] - w[d] + pos[d]
			ghost = ghost || g < lo[d] || g > hi[d]
			sub[d] = ((g % dims[d]) + dims[d]) % dims[d]
		}
		fn(i, sub, ghost)
		d := n - 1
		for ; d >= 0; d-- {
			if pos[d]++; pos[d] < sdims[d] {
				break
			}
			pos[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// fillModel puts value linear+1 into every element (from rank 0) and synchronizes.
func fillModel[T Elem](ctx context.Context, t testing.TB, a *Array[T]) []T {
	dims := a.Dims()
	n := 1
	for _, e := range dims {
		n *= e
	}
	want := make([]T, n)
	for x := range want {
		want[x] = val[T](x + 1)
	}
	if a.me == 0 { // the first rank of the array's group
		hi := make([]int, len(dims))
		for d, e := range dims {
			hi[d] = e - 1
		}
		require.NoError(t, a.Put(ctx, make([]int, len(dims)), hi, want, nil))
	}
	require.NoError(t, a.Sync(ctx))
	return want
}

// ghostUpdate checks GA_Update_ghosts: after a whole-array Put every storage element of every
// rank, ghost cells and corners included, holds the value of the element it mirrors
// (periodically wrapped), and the array proper reads back unchanged.
func ghostUpdate[T Elem](ctx context.Context, t testing.TB, rt *rma.Runtime, dims, widths []int, opts ...Option) {
	a, err := Create[T](ctx, rt, "ghosts", dims, append([]Option{Ghosts(widths...)}, opts...)...)
	require.NoError(t, err)
	defer a.Destroy(ctx)
	require.True(t, a.HasGhosts())
	require.Equal(t, widths, a.GhostWidths())
	want := fillModel(ctx, t, a)
	require.NoError(t, a.UpdateGhosts(ctx))
	data, sdims, ld, err := a.AccessGhosts()
	require.NoError(t, err)
	eachStorage(a, data, sdims, ld, func(i int, sub []int, _ bool) {
		require.Equal(t, want[linear(dims, sub)], data[i], "storage element %d mirrors %v", i, sub)
	})
	a.Release()
	require.Equal(t, want, getAll(ctx, t, a))
	// Access gives the block proper in the same storage
	loc, ldA, err := a.Access()
	require.NoError(t, err)
	require.Equal(t, ld, ldA)
	if lo, hi := a.Distribution(a.me); len(loc) > 0 {
		sub := append([]int(nil), lo...)
		for k := 0; ; k++ {
			i := 0
			for d := range sub {
				if d > 0 {
					i *= ldA[d-1]
				}
				i += sub[d] - lo[d]
			}
			require.Equal(t, want[linear(dims, sub)], loc[i])
			d := len(sub) - 1
			for ; d >= 0; d-- {
				if sub[d] < hi[d] {
					sub[d]++
					break
				}
				sub[d] = lo[d]
			}
			if d < 0 {
				break
			}
		}
	}
	a.Release()
}

func TestGhostsUpdate(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		ghostUpdate[float64](ctx, t, rt, []int{7, 9}, []int{1, 2})
		ghostUpdate[int32](ctx, t, rt, []int{4, 5, 6}, []int{1, 0, 2})
		ghostUpdate[complex128](ctx, t, rt, []int{11}, []int{3})
		ghostUpdate[int64](ctx, t, rt, []int{3, 4}, []int{3, 4}) // widths of a whole period
	})
}

// Every other call addresses the array proper of an array with ghost cells exactly as of one
// without: the same calls on both give the same values.
func TestGhostsArrayProper(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		dims := []int{6, 7}
		g, err := Create[int64](ctx, rt, "g", dims, Ghosts(2, 1))
		require.NoError(t, err)
		p, err := Create[int64](ctx, rt, "p", dims)
		require.NoError(t, err)
		defer g.Destroy(ctx)
		defer p.Destroy(ctx)
		both := func(fn func(a *Array[int64])) {
			fn(g)
			fn(p)
			require.NoError(t, g.Sync(ctx))
			require.Equal(t, getAll(ctx, t, p), getAll(ctx, t, g))
			require.NoError(t, g.Sync(ctx)) // nobody changes an array another still reads
		}
		both(func(a *Array[int64]) { require.NoError(t, a.Fill(ctx, 3)) })
		both(func(a *Array[int64]) { require.NoError(t, a.Scale(ctx, 5)) })
		both(func(a *Array[int64]) {
			require.NoError(t, a.Acc(ctx, []int{1, 2}, []int{4, 6}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, nil, 2))
			require.NoError(t, a.Sync(ctx))
		})
		both(func(a *Array[int64]) {
			subs := [][]int{{0, 0}, {5, 6}, {2, 3}, {2, 3}}
			require.NoError(t, a.ScatterAcc(ctx, subs, []int64{1, 2, 3, 4}, 1))
			require.NoError(t, a.Sync(ctx))
			v := make([]int64, len(subs))
			require.NoError(t, a.Gather(ctx, subs, v))
			require.Equal(t, v[2], v[3])
			require.Equal(t, int64(15+1*int64(rt.Size())), v[0]) // Fill 3, Scale 5, one ScatterAcc of 1 per rank
			require.NoError(t, a.Sync(ctx))
		})
		both(func(a *Array[int64]) {
			if rt.Rank() == rt.Size()-1 {
				_, err := a.ReadInc(ctx, []int{3, 3}, 100)
				require.NoError(t, err)
			}
			require.NoError(t, a.Sync(ctx))
		})
		dg, err := g.Dot(ctx, p)
		require.NoError(t, err)
		dp, err := p.Dot(ctx, p)
		require.NoError(t, err)
		require.Equal(t, dp, dg)
		both(func(a *Array[int64]) { require.NoError(t, Add(ctx, 2, g, -1, p, a)) })
		require.NoError(t, p.Copy(ctx, g))
		require.Equal(t, getAll(ctx, t, p), getAll(ctx, t, g))
		require.NoError(t, g.Sync(ctx))
		require.NoError(t, g.Zero(ctx))
		require.NoError(t, g.Copy(ctx, p))
		require.Equal(t, make([]int64, 42), getAll(ctx, t, p))
		require.NoError(t, g.Sync(ctx))
		// the ghost cells of a Zero'd array hold what the last update left
		got := make([]int64, 4)
		require.NoError(t, g.PeriodicGet(ctx, []int{-1, -1}, []int{0, 0}, got, nil))
		require.Equal(t, make([]int64, 4), got)
	})
}

// NGA_NbGet_ghost_dir fills exactly the ghost cells of its direction.
func TestGhostsGetDir(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		dims := []int{5, 8}
		a, err := Create[float32](ctx, rt, "dir", dims, Ghosts(1, 2))
		require.NoError(t, err)
		defer a.Destroy(ctx)
		want := fillModel(ctx, t, a)
		lo, hi := a.Distribution(rt.Rank())
		for _, mask := range [][]int{{1, 0}, {0, -1}, {-1, 1}} {
			data, sdims, ld, err := a.AccessGhosts()
			require.NoError(t, err)
			eachStorage(a, data, sdims, ld, func(i int, _ []int, ghost bool) {
				if ghost {
					data[i] = -1
				}
			})
			a.Release()
			h, err := a.NbGetGhostDir(ctx, mask)
			require.NoError(t, err)
			require.NoError(t, h.Wait(ctx))
			w := a.GhostWidths()
			eachStorage(a, data, sdims, ld, func(i int, sub []int, ghost bool) {
				if !ghost {
					return
				}
				in := true // inside the region of mask
				for d := range sdims {
					g := lo[d] - w[d] + (i/stride(sdims, d))%sdims[d]
					switch mask[d] {
					case -1:
						in = in && g < lo[d]
					case 0:
						in = in && g >= lo[d] && g <= hi[d]
					case 1:
						in = in && g > hi[d]
					}
				}
				if in {
					require.Equal(t, want[linear(dims, sub)], data[i], "mask %v, cell %v", mask, sub)
				} else {
					require.Equal(t, float32(-1), data[i], "mask %v leaves cell %d", mask, i)
				}
			})
		}
		require.NoError(t, a.Sync(ctx))
	})
}

// stride is the element stride of dimension d in a packed row-major box of extents dims.
func stride(dims []int, d int) int {
	s := 1
	for k := d + 1; k < len(dims); k++ {
		s *= dims[k]
	}
	return s
}

// Bad ghost widths and directions are ErrShape on every rank and create or change nothing.
func TestGhostsBadInput(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		for _, w := range [][]int{{1}, {1, -1}, {1, 9}, {1, 2, 3}} {
			_, err := Create[float64](ctx, rt, "bad", []int{4, 8}, Ghosts(w...))
			require.ErrorIs(t, err, ErrShape, "widths %v", w)
		}
		p, err := Create[float64](ctx, rt, "plain", []int{4, 8})
		require.NoError(t, err)
		_, _, _, err = p.AccessGhosts()
		require.ErrorIs(t, err, ErrShape)
		_, err = p.NbGetGhostDir(ctx, []int{1, 0})
		require.ErrorIs(t, err, ErrShape)
		require.False(t, p.HasGhosts())
		require.NoError(t, p.Destroy(ctx))
		a, err := Create[float64](ctx, rt, "g", []int{4, 8}, Ghosts(1, 0))
		require.NoError(t, err)
		fillModel(ctx, t, a)
		data, _, _, err := a.AccessGhosts()
		require.NoError(t, err)
		before := append([]float64(nil), data...)
		a.Release()
		for _, m := range [][]int{{0, 0}, {0, 1}, {2, 0}, {1}, {1, 0, 0}} {
			_, err := a.NbGetGhostDir(ctx, m)
			require.ErrorIs(t, err, ErrShape, "mask %v", m)
		}
		require.Equal(t, before, data, "a refused direction changes nothing")
		require.NoError(t, a.Destroy(ctx))
	})
}
