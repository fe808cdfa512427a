package dist

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkStorage checks a distribution element by element: Locate agrees with the owner of
// LocateBlock's block, Offset with BlockStorage, every rank's offsets are distinct and fill
// [0, LocalElems) exactly, and a cursor over the whole array visits every block once with its
// owner, storage box and base.
func checkStorage(t *testing.T, d *Dist) {
	t.Helper()
	n := d.NDim()
	used := map[[2]int]bool{}
	sub := make([]int, n)
	dims := d.Dims()
	for {
		r, err := d.Locate(sub)
		require.NoError(t, err)
		k, err := d.LocateBlock(sub)
		require.NoError(t, err)
		require.Equal(t, r, d.BlockOwner(k), "owner of block %d", k)
		rr, e, err := d.Offset(sub)
		require.NoError(t, err)
		require.Equal(t, r, rr)
		lo, hi := d.BlockBounds(k)
		off, ld := d.BlockStorage(k)
		want, s := off, 1
		for x := n - 1; x >= 0; x-- {
			require.True(t, lo[x] <= sub[x] && sub[x] <= hi[x], "%v in block %d %v..%v", sub, k, lo, hi)
			want += (sub[x] - lo[x]) * s
			if x > 0 {
				s *= ld[x-1]
			}
		}
		require.Equal(t, want, e, "offset of %v", sub)
		require.Less(t, e, d.LocalElems(r))
		require.False(t, used[[2]int{r, e}], "%v: rank %d offset %d twice", sub, r, e)
		used[[2]int{r, e}] = true
		x := n - 1
		for ; x >= 0; x-- {
			if sub[x]++; sub[x] < dims[x] {
				break
			}
			sub[x] = 0
		}
		if x < 0 {
			break
		}
	}
	total := 0
	for r := 0; r < d.NProc(); r++ {
		total += d.LocalElems(r)
		for _, k := range d.OwnedBlocks(r) {
			require.Equal(t, r, d.BlockOwner(k))
		}
	}
	require.Equal(t, d.Elems(), total, "storage holds every element once")
	require.Equal(t, len(used), total)
	var c Cursor
	hi := make([]int, n)
	for x := range hi {
		hi[x] = dims[x] - 1
	}
	require.NoError(t, d.Region(make([]int, n), hi, &c))
	require.Equal(t, d.NBlocks(), c.Count())
	seen := 0
	for c.Next() {
		require.Equal(t, seen, c.Index)
		require.Equal(t, d.BlockOwner(c.Index), c.Rank)
		_, e, err := d.Offset(c.BlockLo())
		require.NoError(t, err)
		s, want := 1, c.Base
		for x := n - 1; x >= 0; x-- {
			want += (c.BlockLo()[x] - c.StoreLo()[x]) * s
			s *= c.StoreHi()[x] - c.StoreLo()[x] + 1
		}
		require.Equal(t, e, want, "block %d's storage box", c.Index)
		seen++
	}
}

func TestCyclicLayouts(t *testing.T) {
	mk := func(f func() (*Dist, error)) *Dist {
		d, err := f()
		require.NoError(t, err)
		return d
	}
	for i, d := range []*Dist{
		mk(func() (*Dist, error) { return BlockCyclic([]int{13}, 3, []int{2}) }),
		mk(func() (*Dist, error) { return BlockCyclic([]int{7, 5}, 4, []int{2, 3}) }),
		mk(func() (*Dist, error) { return BlockCyclic([]int{4, 3, 5}, 5, []int{3, 2, 2}) }),
		mk(func() (*Dist, error) { return BlockCyclic([]int{3, 2}, 2, []int{8, 9}) }),
		mk(func() (*Dist, error) { return BlockCyclicGrid([]int{7, 9}, 4, []int{2, 4}, []int{2, 2}) }),
		mk(func() (*Dist, error) { return BlockCyclicGrid([]int{5, 4, 6}, 6, []int{2, 3, 4}, []int{3, 1, 2}) }),
		mk(func() (*Dist, error) { return Tiled([]int{7, 9}, 4, []int{3, 2}, []int{1, 4}) }),
		mk(func() (*Dist, error) { return TiledIrregular([]int{6, 7}, 2, [][]int{{0, 1, 4}, {0, 3}}, []int{2, 1}) }),
		mk(func() (*Dist, error) {
			d, err := BlockCyclic([]int{9}, 2, []int{2})
			require.NoError(t, err)
			return Restrict(d, 4, []int{3, 1})
		}),
		mk(func() (*Dist, error) {
			d, err := Regular([]int{7, 5}, 3, nil)
			require.NoError(t, err)
			return Restrict(d, 5, []int{4, 0, 2})
		}),
	} {
		t.Run(fmt.Sprintf("%d %v", i, d.Layout()), func(t *testing.T) { checkStorage(t, d) })
	}
}

