package globalarray

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// descending returns the ranks p of [0, np) with p%mod == rem, highest first: member lists whose
// group ranks differ from the ranks, so a mix-up of the two shows.
func descending(np, mod, rem int) []int {
	var out []int
	for p := np - 1; p >= 0; p-- {
		if p%mod == rem {
			out = append(out, p)
		}
	}
	return out
}

// TestPgroupCreate: GA_Pgroup_create, _nodeid, _nnodes, _absolute_id on members and
// non-members; bad member lists fail on every rank with rma.ErrBadGroup; the world group.
func TestPgroupCreate(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		np, me := rt.Size(), rt.Rank()
		w := World(rt)
		require.Equal(t, me, w.NodeID())
		require.Equal(t, np, w.Nnodes())
		require.Len(t, w.Members(), np)
		abs, err := w.Absolute(np - 1)
		require.NoError(t, err)
		require.Equal(t, np-1, abs)
		_, err = w.Absolute(np)
		require.ErrorIs(t, err, rma.ErrBadRank)
		require.ErrorIs(t, w.Destroy(ctx), ErrShape)

		for _, members := range [][]int{descending(np, 2, 0), descending(np, 1, 0), {np - 1}} {
			pg, err := PgroupCreate(ctx, rt, members)
			require.NoError(t, err)
			require.Same(t, rt, pg.Runtime())
			require.Equal(t, len(members), pg.Nnodes())
			require.Equal(t, slices.Index(members, me), pg.NodeID())
			require.Equal(t, members, pg.Members())
			for k, p := range members {
				abs, err := pg.Absolute(k)
				require.NoError(t, err)
				require.Equal(t, p, abs)
			}
			_, err = pg.Absolute(len(members))
			require.ErrorIs(t, err, rma.ErrBadRank)
			if pg.NodeID() >= 0 {
				require.NoError(t, pg.Destroy(ctx))
			} else {
				require.ErrorIs(t, pg.Destroy(ctx), ErrNotMember)
			}
		}
		for _, bad := range [][]int{nil, {0, 0}, {np}, {-1}} {
			pg, err := PgroupCreate(ctx, rt, bad)
			require.ErrorIs(t, err, rma.ErrBadGroup, "members %v", bad)
			require.Nil(t, pg)
		}
		if np > 1 { // different lists on different ranks
			list := []int{0, 1}
			if me == np-1 {
				list = []int{1, 0}
			}
			_, err := PgroupCreate(ctx, rt, list)
			require.ErrorIs(t, err, rma.ErrBadGroup)
		}
		require.NoError(t, Sync(ctx, rt))
	})
}

// TestPgroupSplit: GA_Pgroup_split into n groups of consecutive ranks for every n from 1 to the
// number of ranks: each rank's group holds the expected ranks, sizes differ by at most one, and a
// reduction over it sums exactly its ranks; a bad n fails on every rank with ErrShape, different
// n with ErrMismatch, creating nothing.
func TestPgroupSplit(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		np, me := rt.Size(), rt.Rank()
		for n := 1; n <= np; n++ {
			pg, err := PgroupSplit(ctx, rt, n)
			require.NoError(t, err)
			i := me * n / np // my group, if groups are [i·np/n, (i+1)·np/n)
			for !(i*np/n <= me && me < (i+1)*np/n) {
				i++
			}
			var want []int
			for p := i * np / n; p < (i+1)*np/n; p++ {
				want = append(want, p)
			}
			require.Equal(t, want, pg.Members(), "n=%d", n)
			require.Equal(t, me-want[0], pg.NodeID())
			require.True(t, np/n <= pg.Nnodes() && pg.Nnodes() <= (np+n-1)/n)
			v := []int64{int64(me), 1}
			require.NoError(t, PgroupGop(ctx, pg, rma.ReduceSum, v))
			var sum int64
			for _, p := range want {
				sum += int64(p)
			}
			require.Equal(t, []int64{sum, int64(len(want))}, v)
			require.NoError(t, pg.Destroy(ctx))
		}
		for _, n := range []int{0, np + 1, -1} {
			pg, err := PgroupSplit(ctx, rt, n)
			require.ErrorIs(t, err, ErrShape, "n=%d", n)
			require.Nil(t, pg)
		}
		if np > 1 {
			n := 1
			if me == 0 {
				n = 2
			}
			_, err := PgroupSplit(ctx, rt, n)
			require.ErrorIs(t, err, ErrMismatch)
		}
		require.NoError(t, Sync(ctx, rt))
	})
}

