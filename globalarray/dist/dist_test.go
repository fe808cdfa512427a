package dist

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcGrid(t *testing.T) {
	cases := []struct {
		name  string
		ext   []int
		nproc int
		want  []int
	}{
		{"1d", []int{100}, 4, []int{4}},
		{"square 4", []int{100, 100}, 4, []int{2, 2}},
		{"square 6", []int{6, 6}, 6, []int{3, 2}},
		{"tall", []int{1000, 10}, 4, []int{4, 1}},
		{"wide", []int{2, 1000}, 4, []int{1, 4}},
		{"one rank", []int{5, 7, 9}, 1, []int{1, 1, 1}},
		{"prime too big", []int{3, 3}, 7, []int{7, 1}},
		{"cube 8", []int{16, 16, 16}, 8, []int{2, 2, 2}},
		{"4d 16", []int{8, 8, 8, 8}, 16, []int{2, 2, 2, 2}},
		{"proportional 12", []int{300, 100}, 12, []int{6, 2}},
		{"longer blocks win", []int{10, 9}, 3, []int{3, 1}},
		{"smaller remainder wins a tie", []int{5, 3}, 4, []int{4, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := ProcGrid(c.ext, c.nproc)
			assert.Equal(t, c.want, g)
			p := 1
			for _, x := range g {
				p *= x
			}
			assert.Equal(t, c.nproc, p, "product of the grid is nproc")
		})
	}
}

func blocks(t *testing.T, d *Dist) [][2][]int {
	t.Helper()
	var out [][2][]int
	for r := 0; r < d.NProc(); r++ {
		lo, hi := d.Block(r)
		out = append(out, [2][]int{lo, hi})
	}
	return out
}

