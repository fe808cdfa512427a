package globalarray

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// cyclicShapes are the block-cyclic, tiled and restricted distributions the tests run on np
// ranks: 1-, 2- and 3-dimensional, extents not divisible by the blocks, blocks larger than the
// array, process grids of np ranks, restricted lists out of order.
func cyclicShapes(np int) []shape {
	ranks := []int{0}
	if np > 1 {
		ranks = []int{np - 1, 0} // the list's order, not the ranks', numbers the blocks
	}
	return []shape{
		{"1d cyclic", []int{13}, []Option{BlockCyclic(3)}},
		{"2d cyclic", []int{7, 5}, []Option{BlockCyclic(2, 3)}},
		{"3d cyclic", []int{4, 3, 5}, []Option{BlockCyclic(3, 2, 2)}},
		{"block > dims", []int{5, 4}, []Option{BlockCyclic(8, 8)}},
		{"2d ScaLAPACK grid", []int{7, 9}, []Option{BlockCyclicGrid([]int{2, 4}, []int{np, 1})}},
		{"3d ScaLAPACK grid", []int{5, 4, 6}, []Option{BlockCyclicGrid([]int{2, 3, 4}, []int{1, 1, np})}},
		{"2d tiled", []int{7, 9}, []Option{Tiled([]int{3, 2}, []int{1, np})}},
		{"3d tiled", []int{5, 4, 6}, []Option{Tiled([]int{2, 3, 4}, []int{np, 1, 1})}},
		{"2d tiled irregular", []int{6, 7}, []Option{TiledIrregular([][]int{{0, 1, 4}, {0, 3}}, []int{np, 1})}},
		{"2d restricted", []int{7, 5}, []Option{Restricted(ranks...)}},
		{"1d restricted range", []int{11}, []Option{RestrictedRange(np/2, np-1)}},
		{"1d restricted cyclic", []int{9}, []Option{BlockCyclic(2), Restricted(ranks...)}},
	}
}

// nbRoundTrip checks NbPut, NbGet, NbAcc and PeriodicGet against a serial model: each rank in
// turn puts a random patch, every rank gets random patches, then every rank accumulates into
// one patch and reads a patch wrapping around the array's edges.
func nbRoundTrip[T Elem](ctx context.Context, t testing.TB, rt *rma.Runtime, dims []int, opts ...Option) {
	a, err := Create[T](ctx, rt, "nb", dims, opts...)
	require.NoError(t, err)
	me, np := rt.Rank(), rt.Size()
	m := newModel[T](dims)
	rng := rand.New(rand.NewPCG(uint64(len(dims)), 99)) // same draws on every rank
	next := 1
	for origin := 0; origin < np; origin++ {
		lo, hi, ld, bs, n := randPatch(rng, dims)
		buf := make([]T, n)
		each(lo, hi, m.stride, bs, func(mi, bi int) {
			buf[bi], m.data[mi] = val[T](next), val[T](next)
			next++
		})
		if me == origin {
			h, err := a.NbPut(ctx, lo, hi, buf, ld)
			require.NoError(t, err)
			require.NoError(t, h.Wait(ctx))
		}
		require.NoError(t, a.Sync(ctx))
	}
	lo, hi, ld, bs, n := randPatch(rng, dims)
	got := make([]T, n)
	h, err := a.NbGet(ctx, lo, hi, got, ld)
	require.NoError(t, err)
	require.NoError(t, h.Wait(ctx))
	each(lo, hi, m.stride, bs, func(mi, bi int) { require.Equal(t, m.data[mi], got[bi], "NbGet %v..%v", lo, hi) })
	require.NoError(t, a.Sync(ctx))
	lo, hi, ld, bs, n = randPatch(rng, dims)
	add := make([]T, n)
	each(lo, hi, m.stride, bs, func(mi, bi int) {
		add[bi] = val[T](bi%3 + 1)
		m.data[mi] += val[T](np) * add[bi]
	})
	h, err = a.NbAcc(ctx, lo, hi, add, ld, val[T](1))
	require.NoError(t, err)
	require.NoError(t, h.Wait(ctx))
	require.NoError(t, a.Sync(ctx))
	require.Equal(t, m.data, getAll(ctx, t, a), "after NbAcc")
	// a patch wrapping around every dimension (NGA_Periodic_get)
	plo, phi := make([]int, len(dims)), make([]int, len(dims))
	cnt := 1
	for d, e := range dims {
		plo[d], phi[d] = e-1, e+1
		cnt *= 3
	}
	pbuf := make([]T, cnt)
	require.NoError(t, a.PeriodicGet(ctx, plo, phi, pbuf, nil))
	eachIn(plo, phi, func(sub []int, k int) {
		mi := 0
		for d := range sub {
			mi += wrap(sub[d], dims[d]) * m.stride[d]
		}
		require.Equal(t, m.data[mi], pbuf[k], "PeriodicGet at %v", sub)
	})
	require.NoError(t, a.Destroy(ctx))
}