// TestPgroupSyncGopBrdcst: GA_Pgroup_sync orders a member's writes before the other members'
// reads, GA_Pgroup_dgop and GA_Pgroup_brdcst give the members' values, while the other group runs
// its own; a non-member's calls fail with ErrNotMember and leave its buffers alone.
func TestPgroupSyncGopBrdcst(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		np, me := rt.Size(), rt.Rank()
		w, err := Create[int64](ctx, rt, "w", []int{np})
		require.NoError(t, err)
		only0, err := PgroupCreate(ctx, rt, []int{0})
		require.NoError(t, err)
		pgs := make([]*Pgroup, 2)
		for c := range pgs {
			if members := descending(np, 2, c); len(members) > 0 {
				if pgs[c], err = PgroupCreate(ctx, rt, members); err != nil {
					require.NoError(t, err)
				}
			}
		}
		pg := pgs[me%2]
		k, n := pg.NodeID(), pg.Nnodes()
		members := pg.Members()
		// sync: every member writes its word of the world array, reads its successor's after
		for round := 1; round <= 3+2*(me%2); round++ {
			require.NoError(t, w.Put(ctx, []int{me}, []int{me}, []int64{int64(100*round + me)}, nil))
			require.NoError(t, pg.Sync(ctx))
			next := members[(k+1)%n]
			got := []int64{0}
			require.NoError(t, w.Get(ctx, []int{next}, []int{next}, got, nil))
			require.Equal(t, int64(100*round+next), got[0], "round %d", round)
			require.NoError(t, pg.Sync(ctx))
		}
		// gop of every kind of element
		f := []float64{float64(me), -float64(me), float64(me)}
		require.NoError(t, PgroupGop(ctx, pg, rma.ReduceMax, f[:1]))
		require.NoError(t, PgroupGop(ctx, pg, rma.ReduceAbsMax, f[1:2]))
		require.NoError(t, PgroupGop(ctx, pg, rma.ReduceMin, f[2:]))
		require.Equal(t, []float64{float64(slices.Max(members)), float64(slices.Max(members)), float64(slices.Min(members))}, f)
		z := []complex128{complex(float64(me), 1)}
		require.NoError(t, PgroupGop(ctx, pg, rma.ReduceSum, z))
		var zs complex128
		for _, p := range members {
			zs += complex(float64(p), 1)
		}
		require.Equal(t, zs, z[0])
		require.ErrorIs(t, PgroupGop(ctx, pg, rma.ReduceMax, z), ErrType)
		require.Equal(t, zs, z[0])
		i32 := []int32{int32(me + 1)}
		require.NoError(t, PgroupGop(ctx, pg, rma.ReduceProd, i32))
		prod := int32(1)
		for _, p := range members {
			prod *= int32(p + 1)
		}
		require.Equal(t, prod, i32[0])
		// broadcast from each group rank in turn
		for root := 0; root < n; root++ {
			b := []int64{int64(me), int64(k)}
			require.NoError(t, PgroupBrdcst(ctx, pg, root, b))
			require.Equal(t, []int64{int64(members[root]), int64(root)}, b)
		}
		b := []int64{7}
		require.ErrorIs(t, PgroupBrdcst(ctx, pg, n, b), rma.ErrBadRank)
		require.Equal(t, []int64{7}, b)
		// non-members of only0
		if me != 0 {
			v := []float64{1.5}
			require.ErrorIs(t, only0.Sync(ctx), ErrNotMember)
			require.ErrorIs(t, PgroupGop(ctx, only0, rma.ReduceSum, v), ErrNotMember)
			require.ErrorIs(t, PgroupBrdcst(ctx, only0, 0, v), ErrNotMember)
			require.Equal(t, []float64{1.5}, v)
			a, err := Create[float64](ctx, rt, "x", []int{4}, OnGroup(only0))
			require.ErrorIs(t, err, ErrNotMember)
			require.Nil(t, a)
		} else {
			require.NoError(t, only0.Sync(ctx))
			require.NoError(t, only0.Destroy(ctx))
		}
		require.NoError(t, pg.Destroy(ctx))
		require.NoError(t, w.Destroy(ctx))
	})
}

