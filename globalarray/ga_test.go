package globalarray

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/globalarray/dist"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// val converts a small integer to T (exactly representable in every element type).
func val[T Elem](v int) T {
	var z T
	switch p := any(&z).(type) {
	case *int32:
		*p = int32(v)
	case *int64:
		*p = int64(v)
	case *float32:
		*p = float32(v)
	case *float64:
		*p = float64(v)
	case *complex64:
		*p = complex(float32(v), float32(-v/2))
	case *complex128:
		*p = complex(float64(v), float64(-v/2))
	default:
		panic(fmt.Sprintf("val: %T", z))
	}
	return z
}

// model is a serial row-major copy of a global array.
type model[T Elem] struct {
	dims   []int
	stride []int
	data   []T
}

func newModel[T Elem](dims []int) *model[T] {
	m := &model[T]{dims: dims, stride: make([]int, len(dims))}
	s := 1
	for d := len(dims) - 1; d >= 0; d-- {
		m.stride[d] = s
		s *= dims[d]
	}
	m.data = make([]T, s)
	return m
}

// each calls fn for every element of the patch with its model index and its index in a buffer
// with strides bs (relative to lo).
func each(lo, hi, stride, bs []int, fn func(mi, bi int)) {
	n := len(lo)
	sub := slices.Clone(lo)
	for {
		mi, bi := 0, 0
		for d := 0; d < n; d++ {
			mi += sub[d] * stride[d]
			bi += (sub[d] - lo[d]) * bs[d]
		}
		fn(mi, bi)
		d := n - 1
		for ; d >= 0; d-- {
			sub[d]++
			if sub[d] <= hi[d] {
				break
			}
			sub[d] = lo[d]
		}
		if d < 0 {
			return
		}
	}
}

// randPatch draws a patch of dims and, sometimes, padded leading dimensions; it returns the
// buffer strides and the buffer length.
func randPatch(rng *rand.Rand, dims []int) (lo, hi, ld, bs []int, n int) {
	lo, hi = make([]int, len(dims)), make([]int, len(dims))
	for d := range dims {
		a, b := rng.IntN(dims[d]), rng.IntN(dims[d])
		lo[d], hi[d] = min(a, b), max(a, b)
	}
	if len(dims) > 1 && rng.IntN(2) == 0 {
		ld = make([]int, len(dims)-1)
		for d := range ld {
			ld[d] = hi[d+1] - lo[d+1] + 1 + rng.IntN(3)
		}
	}
	var st [dist.MaxDims]int
	span, err := dist.BufStrides(lo, hi, ld, 1<<30, st[:])
	if err != nil {
		panic(err)
	}
	return lo, hi, ld, slices.Clone(st[:len(dims)]), span
}

// getAll reads the whole array.
func getAll[T Elem](ctx context.Context, t testing.TB, a *Array[T]) []T {
	dims := a.Dims()
	lo, hi := make([]int, len(dims)), make([]int, len(dims))
	n := 1
	for d, e := range dims {
		hi[d] = e - 1
		n *= e
	}
	buf := make([]T, n)
	require.NoError(t, a.Get(ctx, lo, hi, buf, nil))
	return buf
}