// halfOf reports whether the job of np ranks runs shape i of the heavier checks: all of them up
// to 2 ranks; at 4 ranks the even ones and at 5 the odd ones, so the 4- and 5-rank jobs of one
// transport cover every shape between them at half the cost (the CI budget).
func halfOf(np, i int) bool { return np <= 2 || i%2 == np%2 }

// TestCyclicPatches: Put, Get, Acc (random patches with padded leading dimensions) and their
// non-blocking forms on every block-cyclic, tiled and restricted shape, against a serial model.
func TestCyclicPatches(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		for i, s := range cyclicShapes(rt.Size()) {
			if halfOf(rt.Size(), i) {
				roundTrip[float64](ctx, t, rt, s.dims, s.opts...)
			}
			nbRoundTrip[int64](ctx, t, rt, s.dims, s.opts...)
		}
		s := cyclicShapes(rt.Size())[4]
		roundTrip[complex64](ctx, t, rt, s.dims, s.opts...)
	})
}

// TestCyclicGatherScatter: Gather, Scatter and ScatterAcc on the new distributions.
func TestCyclicGatherScatter(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		for _, s := range cyclicShapes(rt.Size()) {
			gatherScatter[float64](ctx, t, rt, s.dims, s.opts...)
		}
	})
}

// cyclicCollectives checks Fill, Zero, Scale, Copy (to and from a regular array and between two
// differently laid out arrays), Dot, the patch math, ReadInc and Print on one distribution.
func cyclicCollectives(ctx context.Context, t testing.TB, rt *rma.Runtime, s shape) {
	a, err := Create[int64](ctx, rt, "a", s.dims, s.opts...)
	require.NoError(t, err)
	reg, err := Create[int64](ctx, rt, "reg", s.dims)
	require.NoError(t, err)
	m := newModel[int64](s.dims)
	n := len(m.data)
	require.NoError(t, a.Fill(ctx, 3))
	require.Equal(t, slices.Repeat([]int64{3}, n), getAll(ctx, t, a), "Fill")
	require.NoError(t, a.Scale(ctx, -2))
	require.Equal(t, slices.Repeat([]int64{-6}, n), getAll(ctx, t, a), "Scale")
	require.NoError(t, a.Zero(ctx))
	require.Equal(t, make([]int64, n), getAll(ctx, t, a), "Zero")
	for i := range m.data {
		m.data[i] = int64(i + 1)
	}
	setAll(ctx, t, reg, m.data)
	require.NoError(t, reg.Copy(ctx, a))
	require.Equal(t, m.data, getAll(ctx, t, a), "Copy from a regular array")
	b, err := a.Duplicate(ctx, "b")
	require.NoError(t, err)
	require.NoError(t, a.Copy(ctx, b))
	require.Equal(t, m.data, getAll(ctx, t, b), "Copy to a duplicate")
	require.NoError(t, reg.Zero(ctx))
	require.NoError(t, a.Copy(ctx, reg))
	require.Equal(t, m.data, getAll(ctx, t, reg), "Copy to a regular array")
	var want int64
	for _, v := range m.data {
		want += v * v
	}
	for _, pair := range [][2]*Array[int64]{{a, b}, {a, reg}, {reg, a}} {
		got, err := pair[0].Dot(ctx, pair[1])
		require.NoError(t, err)
		require.Equal(t, want, got, "Dot %s·%s", pair[0].Name(), pair[1].Name())
	}
	// patch math over a patch crossing many blocks
	lo, hi := make([]int, len(s.dims)), make([]int, len(s.dims))
	for d, e := range s.dims {
		lo[d], hi[d] = e/3, e-1
	}
	require.NoError(t, a.ScalePatch(ctx, lo, hi, 10))
	require.NoError(t, b.FillPatch(ctx, lo, hi, 7))
	eachIn(lo, hi, func(sub []int, _ int) { m.data[rowMajor(s.dims, sub)] *= 10 })
	require.Equal(t, m.data, getAll(ctx, t, a), "ScalePatch")
	require.NoError(t, AddPatch(ctx, 1, a, lo, hi, 2, b, lo, hi, reg, lo, hi))
	regWant := slices.Clone(getAll(ctx, t, reg))
	wantDot := int64(0)
	eachIn(lo, hi, func(sub []int, _ int) {
		x := rowMajor(s.dims, sub)
		regWant[x] = m.data[x] + 14
		wantDot += m.data[x] * 7
	})
	require.Equal(t, regWant, getAll(ctx, t, reg), "AddPatch")
	dot, err := DotPatch(ctx, a, lo, hi, b, lo, hi)
	require.NoError(t, err)
	require.Equal(t, wantDot, dot, "DotPatch")
	require.NoError(t, CopyPatch(ctx, reg, lo, hi, a, lo, hi))
	require.Equal(t, regWant, getAll(ctx, t, a), "CopyPatch")
	require.NoError(t, a.ZeroPatch(ctx, lo, hi))
	eachIn(lo, hi, func(sub []int, _ int) { regWant[rowMajor(s.dims, sub)] = 0 })
	require.Equal(t, regWant, getAll(ctx, t, a), "ZeroPatch %s", s.name)
	require.NoError(t, a.Sync(ctx)) // every rank has read before anyone increments
	// ReadInc on the last element: every rank adds 1 three times
	last := make([]int, len(s.dims))
	for d, e := range s.dims {
		last[d] = e - 1
	}
	for range 3 {
		_, err := a.ReadInc(ctx, last, 1)
		require.NoError(t, err)
	}
	require.NoError(t, a.Sync(ctx))
	v, err := a.ReadInc(ctx, last, 0)
	require.NoError(t, err)
	require.Equal(t, int64(3*rt.Size()), v, "ReadInc %s", s.name)
	require.NoError(t, a.Sync(ctx)) // a ReadInc (of 0) writes: every rank's is done before anyone reads
	var out bytes.Buffer
	require.NoError(t, a.PrintPatch(ctx, &out, last, last))
	require.True(t, strings.HasSuffix(out.String(), fmt.Sprintf(": %d\n", 3*rt.Size())), out.String())
	require.NoError(t, a.Sync(ctx))
	for _, x := range []*Array[int64]{a, b, reg} {
		require.NoError(t, x.Destroy(ctx))
	}
}