// groupArrays runs GA calls on arrays of the group pg while the other group runs its own, and
// checks every value: the blocks live on the group's members in group rank order (Access), patch
// transfers, ReadInc, gather/scatter, the collectives, ghost cells, gemm and a transpose.
func groupArrays(ctx context.Context, t testing.TB, rt *rma.Runtime, pg *Pgroup, world *Array[float64]) {
	k, n := pg.NodeID(), pg.Nnodes()
	base, _ := pg.Absolute(0) // values differ between groups
	on := OnGroup(pg)
	dims := []int{7, 5}
	a, err := Create[float64](ctx, rt, "a", dims, on)
	require.NoError(t, err)
	require.Same(t, pg, a.Pgroup())
	b, err := Create[float64](ctx, rt, "b", dims, on, Chunk(-1, 2))
	require.NoError(t, err)
	want := make([]float64, 35)
	for i := range want {
		want[i] = float64(1000*base + i)
	}
	setAll(ctx, t, a, want)
	require.Equal(t, want, getAll(ctx, t, a))
	// my block is group rank k's block of the distribution, held here
	lo, hi := a.Distribution(k)
	loc, ld, err := a.Access()
	require.NoError(t, err)
	if len(loc) > 0 {
		for i := lo[0]; i <= hi[0]; i++ {
			for j := lo[1]; j <= hi[1]; j++ {
				require.Equal(t, want[i*5+j], loc[(i-lo[0])*ld[0]+j-lo[1]], "element (%d,%d) of my block", i, j)
			}
		}
	}
	a.Release()
	owner, err := a.Locate([]int{6, 4})
	require.NoError(t, err)
	require.Less(t, owner, n)
	// accumulate from every member, once every member has read
	require.NoError(t, a.Sync(ctx))
	require.NoError(t, a.Acc(ctx, []int{0, 0}, []int{6, 4}, slices.Repeat([]float64{1}, 35), nil, 2))
	require.NoError(t, a.Sync(ctx))
	for i := range want {
		want[i] += float64(2 * n)
	}
	require.Equal(t, want, getAll(ctx, t, a))
	// gather / scatter: member k scatters the elements x with x%n == k
	var subs [][]int
	var vals []float64
	for x := k; x < 35; x += n {
		subs = append(subs, []int{x / 5, x % 5})
		vals = append(vals, float64(-x))
	}
	require.NoError(t, b.Scatter(ctx, subs, vals))
	require.NoError(t, b.Sync(ctx))
	all := [][]int{}
	for x := 0; x < 35; x++ {
		all = append(all, []int{x / 5, x % 5})
	}
	got := make([]float64, 35)
	require.NoError(t, b.Gather(ctx, all, got))
	for x := range got {
		require.Equal(t, float64(-x), got[x])
	}
	// collectives
	dot, err := a.Dot(ctx, b)
	require.NoError(t, err)
	var wdot float64
	for x := range want {
		wdot += want[x] * float64(-x)
	}
	require.Equal(t, wdot, dot)
	require.NoError(t, Add(ctx, 1, a, 3, b, b))
	for x := range got {
		got[x] = want[x] - 3*float64(x)
	}
	require.Equal(t, got, getAll(ctx, t, b))
	require.NoError(t, b.Scale(ctx, 2))
	require.NoError(t, a.Copy(ctx, b))
	require.Equal(t, want, getAll(ctx, t, b))
	best, at, err := SelectElem(ctx, a, []int{0, 0}, []int{6, 4}, true)
	require.NoError(t, err)
	require.Equal(t, want[34], best)
	require.Equal(t, []int{6, 4}, at)
	require.NoError(t, b.Fill(ctx, float64(base)))
	require.Equal(t, slices.Repeat([]float64{float64(base)}, 35), getAll(ctx, t, b))
	// an array of another group (the world) is refused, nothing changes
	require.ErrorIs(t, a.Copy(ctx, world), ErrShape)
	_, err = a.Dot(ctx, world)
	require.ErrorIs(t, err, ErrShape)
	// ReadInc: every member takes 3 tickets of the last element (on the last group rank)
	c, err := Create[int64](ctx, rt, "c", []int{2 * n}, on)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		_, err := c.ReadInc(ctx, []int{2*n - 1}, 1)
		require.NoError(t, err)
	}
	require.NoError(t, c.Sync(ctx))
	v, err := c.ReadInc(ctx, []int{2*n - 1}, 0)
	require.NoError(t, err)
	require.Equal(t, int64(3*n), v)
	// transpose and gemm
	sq, err := Create[float64](ctx, rt, "sq", []int{5, 7}, on)
	require.NoError(t, err)
	require.NoError(t, Transpose(ctx, a, sq))
	tr := getAll(ctx, t, sq)
	for i := 0; i < 7; i++ {
		for j := 0; j < 5; j++ {
			require.Equal(t, want[i*5+j], tr[j*7+i])
		}
	}
	gemmCase[float64](ctx, t, rt, 9, 6, 11, false, true, 1e-12, on)
	gemmCase[complex128](ctx, t, rt, 5, 8, 3, true, false, 1e-12, on)
	// ghost cells, periodic across the edges
	ghostUpdate[float64](ctx, t, rt, []int{6, 5}, []int{1, 2}, on)
	for _, x := range []interface{ Destroy(context.Context) error }{a, b, c, sq} {
		require.NoError(t, x.Destroy(ctx))
	}
}