func TestRegularBlocks(t *testing.T) {
	cases := []struct {
		name  string
		dims  []int
		nproc int
		chunk []int
		want  [][2][]int
	}{
		{"1d even", []int{8}, 4, nil, [][2][]int{{{0}, {1}}, {{2}, {3}}, {{4}, {5}}, {{6}, {7}}}},
		{"1d uneven", []int{10}, 4, nil, [][2][]int{{{0}, {2}}, {{3}, {5}}, {{6}, {7}}, {{8}, {9}}}},
		{"1d fewer elements than ranks", []int{2}, 3, nil, [][2][]int{{{0}, {0}}, {{1}, {1}}, {{0}, {-1}}}},
		{"1d chunk", []int{10}, 4, []int{4}, [][2][]int{{{0}, {3}}, {{4}, {7}}, {{8}, {9}}, {{0}, {-1}}}},
		{"2d 2x2 uneven", []int{5, 4}, 4, nil, [][2][]int{
			{{0, 0}, {2, 1}}, {{0, 2}, {2, 3}}, {{3, 0}, {4, 1}}, {{3, 2}, {4, 3}}}},
		{"2d chunk rows whole", []int{6, 4}, 2, []int{-1, 4}, [][2][]int{{{0, 0}, {2, 3}}, {{3, 0}, {5, 3}}}},
		{"3d", []int{4, 2, 2}, 3, nil, [][2][]int{
			{{0, 0, 0}, {1, 1, 1}}, {{2, 0, 0}, {2, 1, 1}}, {{3, 0, 0}, {3, 1, 1}}}},
		{"4d", []int{2, 2, 2, 2}, 4, nil, [][2][]int{
			{{0, 0, 0, 0}, {0, 0, 1, 1}}, {{0, 1, 0, 0}, {0, 1, 1, 1}}, {{1, 0, 0, 0}, {1, 0, 1, 1}}, {{1, 1, 0, 0}, {1, 1, 1, 1}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Regular(c.dims, c.nproc, c.chunk)
			require.NoError(t, err)
			assert.Equal(t, c.want, blocks(t, d))
			checkTiling(t, d)
		})
	}
}

// checkTiling verifies that the blocks tile the array exactly once, that Locate agrees with the
// blocks and that Offset enumerates each block's elements row-major.
func checkTiling(t *testing.T, d *Dist) {
	t.Helper()
	dims := d.Dims()
	total := 0
	for r := 0; r < d.NProc(); r++ {
		total += d.BlockElems(r)
		if !d.Owns(r) {
			assert.Zero(t, d.BlockElems(r))
		}
	}
	require.Equal(t, d.Elems(), total)
	sub := make([]int, len(dims))
	for {
		r, off, err := d.Offset(sub)
		require.NoError(t, err)
		lo, hi := d.Block(r)
		for k := range sub {
			require.True(t, sub[k] >= lo[k] && sub[k] <= hi[k], "subscript %v in block %v..%v of rank %d", sub, lo, hi, r)
		}
		require.GreaterOrEqual(t, off, 0)
		require.Less(t, off, d.BlockElems(r))
		want, s := 0, 1
		for k := len(dims) - 1; k >= 0; k-- {
			want += (sub[k] - lo[k]) * s
			s *= hi[k] - lo[k] + 1
		}
		require.Equal(t, want, off, "row-major offset of %v in rank %d's block", sub, r)
		k := len(dims) - 1
		for ; k >= 0; k-- {
			sub[k]++
			if sub[k] < dims[k] {
				break
			}
			sub[k] = 0
		}
		if k < 0 {
			break
		}
	}
}

func TestIrregular(t *testing.T) {
	d, err := Irregular([]int{10, 7}, 6, [][]int{{0, 3, 4}, {0, 5}})
	require.NoError(t, err)
	assert.Equal(t, []int{3, 2}, d.Grid())
	assert.Equal(t, 6, d.NBlocks())
	want := [][2][]int{
		{{0, 0}, {2, 4}}, {{0, 5}, {2, 6}},
		{{3, 0}, {3, 4}}, {{3, 5}, {3, 6}},
		{{4, 0}, {9, 4}}, {{4, 5}, {9, 6}},
	}
	assert.Equal(t, want, blocks(t, d))
	checkTiling(t, d)
	assert.Equal(t, [][]int{{0, 3, 4}, {0, 5}}, d.Map())

	// fewer blocks than ranks: the rest own nothing
	d, err = Irregular([]int{5}, 4, [][]int{{0, 1}})
	require.NoError(t, err)
	lo, hi := d.Block(3)
	assert.Equal(t, []int{0}, lo)
	assert.Equal(t, []int{-1}, hi)
	assert.False(t, d.Owns(2))
	checkTiling(t, d)

	// a map round-trips into an equal distribution
	r, err := Regular([]int{9, 8, 3}, 4, nil)
	require.NoError(t, err)
	i, err := Irregular(r.Dims(), r.NProc(), r.Map())
	require.NoError(t, err)
	assert.True(t, r.Equal(i))
	other, err := Regular([]int{9, 8, 3}, 2, nil)
	require.NoError(t, err)
	assert.False(t, r.Equal(other))
}

func TestConstructorErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		mk   func() (*Dist, error)
	}{
		{"no dims", ErrShape, func() (*Dist, error) { return Regular(nil, 2, nil) }},
		{"too many dims", ErrShape, func() (*Dist, error) { return Regular([]int{1, 1, 1, 1, 1, 1, 1, 1}, 2, nil) }},
		{"zero extent", ErrShape, func() (*Dist, error) { return Regular([]int{3, 0}, 2, nil) }},
		{"negative extent", ErrShape, func() (*Dist, error) { return Regular([]int{-3}, 2, nil) }},
		{"overflow", ErrShape, func() (*Dist, error) { return Regular([]int{1 << 40, 1 << 40}, 2, nil) }},
		{"no ranks", ErrMap, func() (*Dist, error) { return Regular([]int{3}, 0, nil) }},
		{"chunk length", ErrShape, func() (*Dist, error) { return Regular([]int{3, 3}, 2, []int{1}) }},
		{"map dims", ErrShape, func() (*Dist, error) { return Irregular([]int{3, 3}, 2, [][]int{{0}}) }},
		{"map empty", ErrMap, func() (*Dist, error) { return Irregular([]int{3}, 2, [][]int{{}}) }},
		{"map not from 0", ErrMap, func() (*Dist, error) { return Irregular([]int{3}, 2, [][]int{{1}}) }},
		{"map not increasing", ErrMap, func() (*Dist, error) { return Irregular([]int{9}, 4, [][]int{{0, 4, 4}}) }},
		{"map past extent", ErrMap, func() (*Dist, error) { return Irregular([]int{3}, 4, [][]int{{0, 3}}) }},
		{"too many blocks", ErrMap, func() (*Dist, error) { return Irregular([]int{4, 4}, 3, [][]int{{0, 2}, {0, 2}}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := c.mk()
			assert.Nil(t, d)
			assert.True(t, errors.Is(err, c.err), "got %v, want %v", err, c.err)
		})
	}
}