// roundTrip runs rounds of patch puts (one origin per round, overlapping patches in program
// order), patch gets from every rank, and a round of accumulates from every rank, each checked
// against a serial model.
func roundTrip[T Elem](ctx context.Context, t testing.TB, rt *rma.Runtime, dims []int, opts ...Option) {
	a, err := Create[T](ctx, rt, "rt", dims, opts...)
	require.NoError(t, err)
	me, np := rt.Rank(), rt.Size()
	m := newModel[T](dims)
	rng := rand.New(rand.NewPCG(uint64(len(dims)), uint64(np))) // same draws on every rank
	next := 1
	for round := 0; round < 2*np; round++ {
		origin := round % np
		for k := 0; k < 3; k++ {
			lo, hi, ld, bs, n := randPatch(rng, dims)
			buf := make([]T, n)
			each(lo, hi, m.stride, bs, func(mi, bi int) {
				buf[bi] = val[T](next)
				m.data[mi] = buf[bi]
				next++
			})
			if me == origin {
				require.NoError(t, a.Put(ctx, lo, hi, buf, ld))
				clear(buf) // reusable at return
			}
		}
		require.NoError(t, a.Sync(ctx))
	}
	for k := 0; k < 4; k++ {
		lo, hi, ld, bs, n := randPatch(rng, dims)
		buf := make([]T, n+2)
		for i := range buf {
			buf[i] = val[T](-7)
		}
		require.NoError(t, a.Get(ctx, lo, hi, buf[:n], ld))
		want := slices.Clone(buf)
		each(lo, hi, m.stride, bs, func(mi, bi int) { want[bi] = m.data[mi] })
		require.Equal(t, want, buf, "Get %v..%v ld %v", lo, hi, ld)
	}
	require.NoError(t, a.Sync(ctx)) // all reads done before anyone accumulates
	// accumulate: every rank adds alpha·(its buffer) to one patch
	lo, hi, ld, bs, n := randPatch(rng, dims)
	alpha := val[T](2)
	for r := 0; r < np; r++ {
		buf := make([]T, n)
		each(lo, hi, m.stride, bs, func(mi, bi int) {
			buf[bi] = val[T](r + 1 + bi%5)
			m.data[mi] += alpha * buf[bi]
		})
		if r == me {
			require.NoError(t, a.Acc(ctx, lo, hi, buf, ld, alpha))
		}
	}
	require.NoError(t, a.Sync(ctx))
	require.Equal(t, m.data, getAll(ctx, t, a), "after Acc of %v..%v", lo, hi)
	require.NoError(t, a.Destroy(ctx))
}

type shape struct {
	name string
	dims []int
	opts []Option
}

func shapes(np int) []shape {
	s := []shape{
		{"1d", []int{13}, nil},
		{"2d", []int{7, 5}, nil},
		{"3d", []int{4, 3, 5}, nil},
		{"2d chunk", []int{9, 4}, []Option{Chunk(4, -1)}},
	}
	if np >= 2 {
		// irregular, fewer blocks than ranks for np > 2
		s = append(s, shape{"2d irregular", []int{6, 7}, []Option{Irregular([][]int{{0, 1}, {0}})}})
	}
	if np >= 4 {
		s = append(s, shape{"3d irregular", []int{5, 4, 6}, []Option{Irregular([][]int{{0, 3}, {0}, {0, 2}})}})
	}
	return s
}

func TestPatchRoundTrip(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		for _, s := range shapes(rt.Size()) {
			roundTrip[float64](ctx, t, rt, s.dims, s.opts...)
		}
		s := shapes(rt.Size())[1]
		roundTrip[int32](ctx, t, rt, s.dims, s.opts...)
		roundTrip[int64](ctx, t, rt, s.dims, s.opts...)
		roundTrip[float32](ctx, t, rt, s.dims, s.opts...)
		roundTrip[complex64](ctx, t, rt, s.dims, s.opts...)
		roundTrip[complex128](ctx, t, rt, s.dims, s.opts...)
		roundTrip[int64](ctx, t, rt, []int{3, 2, 2, 3}, nil...)
	})
}

func TestNonBlocking(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		np := rt.Size()
		a, err := Create[int64](ctx, rt, "nb", []int{2 * np, 6})
		require.NoError(t, err)
		me := rt.Rank()
		// each rank puts its row pair, spanning several owners, non-blocking
		row := make([]int64, 12)
		for i := range row {
			row[i] = int64(100*me + i)
		}
		h, err := a.NbPut(ctx, []int{2 * me, 0}, []int{2*me + 1, 5}, row, nil)
		require.NoError(t, err)
		require.NoError(t, h.Wait(ctx))
		require.NoError(t, h.Wait(ctx), "second Wait")
		require.NoError(t, a.Sync(ctx))
		ones := make([]int64, 12*np)
		for i := range ones {
			ones[i] = 1
		}
		h2, err := a.NbAcc(ctx, []int{0, 0}, []int{2*np - 1, 5}, ones, nil, 10)
		require.NoError(t, err)
		require.NoError(t, h2.Wait(ctx))
		require.NoError(t, a.Sync(ctx))
		got := make([]int64, 12*np)
		h3, err := a.NbGet(ctx, []int{0, 0}, []int{2*np - 1, 5}, got, nil)
		require.NoError(t, err)
		require.NoError(t, h3.Wait(ctx))
		for r := 0; r < np; r++ {
			for i := 0; i < 12; i++ {
				require.Equal(t, int64(100*r+i+10*np), got[12*r+i], "rank %d's row pair, element %d", r, i)
			}
		}
		require.NoError(t, a.Destroy(ctx))
	})
}