// TestGroupArrays: arrays created on groups (the world split in two, members in descending rank
// order so that group ranks and ranks differ) run at the same time in both groups with correct
// values in each; a non-member cannot create an array of a group.
func TestGroupArrays(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		np, me := rt.Size(), rt.Rank()
		world, err := Create[float64](ctx, rt, "world", []int{3, 3})
		require.NoError(t, err)
		require.NoError(t, world.Fill(ctx, 4))
		pgs := make([]*Pgroup, 2)
		for c := range pgs {
			if members := descending(np, 2, c); len(members) > 0 {
				pgs[c], err = PgroupCreate(ctx, rt, members)
				require.NoError(t, err)
			}
		}
		mine, other := pgs[me%2], pgs[(me+1)%2]
		if other != nil {
			a, err := Create[float64](ctx, rt, "theirs", []int{4}, OnGroup(other))
			require.ErrorIs(t, err, ErrNotMember)
			require.Nil(t, a)
		}
		groupArrays(ctx, t, rt, mine, world)
		require.NoError(t, mine.Destroy(ctx))
		require.NoError(t, world.Sync(ctx))
		require.Equal(t, slices.Repeat([]float64{4}, 9), getAll(ctx, t, world))
		require.NoError(t, world.Destroy(ctx))
	})
}

// TestPgroupSplitArrays: GA_Pgroup_split's groups each run an array of their own, with the
// same name and shape, at the same time.
func TestPgroupSplitArrays(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		pg, err := PgroupSplit(ctx, rt, min(2, rt.Size()))
		require.NoError(t, err)
		a, err := Create[int32](ctx, rt, "same", []int{11}, OnGroup(pg))
		require.NoError(t, err)
		first, _ := pg.Absolute(0)
		require.NoError(t, a.Fill(ctx, int32(first+1)))
		lo, hi := a.Distribution(pg.NodeID())
		if hi[0] >= lo[0] {
			buf := make([]int32, hi[0]-lo[0]+1)
			for i := range buf {
				buf[i] = int32(100*first + lo[0] + i)
			}
			require.NoError(t, a.Acc(ctx, lo, hi, buf, nil, 1))
		}
		require.NoError(t, a.Sync(ctx))
		got := make([]int32, 11)
		require.NoError(t, a.Get(ctx, []int{0}, []int{10}, got, nil))
		for i := range got {
			require.Equal(t, int32(first+1+100*first+i), got[i])
		}
		require.NoError(t, a.Destroy(ctx))
		require.NoError(t, pg.Destroy(ctx))
		require.NoError(t, Sync(ctx, rt))
	})
}
