package mg

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Class S of the serial reference verifies against NPB's rnm2 (W and A verify too; they run in
// the command's tests only on demand, being slower).
func TestSerialClassS(t *testing.T) {
	p, err := ParamsFor(npb.ClassS)
	require.NoError(t, err)
	res, err := Serial(p, nil)
	require.NoError(t, err)
	assert.True(t, res.Verified, "rnm2 %.13E, want %.13E", res.RNM2, p.Verify)
	assert.Less(t, res.RelErr, 1e-12)
	assert.Greater(t, res.RNMU, 0.0)
}

// Too few V-cycles miss the official norm.
func TestSerialDetectsWrongNorm(t *testing.T) {
	p, _ := ParamsFor(npb.ClassS)
	p.NIter = 3
	res, err := Serial(p, nil)
	require.NoError(t, err)
	assert.False(t, res.Verified)
	assert.Greater(t, res.RelErr, Epsilon)
}

func TestParams(t *testing.T) {
	for c, lt := range map[npb.Class]int{npb.ClassS: 5, npb.ClassW: 7, npb.ClassA: 8, npb.ClassB: 8} {
		p, err := ParamsFor(c)
		require.NoError(t, err)
		assert.Equal(t, lt, p.Levels(), "class %s", c)
		require.NoError(t, p.Validate())
	}
	a, _ := ParamsFor(npb.ClassA)
	b, _ := ParamsFor(npb.ClassB)
	assert.Equal(t, 4, a.NIter)
	assert.Equal(t, 20, b.NIter)
	assert.NotEqual(t, a.C, b.C, "class B uses the S(b) smoother")
	assert.InDelta(t, 58*4*256*256*256/1e6, a.Mops(1), 1e-9)
	assert.Zero(t, a.Mops(0))
	_, err := ParamsFor('C')
	assert.ErrorIs(t, err, npb.ErrClass)
	for _, n := range []int{0, 2, 24, 2048} {
		q := a
		q.N = n
		assert.ErrorIs(t, q.Validate(), ErrRange, "n %d", n)
	}
	ok, rel := a.Check(a.Verify * (1 + 2e-9))
	assert.True(t, ok)
	assert.InDelta(t, 2e-9, rel, 1e-15)
	ok, _ = a.Check(a.Verify * (1 + 2e-8))
	assert.False(t, ok)
}

// Comm3 gives every ghost cell, edges and corners included, its periodic image.
func TestComm3Periodic(t *testing.T) {
	const n1, n2, n3 = 4, 3, 5
	g := NewGrid(n1, n2, n3)
	for i := range g.Data {
		g.Data[i] = rand.Float64()
	}
	Comm3(g)
	img := func(i, n int) int { return (i+n-1)%n + 1 }
	for i3 := 0; i3 <= n3+1; i3++ {
		for i2 := 0; i2 <= n2+1; i2++ {
			for i1 := 0; i1 <= n1+1; i1++ {
				require.Equal(t, g.Data[g.Index(img(i3, n3), img(i2, n2), img(i1, n1))],
					g.Data[g.Index(i3, i2, i1)], "(%d,%d,%d)", i3, i2, i1)
			}
		}
	}
}

// Drawing the random field block by block gives the values and the charges of the whole grid.
func TestFillBlocksMatchWhole(t *testing.T) {
	const n = 16
	whole := NewGrid(n, n, n)
	plus, minus := Select([]Candidates{Fill(whole, n, 0, 0, 0)})
	require.Len(t, plus, NCharges)
	require.Len(t, minus, NCharges)
	var cands []Candidates
	const b3, b2, b1 = 8, 4, 16 // 2×4×1 blocks
	for lo3 := 0; lo3 < n; lo3 += b3 {
		for lo2 := 0; lo2 < n; lo2 += b2 {
			g := NewGrid(b1, b2, b3)
			cands = append(cands, Fill(g, n, lo3, lo2, 0))
			for i3 := 1; i3 <= b3; i3++ {
				for i2 := 1; i2 <= b2; i2++ {
					for i1 := 1; i1 <= b1; i1++ {
						require.Equal(t, whole.Data[whole.Index(lo3+i3, lo2+i2, i1)], g.Data[g.Index(i3, i2, i1)])
					}
				}
			}
		}
	}
	p2, m2 := Select(cands)
	assert.Equal(t, plus, p2)
	assert.Equal(t, minus, m2)
	// the first value is the generator's first draw
	r := npb.NewRand(npb.Seed, npb.Mult)
	assert.Equal(t, r.Next(), whole.Data[whole.Index(1, 1, 1)])

	Place(whole, n, 0, 0, 0, plus, minus)
	sum, mx := Norm2(whole)
	assert.Equal(t, float64(2*NCharges), sum)
	assert.Equal(t, 1.0, mx)
}

