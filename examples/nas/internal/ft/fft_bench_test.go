package ft

import (
	"testing"

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