// TestCyclicCollectives: the collectives, patch math, ReadInc and Print on the new
// distributions, and Gemm on a block-cyclic product against a serial product.
func TestCyclicCollectives(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		for i, s := range cyclicShapes(rt.Size()) {
			if halfOf(rt.Size(), i) {
				cyclicCollectives(ctx, t, rt, s)
			}
		}
		cyclicGemm(ctx, t, rt)
		cyclicMatrix(ctx, t, rt)
	})
}

// matrixRun is what cyclicMatrix observes of one layout.
type matrixRun struct {
	a, b, v  []float64
	n1, ninf float64
	best     float64
	bestAt   []int
}

// cyclicMatrix runs Transpose, the norms, AddDiagonal, GetDiagonal, AbsPatch, ElemPatch and
// SelectElem on block-cyclic, ScaLAPACK and tiled arrays and requires the same results as on
// regular arrays (which matrixOps, elemOps and selectElem check against serial models).
func cyclicMatrix(ctx context.Context, t testing.TB, rt *rma.Runtime) {
	const m, n = 5, 7
	np := rt.Size()
	var runs []matrixRun
	for i, opts := range [][]Option{nil, {BlockCyclic(2, 3)}, {BlockCyclicGrid([]int{3, 2}, []int{1, np})}, {Tiled([]int{2, 2}, []int{np, 1})}} {
		a, err := Create[float64](ctx, rt, "ma", []int{m, n}, opts...)
		require.NoError(t, err)
		b, err := Create[float64](ctx, rt, "mb", []int{n, m}, opts...)
		require.NoError(t, err)
		var vopts []Option // the vector: regular with the regular matrices, else block-cyclic
		if i > 0 {
			vopts = []Option{BlockCyclic(2)}
		}
		v, err := Create[float64](ctx, rt, "mv", []int{m}, vopts...)
		require.NoError(t, err)
		ma := make([]float64, m*n)
		for k := range ma {
			ma[k] = signed[float64](k)
		}
		setAll(ctx, t, a, ma)
		setAll(ctx, t, v, []float64{10, 20, 30, 40, 50})
		require.NoError(t, Transpose(ctx, a, b))
		var r matrixRun
		r.n1, err = Norm1(ctx, a)
		require.NoError(t, err)
		r.ninf, err = NormInfinity(ctx, a)
		require.NoError(t, err)
		require.NoError(t, AddDiagonal(ctx, b, v))
		require.NoError(t, GetDiagonal(ctx, a, v))
		require.NoError(t, a.AbsPatch(ctx, []int{1, 2}, []int{3, 5}))
		require.NoError(t, ElemPatch(ctx, ElemMultiply, a, []int{1, 2}, []int{3, 5}, b, []int{0, 0}, []int{2, 3}, a, []int{1, 2}, []int{3, 5}))
		r.best, r.bestAt, err = SelectElem(ctx, a, []int{0, 0}, []int{m - 1, n - 1}, true)
		require.NoError(t, err)
		r.a, r.b, r.v = getAll(ctx, t, a), getAll(ctx, t, b), getAll(ctx, t, v)
		runs = append(runs, r)
		require.NoError(t, a.Sync(ctx))
		for _, x := range []*Array[float64]{a, b, v} {
			require.NoError(t, x.Destroy(ctx))
		}
	}
	for i, r := range runs[1:] {
		require.Equal(t, runs[0], r, "layout %d", i+1)
	}
}