func TestReadIncGapFree(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		readInc[int32](ctx, t, rt)
		readInc[int64](ctx, t, rt)
	})
}

func readInc[T ~int32 | ~int64](ctx context.Context, t testing.TB, rt *rma.Runtime) {
	const per = 25
	me, np := rt.Rank(), rt.Size()
	ctr, err := Create[T](ctx, rt, "counter", []int{3, 2})
	require.NoError(t, err)
	out, err := Create[int64](ctx, rt, "seen", []int{np * per})
	require.NoError(t, err)
	sub := []int{2, 1} // last rank's block
	seen := make([]int64, per)
	for i := range seen {
		seen[i], err = ctr.ReadInc(ctx, sub, 2)
		require.NoError(t, err)
	}
	require.NoError(t, out.Put(ctx, []int{me * per}, []int{me*per + per - 1}, seen, nil))
	require.NoError(t, Sync(ctx, rt))
	all := getAll(ctx, t, out)
	slices.Sort(all)
	for i, v := range all {
		require.Equal(t, int64(2*i), v, "values 0, 2, 4, ... without gaps or repeats")
	}
	final := getAll(ctx, t, ctr)
	require.Equal(t, T(2*np*per), final[5])
	require.NoError(t, out.Destroy(ctx))
	require.NoError(t, ctr.Destroy(ctx))
}

func TestCollectives(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		collectives(ctx, t, rt)
	})
}

func collectives(ctx context.Context, t testing.TB, rt *rma.Runtime) {
	me, np := rt.Rank(), rt.Size()
	dims := []int{7, 6}
	a, err := Create[float64](ctx, rt, "a", dims)
	require.NoError(t, err)
	// b is distributed differently from a
	var b *Array[float64]
	if np > 1 {
		b, err = Create[float64](ctx, rt, "b", dims, Irregular([][]int{{0, 5}, {0}}))
	} else {
		b, err = Create[float64](ctx, rt, "b", dims, Chunk(-1, 4))
	}
	require.NoError(t, err)
	ma, mb := newModel[float64](dims), newModel[float64](dims)
	// rank 0 puts the contents, the others wait at the collectives' syncs
	for i := range ma.data {
		ma.data[i] = float64(i + 1)
		mb.data[i] = float64(2*i - 5)
	}
	if me == 0 {
		require.NoError(t, a.Put(ctx, []int{0, 0}, []int{6, 5}, ma.data, nil))
		require.NoError(t, b.Put(ctx, []int{0, 0}, []int{6, 5}, mb.data, nil))
	}
	require.NoError(t, Sync(ctx, rt))

	dot, err := a.Dot(ctx, b)
	require.NoError(t, err)
	var want float64
	for i := range ma.data {
		want += ma.data[i] * mb.data[i]
	}
	require.Equal(t, want, dot)
	self, err := a.Dot(ctx, a)
	require.NoError(t, err)
	want = 0
	for _, v := range ma.data {
		want += v * v
	}
	require.Equal(t, want, self)

	// c = 2a - 3b, with c distributed as a, then as b
	c, err := a.Duplicate(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, "c", c.Name())
	require.True(t, c.Dist().Equal(a.Dist()))
	require.Equal(t, make([]float64, 42), getAll(ctx, t, c), "Duplicate is zero-filled")
	require.NoError(t, Add(ctx, 2, a, -3, b, c))
	wantC := make([]float64, len(ma.data))
	for i := range wantC {
		wantC[i] = 2*ma.data[i] - 3*mb.data[i]
	}
	require.Equal(t, wantC, getAll(ctx, t, c))
	require.NoError(t, Add(ctx, 1, a, 1, a, b)) // b = 2a, b distributed differently from a
	for i := range mb.data {
		mb.data[i] = 2 * ma.data[i]
	}
	require.Equal(t, mb.data, getAll(ctx, t, b))
	require.NoError(t, Add(ctx, 1, c, 0.5, b, c)) // c aliases a source
	for i := range wantC {
		wantC[i] += ma.data[i]
	}
	require.Equal(t, wantC, getAll(ctx, t, c))

	require.NoError(t, a.Scale(ctx, -2))
	for i := range ma.data {
		ma.data[i] *= -2
	}
	require.Equal(t, ma.data, getAll(ctx, t, a))

	require.NoError(t, a.Copy(ctx, b)) // between distributions
	require.Equal(t, ma.data, getAll(ctx, t, b))
	require.NoError(t, c.Copy(ctx, a)) // same distribution
	require.Equal(t, wantC, getAll(ctx, t, a))

	require.NoError(t, b.Fill(ctx, 1.5))
	for _, v := range getAll(ctx, t, b) {
		require.Equal(t, 1.5, v)
	}
	require.NoError(t, b.Zero(ctx))
	require.Equal(t, make([]float64, 42), getAll(ctx, t, b))

	// integer and complex element-wise collectives
	ci, err := Create[int32](ctx, rt, "i", []int{10})
	require.NoError(t, err)
	require.NoError(t, ci.Fill(ctx, 3))
	require.NoError(t, ci.Scale(ctx, 2))
	idot, err := ci.Dot(ctx, ci)
	require.NoError(t, err)
	require.Equal(t, int32(360), idot)
	cz, err := Create[complex128](ctx, rt, "z", []int{2, 3})
	require.NoError(t, err)
	require.NoError(t, cz.Fill(ctx, 1i))
	zdot, err := cz.Dot(ctx, cz)
	require.NoError(t, err)
	require.Equal(t, complex128(-6), zdot, "GA_Zdot does not conjugate")

	for _, x := range []interface{ Destroy(context.Context) error }{a, b, c, ci, cz} {
		require.NoError(t, x.Destroy(ctx))
	}
}

