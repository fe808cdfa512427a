package ft

import (
	"fmt"
	"math"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Block is a box of the nx×ny×nz grid held in memory row-major as (z, y, x), x fastest: the
// planes Z0 ≤ z < Z0+NZ and rows Y0 ≤ y < Y0+NY, every x (NX is the grid's nx). The serial run
// holds the whole grid; the distributed run a slab of z-planes (for the x and y transforms and
// the checksum) or of y-rows (for the z transform and the evolution). Data has at least
// NZ·NY·NX elements; Data[(z·NY + y)·NX + x] is the point (Z0+z, Y0+y, x).
type Block struct {
	Data       []complex128
	NZ, NY, NX int
	Z0, Y0     int
}

// Len returns the number of points of the block.
func (b Block) Len() int { return b.NZ * b.NY * b.NX }

// fits checks the block against the grid of p. Errors: ErrShape.
func (b Block) fits(p Params) error {
	if b.NX != p.NX || b.NY < 0 || b.NZ < 0 || b.Y0 < 0 || b.Z0 < 0 ||
		b.Y0+b.NY > p.NY || b.Z0+b.NZ > p.NZ || len(b.Data) < b.Len() {
		return fmt.Errorf("ft: block z %d+%d, y %d+%d, x %d, %d elements on a %dx%dx%d grid: %w",
			b.Z0, b.NZ, b.Y0, b.NY, b.NX, len(b.Data), p.NX, p.NY, p.NZ, ErrShape)
	}
	return nil
}

// InitialConditions fills the block with NPB's initial field: the grid is drawn from the NPB
// generator (seed 314159265, multiplier 5^13) two numbers per point, real part then imaginary,
// x fastest, then y, then z, so point (z, y, x) takes draws 2·(x + nx·(y + ny·z)) + 1 and + 2
// (compute_initial_conditions; each row of the block starts by the generator's jump-ahead, so
// any block gets the same values as the whole grid). Errors: ErrShape.
func InitialConditions(b Block, p Params) error {
	if err := b.fits(p); err != nil {
		return err
	}
	for z := range b.NZ {
		for y := range b.NY {
			r := npb.NewRand(npb.Seed, npb.Mult)
			r.Skip(2 * uint64(p.NX) * (uint64(b.Y0+y) + uint64(p.NY)*uint64(b.Z0+z)))
			row := b.Data[(z*b.NY+y)*b.NX:][:b.NX]
			for x := range row {
				re := r.Next()
				row[x] = complex(re, r.Next())
			}
		}
	}
	return nil
}

// waveNumber maps index i of an extent n to its signed wave number: 0, 1, ..., n/2 − 1, −n/2,
// ..., −1 (compute_indexmap's mod(i + n/2, n) − n/2).
func waveNumber(i, n int) int { return (i+n/2)%n - n/2 }

// Twiddle returns the evolution factor of every point of the block, in the block's order:
// exp(−4απ²·(kx² + ky² + kz²)) with the signed wave numbers of the point's indices
// (compute_indexmap). Errors: ErrShape.
func Twiddle(b Block, p Params) ([]float64, error) {
	if err := b.fits(p); err != nil {
		return nil, err
	}
	ap := -4 * Alpha * math.Pi * math.Pi
	tw := make([]float64, b.Len())
	for z := range b.NZ {
		kz := waveNumber(b.Z0+z, p.NZ)
		for y := range b.NY {
			ky := waveNumber(b.Y0+y, p.NY)
			row := tw[(z*b.NY+y)*b.NX:][:b.NX]
			for x := range row {
				kx := waveNumber(x, p.NX)
				row[x] = math.Exp(ap * float64(kz*kz+ky*ky+kx*kx))
			}
		}
	}
	return tw, nil
}

// Evolve advances the spectrum one time step: state[i] *= tw[i], then out[i] = state[i]
// (evolve's u0 = u0·twiddle, u1 = u0). The slices are as long as tw.
func Evolve(state []complex128, tw []float64, out []complex128) {
	state = state[:len(tw)]
	out = out[:len(tw)]
	for i, t := range tw {
		v := complex(real(state[i])*t, imag(state[i])*t)
		state[i] = v
		out[i] = v
	}
}

// ChecksumPoints is the number of points NPB's checksum samples.
const ChecksumPoints = 1024

// Checksum returns the block's share of NPB's checksum: the sum, divided by nx·ny·nz, of the
// points (x, y, z) = (j mod nx, 3j mod ny, 5j mod nz) for j = 1..1024 that lie in the block
// (checksum). The shares of blocks that tile the grid add up to the checksum. Errors:
// ErrShape.
func Checksum(b Block, p Params) (complex128, error) {
	if err := b.fits(p); err != nil {
		return 0, err
	}
	var sum complex128
	for j := 1; j <= ChecksumPoints; j++ {
		x, y, z := j%p.NX, (3*j)%p.NY-b.Y0, (5*j)%p.NZ-b.Z0
		if y >= 0 && y < b.NY && z >= 0 && z < b.NZ {
			sum += b.Data[(z*b.NY+y)*b.NX+x]
		}
	}
	return sum / complex(p.Total(), 0), nil
}