func TestLocate(t *testing.T) {
	d, err := Regular([]int{5, 4}, 4, nil) // blocks as in TestRegularBlocks "2d 2x2 uneven"
	require.NoError(t, err)
	for _, c := range []struct {
		sub  []int
		rank int
	}{{[]int{0, 0}, 0}, {[]int{2, 1}, 0}, {[]int{2, 2}, 1}, {[]int{3, 0}, 2}, {[]int{4, 3}, 3}} {
		r, err := d.Locate(c.sub)
		require.NoError(t, err)
		assert.Equal(t, c.rank, r, "%v", c.sub)
	}
	_, err = d.Locate([]int{5, 0})
	assert.ErrorIs(t, err, ErrOutOfBounds)
	_, err = d.Locate([]int{0, -1})
	assert.ErrorIs(t, err, ErrOutOfBounds)
	_, err = d.Locate([]int{0})
	assert.ErrorIs(t, err, ErrShape)
	r, off, err := d.Offset([]int{4, 3})
	require.NoError(t, err)
	assert.Equal(t, 3, r)
	assert.Equal(t, 3, off) // block [3..4]x[2..3]: (4-3)*2 + (3-2)
	r, off, err = d.Offset([]int{1, 1})
	require.NoError(t, err)
	assert.Equal(t, 0, r)
	assert.Equal(t, 3, off) // block [0..2]x[0..1]: 1*2 + 1
}

func TestLocateRegion(t *testing.T) {
	d, err := Regular([]int{5, 4}, 4, nil)
	require.NoError(t, err)
	bs, err := d.LocateRegion([]int{1, 1}, []int{3, 2})
	require.NoError(t, err)
	want := []Block{
		{0, []int{1, 1}, []int{2, 1}},
		{1, []int{1, 2}, []int{2, 2}},
		{2, []int{3, 1}, []int{3, 1}},
		{3, []int{3, 2}, []int{3, 2}},
	}
	assert.Equal(t, want, bs)
	bs, err = d.LocateRegion([]int{4, 3}, []int{4, 3})
	require.NoError(t, err)
	assert.Equal(t, []Block{{3, []int{4, 3}, []int{4, 3}}}, bs)

	for _, c := range []struct {
		name   string
		lo, hi []int
		err    error
	}{
		{"lo > hi", []int{2, 0}, []int{1, 2}, ErrOutOfBounds},
		{"hi past end", []int{0, 0}, []int{5, 2}, ErrOutOfBounds},
		{"hi past end of last dim", []int{0, 0}, []int{1, 4}, ErrOutOfBounds},
		{"negative lo", []int{-1, 0}, []int{1, 2}, ErrOutOfBounds},
		{"short lo", []int{0}, []int{1, 2}, ErrShape},
		{"long hi", []int{0, 0}, []int{1, 2, 3}, ErrShape},
	} {
		_, err := d.LocateRegion(c.lo, c.hi)
		assert.ErrorIs(t, err, c.err, c.name)
	}
}

func TestLocateRegionIrregular3D(t *testing.T) {
	d, err := Irregular([]int{6, 4, 5}, 8, [][]int{{0, 1, 5}, {0}, {0, 2}})
	require.NoError(t, err)
	bs, err := d.LocateRegion([]int{0, 1, 1}, []int{5, 2, 3})
	require.NoError(t, err)
	want := []Block{
		{0, []int{0, 1, 1}, []int{0, 2, 1}},
		{1, []int{0, 1, 2}, []int{0, 2, 3}},
		{2, []int{1, 1, 1}, []int{4, 2, 1}},
		{3, []int{1, 1, 2}, []int{4, 2, 3}},
		{4, []int{5, 1, 1}, []int{5, 2, 1}},
		{5, []int{5, 1, 2}, []int{5, 2, 3}},
	}
	assert.Equal(t, want, bs)
	assert.False(t, d.Owns(6))
}

func TestBufStrides(t *testing.T) {
	var st [MaxDims]int
	span, err := BufStrides([]int{1, 2}, []int{3, 4}, []int{5}, 13, st[:])
	require.NoError(t, err)
	assert.Equal(t, []int{5, 1}, st[:2])
	assert.Equal(t, 13, span) // 2*5 + 2 + 1
	span, err = BufStrides([]int{0, 0, 0}, []int{1, 2, 3}, nil, 24, st[:])
	require.NoError(t, err)
	assert.Equal(t, []int{12, 4, 1}, st[:3])
	assert.Equal(t, 24, span)
	span, err = BufStrides([]int{4}, []int{9}, nil, 6, st[:])
	require.NoError(t, err)
	assert.Equal(t, 6, span)

	_, err = BufStrides([]int{1, 2}, []int{3, 4}, []int{5}, 12, st[:])
	assert.ErrorIs(t, err, ErrShape, "buffer one short")
	_, err = BufStrides([]int{1, 2}, []int{3, 4}, []int{2}, 100, st[:])
	assert.ErrorIs(t, err, ErrShape, "ld smaller than the patch")
	_, err = BufStrides([]int{1, 2}, []int{3, 4}, []int{5, 5}, 100, st[:])
	assert.ErrorIs(t, err, ErrShape, "ld too long")
	_, err = BufStrides([]int{0, 0}, []int{1, 1}, []int{1 << 62}, 100, st[:])
	assert.ErrorIs(t, err, ErrShape, "ld overflow")
}

