package ft

import (
	"fmt"
	"testing"

	"gonum.org/v1/gonum/dsp/fourier"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// BenchmarkFFT is one forward 3-D FFT of class A's grid on one rank, along x, y and z.
func BenchmarkFFT(b *testing.B) {
	p, _ := ParamsFor(npb.ClassA)
	u := Block{Data: make([]complex128, p.NX*p.NY*p.NZ), NZ: p.NZ, NY: p.NY, NX: p.NX}
	if err := InitialConditions(u, p); err != nil {
		b.Fatal(err)
	}
	t, err := NewFFT(p)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		axis string
		f    func(Block, Direction) error
	}{{"x", t.X}, {"y", t.Y}, {"z", t.Z}} {
		b.Run(c.axis, func(b *testing.B) {
			for b.Loop() {
				if err := c.f(u, Forward); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLine is one 1-D forward transform of a line of FT's lengths by the two complex FFTs
// of gonum: the in-place radix-2 this package uses and fourier.CmplxFFT (FFTPACK).
func BenchmarkLine(b *testing.B) {
	for _, n := range []int{128, 256, 512} {
		v := make([]complex128, n)
		for i := range v {
			v[i] = complex(float64(i%7), float64(i%5))
		}
		b.Run(fmt.Sprintf("radix2/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				fourier.CoefficientsRadix2(v)
			}
		})
		plan := fourier.NewCmplxFFT(n)
		b.Run(fmt.Sprintf("cmplxfft/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				plan.Coefficients(v, v)
			}
		})
	}
}
