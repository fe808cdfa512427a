package ft

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Class S of the serial reference verifies against NPB's six checksums (W, A and B verify too;
// they run by hand, being slower).
func TestSerialClassS(t *testing.T) {
	p, err := ParamsFor(npb.ClassS)
	require.NoError(t, err)
	res, err := Serial(p, nil)
	require.NoError(t, err)
	require.Len(t, res.Sums, 6)
	assert.True(t, res.Verified, "largest relative error %g", res.RelErr)
	assert.Less(t, res.RelErr, 2e-13) // the references have 13 digits
	assert.Greater(t, res.Seconds, 0.0)
}

// Fewer steps than the class's: the checksums that are there match, but the run does not verify
// (NPB's class "U").
func TestSerialShortRunFails(t *testing.T) {
	p, _ := ParamsFor(npb.ClassS)
	p.NIter = 2
	res, err := Serial(p, nil)
	require.NoError(t, err)
	assert.Len(t, res.Sums, 2)
	assert.False(t, res.Verified)
	assert.Less(t, res.RelErr, Epsilon)
}

func TestParams(t *testing.T) {
	want := map[npb.Class][4]int{npb.ClassS: {64, 64, 64, 6}, npb.ClassW: {128, 128, 32, 6},
		npb.ClassA: {256, 256, 128, 6}, npb.ClassB: {512, 256, 256, 20}}
	for c, w := range want {
		p, err := ParamsFor(c)
		require.NoError(t, err)
		assert.Equal(t, w, [4]int{p.NX, p.NY, p.NZ, p.NIter}, "class %s", c)
		assert.Len(t, p.Ref, p.NIter)
		require.NoError(t, p.Validate())
	}
	_, err := ParamsFor('C')
	assert.ErrorIs(t, err, npb.ErrClass)
	a, _ := ParamsFor(npb.ClassA)
	for _, bad := range []Params{{NX: 0, NY: 4, NZ: 4}, {NX: 4, NY: 12, NZ: 4}, {NX: 4, NY: 4, NZ: 4, NIter: -1}} {
		assert.ErrorIs(t, bad.Validate(), ErrRange, "%+v", bad)
	}
	// NPB's operation count: ntotal·(14.8157 + 7.19641·ln ntotal + (5.23518 + 7.21113·ln ntotal)·6)
	n := float64(256 * 256 * 128)
	assert.InEpsilon(t, 1e-6*n*(14.8157+7.19641*math.Log(n)+(5.23518+7.21113*math.Log(n))*6), a.Mops(1), 1e-15)
	assert.Zero(t, a.Mops(0))
	// ParamsFor hands out copies: changing one does not change the table
	a.Ref[0] = 0
	b, _ := ParamsFor(npb.ClassA)
	assert.NotZero(t, b.Ref[0])
}

func TestCheck(t *testing.T) {
	p, _ := ParamsFor(npb.ClassS)
	sums := append([]complex128(nil), p.Ref...)
	ok, rel := p.Check(sums)
	assert.True(t, ok)
	assert.Zero(t, rel)
	sums[3] *= complex(1+2e-12, 0)
	ok, rel = p.Check(sums)
	assert.False(t, ok)
	assert.InDelta(t, 2e-12, rel, 1e-15)
	sums[3] = cmplx.NaN()
	ok, rel = p.Check(sums)
	assert.False(t, ok)
	assert.True(t, math.IsNaN(rel))
	ok, _ = p.Check(append(append([]complex128(nil), p.Ref...), p.Ref[0])) // one step too many
	assert.False(t, ok)
}

// small is a grid of 8×4×16 points for the block tests.
var small = Params{Class: 'U', NX: 8, NY: 4, NZ: 16, NIter: 1}

func whole(p Params) Block {
	return Block{Data: make([]complex128, p.NX*p.NY*p.NZ), NZ: p.NZ, NY: p.NY, NX: p.NX}
}

// at returns the point (z, y, x) of a block given in global indices.
func at(b Block, z, y, x int) complex128 { return b.Data[((z-b.Z0)*b.NY+y-b.Y0)*b.NX+x] }

// Any block of the grid gets the same initial values and evolution factors as the whole grid,
// and the first point takes NPB's first two draws.
func TestBlocksMatchWholeGrid(t *testing.T) {
	p := small
	g := whole(p)
	require.NoError(t, InitialConditions(g, p))
	gtw, err := Twiddle(g, p)
	require.NoError(t, err)
	r := npb.NewRand(npb.Seed, npb.Mult)
	re := r.Next()
	assert.Equal(t, complex(re, r.Next()), g.Data[0])
	for _, b := range []Block{{NZ: 5, NY: 4, NX: 8, Z0: 3}, {NZ: 16, NY: 2, NX: 8, Y0: 1}, {NZ: 1, NY: 1, NX: 8, Z0: 15, Y0: 3}} {
		b.Data = make([]complex128, b.Len())
		require.NoError(t, InitialConditions(b, p))
		tw, err := Twiddle(b, p)
		require.NoError(t, err)
		for z := b.Z0; z < b.Z0+b.NZ; z++ {
			for y := b.Y0; y < b.Y0+b.NY; y++ {
				for x := range b.NX {
					require.Equal(t, at(g, z, y, x), at(b, z, y, x), "(%d,%d,%d)", z, y, x)
					require.Equal(t, gtw[(z*p.NY+y)*p.NX+x], tw[((z-b.Z0)*b.NY+y-b.Y0)*b.NX+x])
				}
			}
		}
	}
	// the factor of wave numbers (kz, ky, kx) = (−8, 2, −3) at (z, y, x) = (8, 2, 5)
	assert.InEpsilon(t, math.Exp(-4*Alpha*math.Pi*math.Pi*(64+4+9)), gtw[(8*p.NY+2)*p.NX+5], 1e-15)
	assert.Equal(t, 1.0, gtw[0])
}