func TestCyclicByHand(t *testing.T) {
	// 1-d, blocks [0,1] [2,3] [4]: ranks 0 1 0; rank 0 stores block 0 then block 2
	d, err := BlockCyclic([]int{5}, 2, []int{2})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 2}, d.OwnedBlocks(0))
	assert.Equal(t, 3, d.LocalElems(0))
	r, e, err := d.Offset([]int{4})
	require.NoError(t, err)
	assert.Equal(t, [2]int{0, 2}, [2]int{r, e})
	assert.False(t, d.BlockInto(0, make([]int, 1), make([]int, 1)), "no one box per rank")
	// ScaLAPACK 5×5, blocks 2×2 over a 2×1 grid: rank 0 holds block rows 0 and 2 (rows 0,1,4)
	// as one 3×5 matrix; element (4, 3) is at local (2, 3)
	d, err = BlockCyclicGrid([]int{5, 5}, 2, []int{2, 2}, []int{2, 1})
	require.NoError(t, err)
	r, e, err = d.Offset([]int{4, 3})
	require.NoError(t, err)
	assert.Equal(t, [2]int{0, 2*5 + 3}, [2]int{r, e})
	off, ld := d.BlockStorage(7) // block (2, 1): rows 4, columns 2..3
	assert.Equal(t, [2]int{0, 2*5 + 2}, [2]int{d.BlockOwner(7), off})
	assert.Equal(t, []int{5}, ld)
	assert.Equal(t, []int{2, 1}, d.ProcessGrid())
	// restricted: the listed ranks own the blocks in list order
	d, err = Regular([]int{6}, 2, nil)
	require.NoError(t, err)
	d, err = Restrict(d, 3, []int{2, 0})
	require.NoError(t, err)
	lo, hi := d.Block(2)
	assert.Equal(t, [2][]int{{0}, {2}}, [2][]int{lo, hi})
	assert.False(t, d.Owns(1))
	assert.Equal(t, []int{2, 0}, d.Ranks())
}

func TestCyclicBadInput(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func() (*Dist, error)
		err  error
	}{
		{"zero block", func() (*Dist, error) { return BlockCyclic([]int{5, 4}, 2, []int{0, 2}) }, ErrMap},
		{"negative block", func() (*Dist, error) { return Tiled([]int{5, 4}, 2, []int{2, -1}, []int{2, 1}) }, ErrMap},
		{"block length", func() (*Dist, error) { return BlockCyclic([]int{5, 4}, 2, []int{2}) }, ErrShape},
		{"no ranks", func() (*Dist, error) { return BlockCyclic([]int{5}, 0, []int{2}) }, ErrMap},
		{"grid too small", func() (*Dist, error) { return BlockCyclicGrid([]int{5, 4}, 4, []int{2, 2}, []int{1, 2}) }, ErrMap},
		{"grid too large", func() (*Dist, error) { return Tiled([]int{5, 4}, 4, []int{2, 2}, []int{4, 2}) }, ErrMap},
		{"grid entry 0", func() (*Dist, error) { return Tiled([]int{5, 4}, 4, []int{2, 2}, []int{0, 4}) }, ErrMap},
		{"grid length", func() (*Dist, error) { return Tiled([]int{5, 4}, 4, []int{2, 2}, []int{4}) }, ErrMap},
		{"irregular map", func() (*Dist, error) { return TiledIrregular([]int{5, 4}, 2, [][]int{{0, 3, 3}, {0}}, []int{2, 1}) }, ErrMap},
		{"extent 0", func() (*Dist, error) { return BlockCyclic([]int{5, 0}, 2, []int{2, 2}) }, ErrShape},
	} {
		_, err := c.f()
		assert.ErrorIs(t, err, c.err, c.name)
	}
	d, err := Regular([]int{6}, 2, nil)
	require.NoError(t, err)
	for name, ranks := range map[string][]int{"duplicate": {1, 1}, "out of range": {0, 3}, "negative": {-1, 0}, "length": {0}} {
		_, err := Restrict(d, 3, ranks)
		assert.ErrorIs(t, err, ErrMap, name)
	}
	d, err = Restrict(d, 3, []int{0, 1})
	require.NoError(t, err)
	_, err = Restrict(d, 3, []int{0, 1})
	assert.ErrorIs(t, err, ErrMap, "twice")
}