// cyclicGemm multiplies a block-cyclic A (7×5) by a tiled B (5×6) into a ScaLAPACK-laid-out
// C = A·B + 2·C, checked exactly against a serial product (small integers in float64).
func cyclicGemm(ctx context.Context, t testing.TB, rt *rma.Runtime) {
	const m, k, n = 7, 5, 6
	np := rt.Size()
	a, err := Create[float64](ctx, rt, "A", []int{m, k}, BlockCyclic(2, 3))
	require.NoError(t, err)
	b, err := Create[float64](ctx, rt, "B", []int{k, n}, Tiled([]int{3, 2}, []int{1, np}))
	require.NoError(t, err)
	c, err := Create[float64](ctx, rt, "C", []int{m, n}, BlockCyclicGrid([]int{3, 2}, []int{np, 1}))
	require.NoError(t, err)
	ma, mb, mc := make([]float64, m*k), make([]float64, k*n), make([]float64, m*n)
	for i := range ma {
		ma[i] = float64(i%7 - 3)
	}
	for i := range mb {
		mb[i] = float64(i%5 - 2)
	}
	for i := range mc {
		mc[i] = float64(i % 4)
	}
	setAll(ctx, t, a, ma)
	setAll(ctx, t, b, mb)
	setAll(ctx, t, c, mc)
	require.NoError(t, Gemm(ctx, false, false, 1, a, b, 2, c))
	want := make([]float64, m*n)
	for i := range m {
		for j := range n {
			want[i*n+j] = 2 * mc[i*n+j]
			for p := range k {
				want[i*n+j] += ma[i*k+p] * mb[p*n+j]
			}
		}
	}
	require.Equal(t, want, getAll(ctx, t, c), "Gemm on block-cyclic arrays")
	for _, x := range []*Array[float64]{a, b, c} {
		require.NoError(t, x.Destroy(ctx))
	}
}