func TestLocality(t *testing.T) {
	rmatest.Run(t, 4, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me := rt.Rank()
		a, err := Create[int32](ctx, rt, "loc", []int{5, 4})
		require.NoError(t, err)
		require.Equal(t, 2, a.NDim())
		require.Equal(t, []int{5, 4}, a.Dims())
		require.Equal(t, "loc", a.Name())
		lo, hi := a.Distribution(me)
		wantLo := [][]int{{0, 0}, {0, 2}, {3, 0}, {3, 2}}[me]
		wantHi := [][]int{{2, 1}, {2, 3}, {4, 1}, {4, 3}}[me]
		require.Equal(t, wantLo, lo)
		require.Equal(t, wantHi, hi)
		r, err := a.Locate([]int{4, 3})
		require.NoError(t, err)
		require.Equal(t, 3, r)
		blocks, err := a.LocateRegion([]int{2, 1}, []int{3, 2})
		require.NoError(t, err)
		require.Equal(t, []Block{
			{Rank: 0, Lo: []int{2, 1}, Hi: []int{2, 1}},
			{Rank: 1, Lo: []int{2, 2}, Hi: []int{2, 2}},
			{Rank: 2, Lo: []int{3, 1}, Hi: []int{3, 1}},
			{Rank: 3, Lo: []int{3, 2}, Hi: []int{3, 2}},
		}, blocks)

		// write my block through Access, read it back globally
		data, ld, err := a.Access()
		require.NoError(t, err)
		require.Equal(t, []int{2}, ld)
		for i := 0; i <= hi[0]-lo[0]; i++ {
			for j := 0; j <= hi[1]-lo[1]; j++ {
				data[i*ld[0]+j] = int32(10*(lo[0]+i) + lo[1] + j)
			}
		}
		a.Release()
		require.NoError(t, a.Sync(ctx))
		all := getAll(ctx, t, a)
		for i := 0; i < 5; i++ {
			for j := 0; j < 4; j++ {
				require.Equal(t, int32(10*i+j), all[4*i+j])
			}
		}
		require.NoError(t, a.Destroy(ctx))

		// a rank that owns nothing
		e, err := Create[float64](ctx, rt, "empty", []int{2})
		require.NoError(t, err)
		lo, hi = e.Distribution(3)
		require.Equal(t, []int{0}, lo)
		require.Equal(t, []int{-1}, hi)
		data2, _, err := e.Access()
		require.NoError(t, err)
		if me >= 2 {
			require.Empty(t, data2)
		} else {
			require.Len(t, data2, 1)
		}
		e.Release()
		require.NoError(t, e.Fill(ctx, 4))
		d, err := e.Dot(ctx, e)
		require.NoError(t, err)
		require.Equal(t, 32.0, d)
		require.NoError(t, e.Destroy(ctx))
	})
}

