package cg

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

func TestParams(t *testing.T) {
	p, err := ParamsFor(npb.ClassA)
	require.NoError(t, err)
	assert.Equal(t, Params{npb.ClassA, 14000, 11, 15, 20, 17.130235054029}, p)
	_, err = ParamsFor('Z')
	assert.ErrorIs(t, err, npb.ErrClass)
}

func TestVerify(t *testing.T) {
	p, _ := ParamsFor(npb.ClassS)
	ok, _ := p.Verify(8.5971775078648)
	assert.True(t, ok)
	ok, _ = p.Verify(8.5971775078648 * (1 + 2e-10))
	assert.False(t, ok)
	ok, _ = p.Verify(p.ZetaVerify + 1e-3)
	assert.False(t, ok)
}

func TestSerialClassS(t *testing.T) {
	p, _ := ParamsFor(npb.ClassS)
	res, err := Serial(p, nil)
	require.NoError(t, err)
	assert.True(t, res.Verified, "zeta %.13E want %.13E", res.Zeta, p.ZetaVerify)
	assert.InDelta(t, p.ZetaVerify, res.Zeta, 1e-9)
}

func TestSerialClassW(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("class W in -short mode or under the race detector")
	}
	p, _ := ParamsFor(npb.ClassW)
	res, err := Serial(p, nil)
	require.NoError(t, err)
	assert.True(t, res.Verified, "zeta %.13E want %.13E", res.Zeta, p.ZetaVerify)
}

// A matrix built from row blocks equals the matrix built whole, bit for bit: ranks that each
// generate only their rows hold exactly the serial matrix.
func TestMakeABlocksEqualWhole(t *testing.T) {
	p, _ := ParamsFor(npb.ClassS)
	whole, err := MakeA(p, 0, p.NA)
	require.NoError(t, err)
	cuts := []int{0, 1, 467, 900, 1399, 1400}
	for b := 0; b+1 < len(cuts); b++ {
		lo, hi := cuts[b], cuts[b+1]
		blk, err := MakeA(p, lo, hi)
		require.NoError(t, err)
		require.Equal(t, hi-lo, blk.Rows())
		base := whole.RowStr[lo]
		for r := 0; r < blk.Rows(); r++ {
			wlo, whi := whole.RowStr[lo+r], whole.RowStr[lo+r+1]
			require.Equal(t, whi-wlo, blk.RowStr[r+1]-blk.RowStr[r], "row %d", lo+r)
			assert.Equal(t, whole.ColIdx[wlo:whi], blk.ColIdx[blk.RowStr[r]:blk.RowStr[r+1]])
			assert.Equal(t, whole.A[wlo:whi], blk.A[blk.RowStr[r]:blk.RowStr[r+1]])
		}
		_ = base
	}
}

// The matrix is symmetric (A = Σ size_i v_i v_iᵀ + diagonal), columns ascend in each row and the
// diagonal is present.
func TestMakeAStructure(t *testing.T) {
	if raceEnabled {
		t.Skip("O(nnz·row length) scan, slow under the race detector")
	}
	p, _ := ParamsFor(npb.ClassS)
	m, err := MakeA(p, 0, p.NA)
	require.NoError(t, err)
	get := func(i, j int) (float64, bool) {
		for k := m.RowStr[i]; k < m.RowStr[i+1]; k++ {
			if int(m.ColIdx[k]) == j {
				return m.A[k], true
			}
		}
		return 0, false
	}
	for i := 0; i < m.Rows(); i++ {
		_, ok := get(i, i)
		require.True(t, ok, "diagonal %d", i)
		for k := m.RowStr[i]; k < m.RowStr[i+1]; k++ {
			if k > m.RowStr[i] {
				require.Less(t, m.ColIdx[k-1], m.ColIdx[k])
			}
			j := int(m.ColIdx[k])
			v, ok := get(j, i)
			require.True(t, ok, "(%d,%d) without (%d,%d)", i, j, j, i)
			require.InDelta(t, m.A[k], v, 1e-12)
		}
	}
}

func TestMakeABadRange(t *testing.T) {
	p, _ := ParamsFor(npb.ClassS)
	for _, r := range [][2]int{{-1, 5}, {5, 4}, {0, p.NA + 1}} {
		_, err := MakeA(p, r[0], r[1])
		assert.ErrorIs(t, err, ErrRange)
	}
	bad := p
	bad.NA, bad.NonZer = 5, 6
	_, err := MakeA(bad, 0, 5)
	assert.ErrorIs(t, err, ErrRange)
	bad.NA = 0
	_, err = Serial(bad, nil)
	assert.ErrorIs(t, err, ErrRange)
}

func BenchmarkSerialClassS(b *testing.B) {
	p, _ := ParamsFor(npb.ClassS)
	for b.Loop() {
		if _, err := Serial(p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMulVecClassA(b *testing.B) {
	p, _ := ParamsFor(npb.ClassA)
	m, err := MakeA(p, 0, p.NA)
	if err != nil {
		b.Fatal(err)
	}
	x := make([]float64, p.NA)
	y := make([]float64, p.NA)
	for i := range x {
		x[i] = 1
	}
	b.ResetTimer()
	for b.Loop() {
		m.MulVec(x, y)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(m.NNZ()), "ns/nnz")
}

func BenchmarkMakeAClassA(b *testing.B) {
	p, _ := ParamsFor(npb.ClassA)
	for b.Loop() {
		if _, err := MakeA(p, 0, p.NA); err != nil {
			b.Fatal(err)
		}
	}
}