// The shares of the checksum of blocks that tile the grid add up to the whole grid's checksum,
// which is the mean of NPB's 1024 sample points.
func TestChecksumShares(t *testing.T) {
	p := small
	g := whole(p)
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range g.Data {
		g.Data[i] = complex(rng.Float64(), rng.Float64())
	}
	want := complex128(0)
	for j := 1; j <= 1024; j++ {
		want += at(g, (5*j)%p.NZ, (3*j)%p.NY, j%p.NX)
	}
	want /= complex(p.Total(), 0)
	sum, err := Checksum(g, p)
	require.NoError(t, err)
	// relative: a sum of 1024 values in another order differs in its last bits
	assert.InDelta(t, 0, cmplx.Abs(sum-want), 1e-13*cmplx.Abs(want))
	var parts complex128
	for z0 := 0; z0 < p.NZ; z0 += 4 {
		b := Block{Data: g.Data[z0*p.NY*p.NX:], NZ: 4, NY: p.NY, NX: p.NX, Z0: z0}
		s, err := Checksum(b, p)
		require.NoError(t, err)
		parts += s
	}
	assert.InDelta(t, 0, cmplx.Abs(parts-want), 1e-13*cmplx.Abs(want))
}

// The 3-D transform along x, y and z is the 3-D DFT with exponent −2πi (computed directly), and
// the inverse after it multiplies by the number of points.
func TestFFTIsDFT(t *testing.T) {
	p := small
	g := whole(p)
	for i := range g.Data {
		g.Data[i] = complex(rand.Float64(), rand.Float64())
	}
	orig := append([]complex128(nil), g.Data...)
	f, err := NewFFT(p)
	require.NoError(t, err)
	require.NoError(t, f.X(g, Forward))
	require.NoError(t, f.Y(g, Forward))
	require.NoError(t, f.Z(g, Forward))
	for _, k := range [][3]int{{0, 0, 0}, {1, 2, 3}, {15, 3, 7}, {8, 1, 4}} {
		var want complex128
		for z := range p.NZ {
			for y := range p.NY {
				for x := range p.NX {
					ph := -2 * math.Pi * (float64(k[0]*z)/float64(p.NZ) + float64(k[1]*y)/float64(p.NY) + float64(k[2]*x)/float64(p.NX))
					want += orig[(z*p.NY+y)*p.NX+x] * cmplx.Exp(complex(0, ph))
				}
			}
		}
		assert.InDelta(t, 0, cmplx.Abs(at(g, k[0], k[1], k[2])-want), 1e-12, "k %v", k)
	}
	require.NoError(t, f.Z(g, Inverse))
	require.NoError(t, f.Y(g, Inverse))
	require.NoError(t, f.X(g, Inverse))
	for i := range orig {
		require.InDelta(t, 0, cmplx.Abs(g.Data[i]/complex(p.Total(), 0)-orig[i]), 1e-14, "point %d", i)
	}
}

// Blocks that do not fit the grid, and transforms along a dimension a block cuts, are refused
// and change nothing.
func TestShapeErrors(t *testing.T) {
	p := small
	f, err := NewFFT(p)
	require.NoError(t, err)
	slab := Block{Data: make([]complex128, 4*p.NY*p.NX), NZ: 4, NY: p.NY, NX: p.NX, Z0: 4}
	rows := Block{Data: make([]complex128, p.NZ*2*p.NX), NZ: p.NZ, NY: 2, NX: p.NX, Y0: 2}
	slab.Data[5], rows.Data[5] = 1, 1
	assert.ErrorIs(t, f.Z(slab, Forward), ErrShape)
	assert.ErrorIs(t, f.Y(rows, Forward), ErrShape)
	assert.Equal(t, complex128(1), slab.Data[5])
	assert.Equal(t, complex128(1), rows.Data[5])
	for _, b := range []Block{
		{Data: make([]complex128, 10), NZ: 4, NY: p.NY, NX: p.NX}, // too short
		{Data: slab.Data, NZ: 4, NY: p.NY, NX: p.NX, Z0: 13},      // beyond nz
		{Data: slab.Data, NZ: 4, NY: p.NY, NX: 4},                 // x cut
		{Data: rows.Data, NZ: p.NZ, NY: 2, NX: p.NX, Y0: 3},       // beyond ny
		{Data: rows.Data, NZ: -1, NY: 2, NX: p.NX},                // negative extent
	} {
		assert.ErrorIs(t, InitialConditions(b, p), ErrShape, "%+v", b)
		_, err := Twiddle(b, p)
		assert.ErrorIs(t, err, ErrShape)
		_, err = Checksum(b, p)
		assert.ErrorIs(t, err, ErrShape)
		assert.ErrorIs(t, f.X(b, Forward), ErrShape)
	}
	_, err = Steps(p, whole(p), whole(p), make([]complex128, 3), 1, Exchange{}, nil)
	assert.ErrorIs(t, err, ErrShape)
	_, err = NewFFT(Params{NX: 3, NY: 4, NZ: 4})
	assert.ErrorIs(t, err, ErrRange)
	_, err = Serial(Params{NX: 3, NY: 4, NZ: 4}, nil)
	assert.ErrorIs(t, err, ErrRange)
}