func TestDescribeShapes(t *testing.T) {
	var st [MaxDims]int
	var s Strided
	// Whole rows of a 2-D block, packed buffer: one contiguous chunk.
	_, err := BufStrides([]int{1, 0}, []int{2, 3}, nil, 8, st[:])
	require.NoError(t, err)
	Describe([]int{0, 0}, []int{3, 3}, []int{1, 0}, []int{2, 3}, []int{1, 0}, st[:2], 8, &s)
	assert.Equal(t, 0, s.Levels)
	assert.Equal(t, []int{64}, s.Counts())
	assert.Equal(t, 32, s.RemoteOff)
	assert.Equal(t, 0, s.BufOff)

	// Part rows: one level.
	_, err = BufStrides([]int{1, 1}, []int{2, 2}, []int{4}, 8, st[:])
	require.NoError(t, err)
	Describe([]int{0, 0}, []int{3, 3}, []int{1, 1}, []int{2, 2}, []int{1, 1}, st[:2], 4, &s)
	assert.Equal(t, 1, s.Levels)
	assert.Equal(t, []int{8, 2}, s.Counts())
	assert.Equal(t, []int{16}, s.RemoteStrides())
	assert.Equal(t, []int{16}, s.BufStrides())
	assert.Equal(t, 20, s.RemoteOff)
	assert.Equal(t, 16, s.Bytes())

	// 3-D block with whole planes in the middle: dims 1 and 2 merge, dim 0 a level.
	// block [0..3]x[0..2]x[0..1], patch [1..2]x[0..2]x[0..1], buffer padded ld = {3, 5}.
	_, err = BufStrides([]int{1, 0, 0}, []int{2, 2, 1}, []int{4, 5}, 100, st[:])
	require.NoError(t, err)
	Describe([]int{0, 0, 0}, []int{3, 2, 1}, []int{1, 0, 0}, []int{2, 2, 1}, []int{1, 0, 0}, st[:3], 1, &s)
	// remote rows are contiguous (block width 2), buffer rows are not (ld 5): levels [2, 3, 2]
	assert.Equal(t, []int{2, 3, 2}, s.Counts())
	assert.Equal(t, []int{2, 6}, s.RemoteStrides())
	assert.Equal(t, []int{5, 20}, s.BufStrides())
	assert.Equal(t, 6, s.RemoteOff)
	// with ld {3, 5} a buffer plane is 15 bytes = 3 rows at stride 5: the plane levels merge
	_, err = BufStrides([]int{1, 0, 0}, []int{2, 2, 1}, []int{3, 5}, 100, st[:])
	require.NoError(t, err)
	Describe([]int{0, 0, 0}, []int{3, 2, 1}, []int{1, 0, 0}, []int{2, 2, 1}, []int{1, 0, 0}, st[:3], 1, &s)
	assert.Equal(t, []int{2, 6}, s.Counts())
	assert.Equal(t, []int{2}, s.RemoteStrides())
	assert.Equal(t, []int{5}, s.BufStrides())
}

// apply moves the bytes of a strided descriptor from buf to block, ARMCI style.
func apply(s *Strided, buf, block []byte) {
	var idx [MaxDims]int
	for {
		ro, bo := s.RemoteOff, s.BufOff
		for l := 1; l <= s.Levels; l++ {
			ro += idx[l] * s.RemoteStride[l-1]
			bo += idx[l] * s.BufStride[l-1]
		}
		copy(block[ro:ro+s.Count[0]], buf[bo:bo+s.Count[0]])
		l := 1
		for ; l <= s.Levels; l++ {
			idx[l]++
			if idx[l] < s.Count[l] {
				break
			}
			idx[l] = 0
		}
		if l > s.Levels {
			return
		}
	}
}