func TestGopBrdcst(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me, np := rt.Rank(), rt.Size()
		tri := float64(np * (np - 1) / 2)
		f := []float64{float64(me), -float64(me), 1}
		require.NoError(t, GopSum(ctx, rt, f))
		require.Equal(t, []float64{tri, -tri, float64(np)}, f)
		i := []int32{int32(me), int32(10 - me)}
		require.NoError(t, GopMax(ctx, rt, i))
		require.Equal(t, []int32{int32(np - 1), 10}, i)
		l := []int64{int64(me) - 5}
		require.NoError(t, GopMin(ctx, rt, l))
		require.Equal(t, []int64{-5}, l)
		z := []complex128{complex(1, float64(me))}
		require.NoError(t, GopSum(ctx, rt, z))
		require.Equal(t, []complex128{complex(float64(np), tri)}, z)
		require.ErrorIs(t, GopMax(ctx, rt, z), ErrType)
		b := []float32{float32(me), float32(me)}
		root := np - 1
		require.NoError(t, Brdcst(ctx, rt, root, b))
		require.Equal(t, []float32{float32(root), float32(root)}, b)
	})
}

// TestBadInput checks that every bad request fails with the right error and changes nothing.
func TestBadInput(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		a, err := Create[float64](ctx, rt, "bad", []int{4, 5})
		require.NoError(t, err)
		init := make([]float64, 20)
		for i := range init {
			init[i] = float64(i)
		}
		if rt.Rank() == 0 {
			require.NoError(t, a.Put(ctx, []int{0, 0}, []int{3, 4}, init, nil))
		}
		require.NoError(t, a.Sync(ctx))
		big := make([]float64, 100)
		for i := range big {
			big[i] = 99
		}
		cases := []struct {
			name   string
			lo, hi []int
			buf    []float64
			ld     []int
			want   error
		}{
			{"lo > hi", []int{2, 0}, []int{1, 4}, big, nil, ErrOutOfBounds},
			{"hi past the end", []int{0, 0}, []int{3, 5}, big, nil, ErrOutOfBounds},
			{"negative lo", []int{-1, 0}, []int{1, 1}, big, nil, ErrOutOfBounds},
			{"too few bounds", []int{0}, []int{1}, big, nil, ErrShape},
			{"too many bounds", []int{0, 0, 0}, []int{1, 1, 1}, big, nil, ErrShape},
			{"buffer too small", []int{0, 0}, []int{3, 4}, big[:19], nil, ErrShape},
			{"buffer too small for ld", []int{0, 0}, []int{3, 4}, big[:28], []int{8}, ErrShape},
			{"ld below the patch", []int{0, 0}, []int{3, 4}, big, []int{4}, ErrShape},
			{"ld wrong length", []int{0, 0}, []int{3, 4}, big, []int{5, 5}, ErrShape},
		}
		for _, c := range cases {
			require.ErrorIs(t, a.Put(ctx, c.lo, c.hi, c.buf, c.ld), c.want, "Put: %s", c.name)
			require.ErrorIs(t, a.Acc(ctx, c.lo, c.hi, c.buf, c.ld, 1), c.want, "Acc: %s", c.name)
			_, err := a.NbPut(ctx, c.lo, c.hi, c.buf, c.ld)
			require.ErrorIs(t, err, c.want, "NbPut: %s", c.name)
			_, err = a.NbAcc(ctx, c.lo, c.hi, c.buf, c.ld, 1)
			require.ErrorIs(t, err, c.want, "NbAcc: %s", c.name)
			got := slices.Clone(c.buf)
			require.ErrorIs(t, a.Get(ctx, c.lo, c.hi, got, c.ld), c.want, "Get: %s", c.name)
			require.Equal(t, c.buf, got, "Get %s left the buffer alone", c.name)
		}
		_, err = a.ReadInc(ctx, []int{0, 0}, 1)
		require.ErrorIs(t, err, ErrType)
		_, err = a.Locate([]int{4, 0})
		require.ErrorIs(t, err, ErrOutOfBounds)
		_, err = a.LocateRegion([]int{0, 3}, []int{0, 2})
		require.ErrorIs(t, err, ErrOutOfBounds)
		require.NoError(t, a.Sync(ctx))
		require.Equal(t, init, getAll(ctx, t, a), "nothing changed")

		ia, err := Create[int64](ctx, rt, "ibad", []int{3})
		require.NoError(t, err)
		_, err = ia.ReadInc(ctx, []int{3}, 1)
		require.ErrorIs(t, err, ErrOutOfBounds)
		_, err = ia.ReadInc(ctx, []int{0, 0}, 1)
		require.ErrorIs(t, err, ErrShape)
		require.NoError(t, ia.Sync(ctx))
		require.Equal(t, []int64{0, 0, 0}, getAll(ctx, t, ia))

		// collectives on mismatched shapes
		other, err := Create[float64](ctx, rt, "other", []int{5, 4})
		require.NoError(t, err)
		require.ErrorIs(t, a.Copy(ctx, other), ErrShape)
		_, err = a.Dot(ctx, other)
		require.ErrorIs(t, err, ErrShape)
		require.ErrorIs(t, Add(ctx, 1, a, 1, a, other), ErrShape)
		require.Equal(t, init, getAll(ctx, t, a))

		// bad creates: same on every rank (local error), or different (ErrMismatch)
		_, err = Create[float64](ctx, rt, "x", []int{0, 3})
		require.ErrorIs(t, err, ErrShape)
		_, err = Create[float64](ctx, rt, "x", nil)
		require.ErrorIs(t, err, ErrShape)
		moreBlocksThanRanks := make([]int, rt.Size()+1) // block starts 0, 1, ..., np
		for i := range moreBlocksThanRanks {
			moreBlocksThanRanks[i] = i
		}
		_, err = Create[float64](ctx, rt, "x", []int{16}, Irregular([][]int{moreBlocksThanRanks}))
		require.ErrorIs(t, err, ErrMap)
		_, err = Create[float64](ctx, rt, "x", []int{4}, Chunk(2), Irregular([][]int{{0}}))
		require.ErrorIs(t, err, ErrMap)
		_, err = Create[float64](ctx, rt, "x", []int{4, 4}, Chunk(2))
		require.ErrorIs(t, err, ErrShape)
		if rt.Size() > 1 {
			_, err = Create[float64](ctx, rt, "x", []int{4 + rt.Rank()})
			require.ErrorIs(t, err, ErrMismatch)
		}

		// use after destroy
		require.NoError(t, other.Destroy(ctx))
		require.ErrorIs(t, other.Destroy(ctx), ErrDestroyed)
		require.ErrorIs(t, other.Put(ctx, []int{0, 0}, []int{0, 0}, big, nil), ErrDestroyed)
		require.ErrorIs(t, other.Get(ctx, []int{0, 0}, []int{0, 0}, big, nil), ErrDestroyed)
		_, _, err = other.Access()
		require.ErrorIs(t, err, ErrDestroyed)
		require.ErrorIs(t, other.Fill(ctx, 1), ErrDestroyed)
		require.ErrorIs(t, a.Copy(ctx, other), ErrDestroyed)
		_, err = other.Duplicate(ctx, "dup")
		require.ErrorIs(t, err, ErrDestroyed)
		require.NoError(t, ia.Destroy(ctx))
		require.NoError(t, a.Destroy(ctx))
	})
}