// TestCyclicLocate: Locate, LocateBlock, LocateRegion, LocateNumBlocks, Distribution,
// OwnedBlocks, GetBlockInfo, TotalBlocks and UsesProcGrid agree with each other, and each rank
// writing f(index) into its blocks through AccessBlock (and AccessBlockSegment) is what Get
// then reads: the local layout is the one the transfers address.
func TestCyclicLocate(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		for _, s := range cyclicShapes(rt.Size()) {
			a, err := Create[int32](ctx, rt, "loc", s.dims, s.opts...)
			require.NoError(t, err)
			n, nd := 1, len(s.dims)
			for _, e := range s.dims {
				n *= e
			}
			numBlocks, blockDims := a.GetBlockInfo()
			total := 1
			for _, x := range numBlocks {
				total *= x
			}
			require.Equal(t, total, a.TotalBlocks(), s.name)
			require.Len(t, blockDims, nd)
			owned := 0
			for r := range rt.Size() {
				for _, k := range a.OwnedBlocks(r) {
					lo, hi := a.Distribution(k)
					if a.Dist().MultiBlock() {
						blk, err := a.LocateBlock(hi)
						require.NoError(t, err)
						require.Equal(t, k, blk, "%s: block %d", s.name, k)
					} else {
						lo, _ = a.Distribution(r)
					}
					owner, err := a.Locate(lo)
					require.NoError(t, err)
					require.Equal(t, r, owner, s.name)
					owned++
				}
			}
			require.Equal(t, total, owned, "%s: every block has one owner", s.name)
			hi := make([]int, nd)
			for d, e := range s.dims {
				hi[d] = e - 1
			}
			parts, err := a.LocateRegion(make([]int, nd), hi)
			require.NoError(t, err)
			count, err := a.LocateNumBlocks(make([]int, nd), hi)
			require.NoError(t, err)
			require.Equal(t, total, count)
			require.Len(t, parts, total)
			for k, p := range parts {
				blk, err := a.LocateBlock(p.Lo)
				require.NoError(t, err)
				require.Equal(t, k, blk, "%s: LocateRegion in block order", s.name)
				lo, bhi := a.Dist().BlockBounds(k)
				require.Equal(t, [2][]int{lo, bhi}, [2][]int{p.Lo, p.Hi})
			}
			// write f(index) = index+1 through local access, read it back globally
			if a.Dist().MultiBlock() {
				_, _, err = a.Access()
				require.ErrorIs(t, err, ErrUnsupportedDistribution, s.name)
			}
			for _, k := range a.OwnedBlocks(rt.Rank()) {
				data, ld, err := a.AccessBlock(k)
				require.NoError(t, err)
				lo, bhi := a.Dist().BlockBounds(k)
				st := make([]int, nd)
				st[nd-1] = 1
				for d := nd - 2; d >= 0; d-- {
					st[d] = st[d+1] * ld[d]
				}
				eachIn(lo, bhi, func(sub []int, _ int) {
					i := 0
					for d := range sub {
						i += (sub[d] - lo[d]) * st[d]
					}
					data[i] = int32(rowMajor(s.dims, sub) + 1)
				})
				a.Release()
			}
			seg, err := a.AccessBlockSegment()
			require.NoError(t, err)
			for _, v := range seg {
				require.Positive(t, v, "%s: every stored element belongs to a block", s.name)
			}
			a.Release()
			require.NoError(t, a.Sync(ctx))
			want := make([]int32, n)
			for i := range want {
				want[i] = int32(i + 1)
			}
			require.Equal(t, want, getAll(ctx, t, a), s.name)
			if others := a.OwnedBlocks((rt.Rank() + 1) % rt.Size()); rt.Size() > 1 && len(others) > 0 {
				_, _, err := a.AccessBlock(others[0])
				require.ErrorIs(t, err, ErrOutOfBounds, "%s: another rank's block", s.name)
			}
			require.NoError(t, a.Destroy(ctx))
		}
		cyclicOnGroup(ctx, t, rt)
	})
}

// cyclicOnGroup runs a block-cyclic, restricted array on each half of the ranks (OnGroup): the
// blocks go to group ranks, the puts, gets and scatter-accumulates reach the right members, and
// the two groups' arrays stay apart.
func cyclicOnGroup(ctx context.Context, t testing.TB, rt *rma.Runtime) {
	pg, err := PgroupSplit(ctx, rt, min(2, rt.Size()))
	require.NoError(t, err)
	gn, gme := pg.Nnodes(), pg.NodeID()
	ranks := []int{gn - 1} // the last member only, or the last two in reverse
	if gn > 1 {
		ranks = append(ranks, gn-2)
	}
	a, err := Create[int64](ctx, rt, "grp", []int{11}, OnGroup(pg), BlockCyclic(2), Restricted(ranks...))
	require.NoError(t, err)
	first, _ := pg.Absolute(0)
	want := make([]int64, 11)
	for i := range want {
		want[i] = int64(100*first + i)
		owner, err := a.Locate([]int{i})
		require.NoError(t, err)
		require.Equal(t, ranks[(i/2)%len(ranks)], owner, "element %d", i)
	}
	if gme == 0 {
		require.NoError(t, a.Put(ctx, []int{0}, []int{10}, want, nil))
	}
	require.NoError(t, a.Sync(ctx))
	require.Equal(t, want, getAll(ctx, t, a))
	require.NoError(t, a.Sync(ctx))
	ones := slices.Repeat([]int64{1}, 11)
	require.NoError(t, a.ScatterAcc(ctx, subsOf([]int{11}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), ones, 1))
	require.NoError(t, a.Sync(ctx))
	for i := range want {
		want[i] += int64(gn)
	}
	require.Equal(t, want, getAll(ctx, t, a))
	require.NoError(t, a.Destroy(ctx))
	require.NoError(t, pg.Destroy(ctx))
	require.NoError(t, Sync(ctx, rt))
}