// The kernels on the blocks of a decomposition, with ghost cells copied from the whole grid,
// give the same numbers, bit for bit, as on the whole grid: the property the distributed
// version rests on.
func TestKernelsOnBlocks(t *testing.T) {
	const n = 8
	a, _ := ParamsFor(npb.ClassS)
	fine, coarse, v := NewGrid(n, n, n), NewGrid(n/2, n/2, n/2), NewGrid(n, n, n)
	for _, g := range []Grid{fine, coarse, v} {
		for i := range g.Data {
			g.Data[i] = rand.Float64() - 0.5
		}
		Comm3(g)
	}
	w := NewWork(n)
	// whole-grid results
	rW, uW, sW, iW := NewGrid(n, n, n), NewGrid(n, n, n), NewGrid(n/2, n/2, n/2), NewGrid(n, n, n)
	Resid(fine, v, rW, &a.A, w)
	copy(uW.Data, fine.Data)
	Psinv(v, uW, &a.C, w)
	Rprj3(fine, sW, w)
	Interp(coarse, iW, w)
	// one block: fine [4,8)×[0,4)×[2,6)... must be even-aligned for rprj3/interp: z [4,8), y [0,4), x [4,8)
	const lo3, lo2, lo1, b = 4, 0, 4, 4
	blk := func(src Grid, lo3, lo2, lo1, m int) Grid { // copy of a block with its ghosts
		g := NewGrid(m, m, m)
		for i3 := 0; i3 <= m+1; i3++ {
			for i2 := 0; i2 <= m+1; i2++ {
				for i1 := 0; i1 <= m+1; i1++ {
					g.Data[g.Index(i3, i2, i1)] = src.Data[src.Index(lo3+i3, lo2+i2, lo1+i1)]
				}
			}
		}
		return g
	}
	fb, vb, cb := blk(fine, lo3, lo2, lo1, b), blk(v, lo3, lo2, lo1, b), blk(coarse, lo3/2, lo2/2, lo1/2, b/2)
	rB, uB, sB, iB := NewGrid(b, b, b), blk(fine, lo3, lo2, lo1, b), NewGrid(b/2, b/2, b/2), NewGrid(b, b, b)
	Resid(fb, vb, rB, &a.A, w)
	Psinv(vb, uB, &a.C, w)
	Rprj3(fb, sB, w)
	Interp(cb, iB, w)
	for i3 := 1; i3 <= b; i3++ {
		for i2 := 1; i2 <= b; i2++ {
			for i1 := 1; i1 <= b; i1++ {
				at := rW.Index(lo3+i3, lo2+i2, lo1+i1)
				require.Equal(t, rW.Data[at], rB.Data[rB.Index(i3, i2, i1)])
				require.Equal(t, uW.Data[at], uB.Data[uB.Index(i3, i2, i1)])
				require.Equal(t, iW.Data[at], iB.Data[iB.Index(i3, i2, i1)])
				if i3 <= b/2 && i2 <= b/2 && i1 <= b/2 {
					require.Equal(t, sW.Data[sW.Index(lo3/2+i3, lo2/2+i2, lo1/2+i1)], sB.Data[sB.Index(i3, i2, i1)])
				}
			}
		}
	}
}

func TestGridValidate(t *testing.T) {
	g := NewGrid(4, 4, 4)
	require.NoError(t, g.Validate())
	g.Data = g.Data[:len(g.Data)-1]
	assert.ErrorIs(t, g.Validate(), ErrShape)
	assert.NoError(t, Grid{}.Validate())
	assert.True(t, Grid{}.Empty())
}

// A V-cycle and a residual allocate nothing (the kernels work on the grids and the scratch).
func TestVCycleAllocatesNothing(t *testing.T) {
	p, _ := ParamsFor(npb.ClassS)
	s := newSerial(p)
	s.init()
	allocs := testing.AllocsPerRun(3, func() {
		s.mg3P()
		s.resid()
		s.norm()
	})
	assert.Zero(t, allocs)
}