// TestOverNetwork runs patch round trips, ReadInc and the collectives over the network
// transport (RC over TCP) and over a mix: two pretend nodes of shared-memory ranks.
func TestOverNetwork(t *testing.T) {
	body := func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		roundTrip[float64](ctx, t, rt, []int{7, 5})
		roundTrip[complex64](ctx, t, rt, []int{4, 3, 5})
		readInc[int64](ctx, t, rt)
		collectives(ctx, t, rt)
	}
	t.Run("tcp", func(t *testing.T) {
		rmatest.Run(t, 3, body, rmatest.Transport(rma.TransportTCP))
	})
	t.Run("two nodes", func(t *testing.T) {
		rmatest.Run(t, 4, body, rmatest.Transport(rma.TransportAuto),
			rmatest.Hosts(func(rank int) string { return fmt.Sprintf("node%d", rank/2) }))
	})
}

// AllGather gathers rank p's p+1 elements (element offsets) into every rank's buffer.
func TestAllGather(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me, np := rt.Rank(), rt.Size()
		offs := make([]int, np+1)
		for p := range np {
			offs[p+1] = offs[p] + p + 1
		}
		buf := make([]float64, offs[np])
		for i := offs[me]; i < offs[me+1]; i++ {
			buf[i] = float64(100*me + i)
		}
		require.NoError(t, AllGather(ctx, rt, buf, offs))
		for p := range np {
			for i := offs[p]; i < offs[p+1]; i++ {
				require.Equal(t, float64(100*p+i), buf[i])
			}
		}
		offs[np]++ // past the buffer's end
		require.ErrorIs(t, AllGather(ctx, rt, buf, offs), rma.ErrOutOfRange)
	})
}
