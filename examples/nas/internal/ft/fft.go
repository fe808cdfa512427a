package ft

import (
	"fmt"

	"gonum.org/v1/gonum/dsp/fourier"
)

// Direction selects the transform: Forward (exponent −2πi·jk/n) or Inverse (+2πi·jk/n), both
// unnormalized, so Inverse after Forward multiplies by n.
type Direction int

// Directions.
const (
	Forward Direction = iota
	Inverse
)

// lineBlock is how many neighbouring lines (along x) a strided transform copies out at once:
// NPB's fftblock, so every cache line fetched along the stride is used whole.
const lineBlock = 16

// linePad is the gap between the lines in FFT's buffer, in elements: a power-of-two line length
// would put the lineBlock lines' k-th elements in the same cache set (NPB's fftblockpad).
const linePad = 4

// FFT transforms blocks of one grid along x, y or z with gonum's in-place radix-2 complex FFT
// (fourier.CoefficientsRadix2 and SequenceRadix2: faster than fourier.CmplxFFT's FFTPACK, which
// copies every line in and out, on FT's lines of 128 to 512 points; examples/nas/README.md has
// the measurement). Lines along y and z are strided in memory; they are copied
// lineBlock at a time into a contiguous buffer, transformed and copied back (NPB's cffts2 and
// cffts3). An FFT is not safe for concurrent use.
type FFT struct {
	p   Params
	buf []complex128
}

// NewFFT returns the transforms for the grid of p (NPB's fft_init). Errors: ErrRange.
func NewFFT(p Params) (*FFT, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &FFT{p: p, buf: make([]complex128, lineBlock*(max(p.NY, p.NZ)+linePad))}, nil
}

// line transforms v (a power-of-two length) in place.
func line(dir Direction, v []complex128) {
	if dir == Forward {
		fourier.CoefficientsRadix2(v)
	} else {
		fourier.SequenceRadix2(v)
	}
}

// X transforms every row of b along x, in place (cffts1). Errors: ErrShape.
func (t *FFT) X(b Block, dir Direction) error {
	if err := b.fits(t.p); err != nil {
		return err
	}
	for r := range b.NZ * b.NY {
		line(dir, b.Data[r*b.NX:][:b.NX])
	}
	return nil
}

// Y transforms b along y, in place (cffts2); b must hold whole y-lines (Y0 = 0, NY = ny).
// Errors: ErrShape.
func (t *FFT) Y(b Block, dir Direction) error {
	if err := b.fits(t.p); err != nil {
		return err
	}
	if b.Y0 != 0 || b.NY != t.p.NY {
		return fmt.Errorf("ft: y transform of rows %d+%d of %d: %w", b.Y0, b.NY, t.p.NY, ErrShape)
	}
	for z := range b.NZ {
		t.strided(b.Data[z*b.NY*b.NX:], b.NY, b.NX, dir)
	}
	return nil
}

// Z transforms b along z, in place (cffts3); b must hold whole z-lines (Z0 = 0, NZ = nz).
// Errors: ErrShape.
func (t *FFT) Z(b Block, dir Direction) error {
	if err := b.fits(t.p); err != nil {
		return err
	}
	if b.Z0 != 0 || b.NZ != t.p.NZ {
		return fmt.Errorf("ft: z transform of planes %d+%d of %d: %w", b.Z0, b.NZ, t.p.NZ, ErrShape)
	}
	for y := range b.NY {
		t.strided(b.Data[y*b.NX:], b.NZ, b.NY*b.NX, dir)
	}
	return nil
}

// strided transforms the lines v[x + k·stride], k < n, for x < nx (the grid's nx), lineBlock
// lines at a time through t.buf.
func (t *FFT) strided(v []complex128, n, stride int, dir Direction) {
	nx, ls := t.p.NX, n+linePad
	for x0 := 0; x0 < nx; x0 += lineBlock {
		w := min(lineBlock, nx-x0)
		for k := range n {
			src := v[x0+k*stride:][:w]
			for l, c := range src {
				t.buf[l*ls+k] = c
			}
		}
		for l := range w {
			line(dir, t.buf[l*ls:][:n])
		}
		for k := range n {
			dst := v[x0+k*stride:][:w]
			for l := range dst {
				dst[l] = t.buf[l*ls+k]
			}
		}
	}
}