// TestDescribeRandom checks EachBlock + BufStrides + Describe against a serial element loop
// for random arrays (1-D..4-D), distributions (regular, chunked, irregular), patches and ld.
func TestDescribeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 400; iter++ {
		n := 1 + rng.IntN(4)
		dims := make([]int, n)
		for i := range dims {
			dims[i] = 1 + rng.IntN(6)
		}
		nproc := 1 + rng.IntN(6)
		var d *Dist
		var err error
		switch rng.IntN(3) {
		case 0:
			d, err = Regular(dims, nproc, nil)
		case 1:
			ch := make([]int, n)
			for i := range ch {
				ch[i] = rng.IntN(4) - 1
			}
			d, err = Regular(dims, nproc, ch)
		default:
			m := make([][]int, n)
			nb := 1
			for i := range m {
				m[i] = []int{0}
				for s := 1; s < dims[i]; s++ {
					if rng.IntN(3) == 0 && nb*(len(m[i])+1) <= nproc*len(m[i]) {
						m[i] = append(m[i], s)
					}
				}
				nb *= len(m[i])
			}
			if nb > nproc {
				nproc = nb
			}
			d, err = Irregular(dims, nproc, m)
		}
		require.NoError(t, err)
		lo, hi := make([]int, n), make([]int, n)
		for i := range lo {
			a, b := rng.IntN(dims[i]), rng.IntN(dims[i])
			lo[i], hi[i] = min(a, b), max(a, b)
		}
		var ld []int
		if n > 1 && rng.IntN(2) == 0 {
			ld = make([]int, n-1)
			for i := range ld {
				ld[i] = hi[i+1] - lo[i+1] + 1 + rng.IntN(3)
			}
		}
		const es = 2
		var st [MaxDims]int
		span, err := BufStrides(lo, hi, ld, 1<<20, st[:])
		require.NoError(t, err)
		buf := make([]byte, span*es)
		for i := range buf {
			buf[i] = byte(rng.IntN(250) + 1)
		}
		blocks := make([][]byte, nproc)
		for r := range blocks {
			blocks[r] = make([]byte, d.BlockElems(r)*es)
		}
		var s Strided
		var c Cursor
		touched, visited := 0, 0
		require.NoError(t, d.Region(lo, hi, &c))
		for c.Next() {
			visited++
			Describe(c.BlockLo(), c.BlockHi(), c.Lo(), c.Hi(), lo, st[:n], es, &s)
			require.LessOrEqual(t, s.Levels, n-1)
			require.LessOrEqual(t, s.RemoteOff+s.RemoteExtent(), len(blocks[c.Rank]))
			require.LessOrEqual(t, s.BufOff+s.BufExtent(), len(buf))
			apply(&s, buf, blocks[c.Rank])
			touched += s.Bytes()
		}
		// serial expectation: every element of the array
		sub := make([]int, n)
		inPatch := 0
		for {
			r, off, err := d.Offset(sub)
			require.NoError(t, err)
			got := blocks[r][off*es : off*es+es]
			in := true
			bo := 0
			for i := range sub {
				if sub[i] < lo[i] || sub[i] > hi[i] {
					in = false
				}
				bo += (sub[i] - lo[i]) * st[i]
			}
			if in {
				inPatch++
				require.Equal(t, buf[bo*es:bo*es+es], got, "iter %d element %v", iter, sub)
			} else {
				require.Equal(t, []byte{0, 0}, got, "iter %d element %v outside the patch", iter, sub)
			}
			k := n - 1
			for ; k >= 0; k-- {
				sub[k]++
				if sub[k] < dims[k] {
					break
				}
				sub[k] = 0
			}
			if k < 0 {
				break
			}
		}
		require.Equal(t, inPatch*es, touched)
		require.Equal(t, c.Count(), visited)
	}
}

func TestRegionAllocatesNothing(t *testing.T) {
	d, err := Regular([]int{40, 40, 40}, 8, nil)
	require.NoError(t, err)
	lo, hi := []int{3, 5, 7}, []int{35, 30, 33}
	var st [MaxDims]int
	var s Strided
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := BufStrides(lo, hi, nil, 1<<30, st[:]); err != nil {
			panic(err)
		}
		var c Cursor
		if err := d.Region(lo, hi, &c); err != nil {
			panic(err)
		}
		for c.Next() {
			Describe(c.BlockLo(), c.BlockHi(), c.Lo(), c.Hi(), lo, st[:3], 8, &s)
			n++
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 101*8, n) // AllocsPerRun runs once more to warm up
}

func TestCursorZeroValue(t *testing.T) {
	var c Cursor
	assert.False(t, c.Next())
}