// TestCyclicBadInput: bad distribution requests are refused at Create on every rank, an
// out-of-range patch on a block-cyclic array changes nothing, and the calls GA does not define
// on these distributions return ErrUnsupportedDistribution without touching the array.
func TestCyclicBadInput(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		np := rt.Size()
		for _, c := range []struct {
			name string
			opts []Option
			err  error
		}{
			{"zero block", []Option{BlockCyclic(0, 2)}, ErrMap},
			{"negative block", []Option{Tiled([]int{2, -3}, []int{np, 1})}, ErrMap},
			{"block length", []Option{BlockCyclic(2)}, ErrShape},
			{"grid not the ranks", []Option{BlockCyclicGrid([]int{2, 2}, []int{np + 1, 1})}, ErrMap},
			{"grid entry 0", []Option{Tiled([]int{2, 2}, []int{0, np})}, ErrMap},
			{"two layouts", []Option{BlockCyclic(2, 2), Tiled([]int{2, 2}, []int{np, 1})}, ErrMap},
			{"cyclic and chunk", []Option{BlockCyclic(2, 2), Chunk(2, 2)}, ErrMap},
			{"restricted duplicate", []Option{Restricted(0, 0)}, ErrMap},
			{"restricted out of range", []Option{Restricted(np)}, ErrMap},
			{"restricted negative", []Option{Restricted(-1)}, ErrMap},
			{"restricted empty", []Option{Restricted()}, ErrMap},
			{"restricted range", []Option{RestrictedRange(0, np)}, ErrMap},
			{"ghosts on cyclic", []Option{BlockCyclic(2, 2), Ghosts(1, 1)}, ErrUnsupportedDistribution},
			{"ghosts on restricted", []Option{Restricted(0), Ghosts(1, 1)}, ErrUnsupportedDistribution},
		} {
			_, err := Create[float64](ctx, rt, "bad", []int{6, 5}, c.opts...)
			require.ErrorIs(t, err, c.err, c.name)
		}
		a, err := Create[float64](ctx, rt, "cyc", []int{6, 5}, BlockCyclic(4, 2))
		require.NoError(t, err)
		want := make([]float64, 30)
		for i := range want {
			want[i] = float64(i)
		}
		setAll(ctx, t, a, want)
		buf := slices.Repeat([]float64{-1}, 30)
		for _, p := range [][2][]int{{{0, 0}, {6, 4}}, {{-1, 0}, {2, 2}}, {{3, 1}, {2, 2}}, {{0, 0}, {1, 5}}} {
			require.ErrorIs(t, a.Put(ctx, p[0], p[1], buf, nil), ErrOutOfBounds, "Put %v", p)
			require.ErrorIs(t, a.Acc(ctx, p[0], p[1], buf, nil, 1), ErrOutOfBounds, "Acc %v", p)
			_, err := a.NbPut(ctx, p[0], p[1], buf, nil)
			require.ErrorIs(t, err, ErrOutOfBounds, "NbPut %v", p)
			require.ErrorIs(t, a.FillPatch(ctx, p[0], p[1], 9), ErrOutOfBounds, "FillPatch %v", p)
			require.ErrorIs(t, a.Get(ctx, p[0], p[1], buf, nil), ErrOutOfBounds, "Get %v", p)
		}
		require.ErrorIs(t, a.Scatter(ctx, [][]int{{1, 1}, {6, 0}}, []float64{5, 5}), ErrOutOfBounds)
		require.Equal(t, slices.Repeat([]float64{-1}, 30), buf, "a refused Get wrote nothing")
		require.ErrorIs(t, Symmetrize(ctx, a), ErrShape, "not square")
		sq, err := Create[float64](ctx, rt, "sq", []int{5, 5}, BlockCyclic(2, 2))
		require.NoError(t, err)
		require.ErrorIs(t, Symmetrize(ctx, sq), ErrUnsupportedDistribution)
		_, _, err = a.AccessBlock(a.TotalBlocks())
		require.ErrorIs(t, err, ErrOutOfBounds, "no such block")
		_, _, err = a.AccessBlockGrid([]int{0})
		require.ErrorIs(t, err, ErrShape)
		_, err = a.LocateBlock([]int{6, 0})
		require.ErrorIs(t, err, ErrOutOfBounds)
		require.NoError(t, a.Sync(ctx))
		require.Equal(t, want, getAll(ctx, t, a), "nothing changed")
		require.NoError(t, sq.Destroy(ctx))
		require.NoError(t, a.Destroy(ctx))
	})
}
