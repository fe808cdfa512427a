package mg

import (
	"fmt"
	"math"
)

// Grid is a 3-D block of float64 with a ghost layer of width 1 on every side, the layout of
// NPB's u(n1,n2,n3) with n = block + 2: the element at storage index (i3, i2, i1), each in
// [0, N+1], is Data[i3·S3 + i2·S2 + i1]. Indices 1..N are the block proper (the interior), 0 and
// N+1 the ghost cells. x (i1) is contiguous, as in NPB's Fortran layout and in a row-major
// global array of dims (z, y, x). A Grid with N1 = N2 = N3 = 0 is empty (a rank that owns no
// block); the kernels do nothing on it.
type Grid struct {
	Data       []float64
	N1, N2, N3 int // interior extents along x, y, z (points)
	S2, S3     int // strides of y and z in elements (x has stride 1)
}

// NewGrid returns a zeroed packed grid with interior n1×n2×n3: S2 = n1+2, S3 = (n1+2)(n2+2).
func NewGrid(n1, n2, n3 int) Grid {
	s2, s3 := n1+2, (n1+2)*(n2+2)
	return Grid{Data: make([]float64, s3*(n3+2)), N1: n1, N2: n2, N3: n3, S2: s2, S3: s3}
}

// Empty reports whether the grid has no interior point.
func (g Grid) Empty() bool { return g.N1 <= 0 || g.N2 <= 0 || g.N3 <= 0 }

// Validate checks that Data holds every storage index of the extents. Errors: ErrShape.
func (g Grid) Validate() error {
	if g.Empty() {
		return nil
	}
	if g.S2 < g.N1+2 || g.S3 < g.S2*(g.N2+2) || len(g.Data) < (g.N3+1)*g.S3+(g.N2+1)*g.S2+g.N1+2 {
		return fmt.Errorf("%w: extents %dx%dx%d, strides %d %d, %d elements", ErrShape,
			g.N1, g.N2, g.N3, g.S2, g.S3, len(g.Data))
	}
	return nil
}

// Sub returns the view of g whose storage index 0 is g's (o3, o2, o1) and whose interior is
// n1×n2×n3, with g's strides (the block of a coarse grid under one rank's fine block).
func (g Grid) Sub(o3, o2, o1, n1, n2, n3 int) Grid {
	return Grid{Data: g.Data[o3*g.S3+o2*g.S2+o1:], N1: n1, N2: n2, N3: n3, S2: g.S2, S3: g.S3}
}

// Index returns the storage offset of (i3, i2, i1).
func (g Grid) Index(i3, i2, i1 int) int { return i3*g.S3 + i2*g.S2 + i1 }

// Zero clears every element of the storage, ghost cells included (NPB's zero3).
func (g Grid) Zero() { clear(g.Data) }

// row returns the storage row (i3, i2): N1+2 elements from ghost to ghost.
func (g Grid) row(i3, i2 int) []float64 {
	o := i3*g.S3 + i2*g.S2
	return g.Data[o : o+g.N1+2 : o+g.N1+2]
}

// Work is the scratch rows of the kernels (NPB's u1, u2 / r1, r2 / x1, y1 / z1, z2, z3), sized
// once for the largest grid so that no kernel allocates.
type Work struct{ a, b, c []float64 }

// NewWork returns scratch for grids of interior extent up to n along x.
func NewWork(n int) *Work {
	return &Work{a: make([]float64, n+2), b: make([]float64, n+2), c: make([]float64, n+2)}
}

func (w *Work) fits(n1 int) {
	if len(w.a) < n1+2 {
		panic(fmt.Sprintf("mg: scratch for %d points, grid row of %d", len(w.a)-2, n1))
	}
}

// crossSums fills, along row (i3, i2) ghost cells included, s1 with the sums of the four
// neighbour rows that share a face with it (i2±1, i3±1) and s2 with the four that share an edge
// (NPB's u1/u2 and r1/r2 of resid and psinv). s1 and s2 have the row's length.
func (g Grid) crossSums(i3, i2 int, s1, s2 []float64) {
	// every row resliced to len(s1) so that the loops run without bounds checks
	ym, yp := g.row(i3, i2-1)[:len(s1)], g.row(i3, i2+1)[:len(s1)]
	zm, zp := g.row(i3-1, i2)[:len(s1)], g.row(i3+1, i2)[:len(s1)]
	mm, pm := g.row(i3-1, i2-1)[:len(s1)], g.row(i3-1, i2+1)[:len(s1)]
	mp, pp := g.row(i3+1, i2-1)[:len(s1)], g.row(i3+1, i2+1)[:len(s1)]
	s2 = s2[:len(s1)]
	for i1 := range s1 {
		s1[i1] = ym[i1] + yp[i1] + zm[i1] + zp[i1]
		s2[i1] = mm[i1] + pm[i1] + mp[i1] + pp[i1]
	}
}

// Resid computes the residual r = v − A·u on the interior of r (NPB's resid without its comm3):
// A is the 27-point operator with coefficients a[0] (centre), a[2] (edges), a[3] (corners);
// a[1] (faces) is taken to be zero, as in NPB. u's ghost cells must be current; r may be v (the
// coarse-level r = r − A·u). u, v, r have equal extents (strides may differ).
func Resid(u, v, r Grid, a *[4]float64, w *Work) {
	if u.Empty() {
		return
	}
	w.fits(u.N1)
	n := u.N1 + 2
	u1, u2 := w.a[:n], w.b[:n]
	a0, a2, a3 := a[0], a[2], a[3]
	for i3 := 1; i3 <= u.N3; i3++ {
		for i2 := 1; i2 <= u.N2; i2++ {
			u.crossSums(i3, i2, u1, u2)
			uc, vc, rc := u.row(i3, i2)[:len(u1)], v.row(i3, i2)[:len(u1)], r.row(i3, i2)[:len(u1)]
			for i1 := 1; i1 < len(u1)-1; i1++ {
				rc[i1] = vc[i1] - a0*uc[i1] -
					a2*(u2[i1]+u1[i1-1]+u1[i1+1]) -
					a3*(u2[i1-1]+u2[i1+1])
			}
		}
	}
}

// Psinv applies the smoother u = u + C·r on the interior of u (NPB's psinv without its comm3):
// C has coefficients c[0] (centre), c[1] (faces), c[2] (edges); c[3] (corners) is taken to be
// zero, as in NPB. r's ghost cells must be current. u and r have equal extents.
func Psinv(r, u Grid, c *[4]float64, w *Work) {
	if r.Empty() {
		return
	}
	w.fits(r.N1)
	n := r.N1 + 2
	r1, r2 := w.a[:n], w.b[:n]
	c0, c1, c2 := c[0], c[1], c[2]
	for i3 := 1; i3 <= r.N3; i3++ {
		for i2 := 1; i2 <= r.N2; i2++ {
			r.crossSums(i3, i2, r1, r2)
			rc, uc := r.row(i3, i2)[:len(r1)], u.row(i3, i2)[:len(r1)]
			for i1 := 1; i1 < len(r1)-1; i1++ {
				uc[i1] = uc[i1] + c0*rc[i1] +
					c1*(rc[i1-1]+rc[i1+1]+r1[i1]) +
					c2*(r2[i1]+r1[i1-1]+r1[i1+1])
			}
		}
	}
}

// Rprj3 restricts the fine residual r onto the coarse grid s by NPB's trilinear finite-element
// projection (rprj3 without its comm3), on the interior of s: the coarse point J sits on the
// fine point 2J (storage indices), so r's interior must be exactly twice s's along every
// dimension (blocks aligned: the fine block starts at twice the coarse block's global index).
// r's ghost cells must be current.
func Rprj3(r, s Grid, w *Work) {
	if s.Empty() {
		return
	}
	if r.N1 != 2*s.N1 || r.N2 != 2*s.N2 || r.N3 != 2*s.N3 {
		panic(fmt.Sprintf("mg: rprj3 from %dx%dx%d onto %dx%dx%d", r.N1, r.N2, r.N3, s.N1, s.N2, s.N3))
	}
	w.fits(r.N1)
	n := r.N1 + 2
	x1, y1 := w.a[:n], w.b[:n]
	for j3 := 1; j3 <= s.N3; j3++ {
		i3 := 2 * j3
		for j2 := 1; j2 <= s.N2; j2++ {
			i2 := 2 * j2
			ym, yp := r.row(i3, i2-1)[:len(x1)], r.row(i3, i2+1)[:len(x1)]
			zm, zp := r.row(i3-1, i2)[:len(x1)], r.row(i3+1, i2)[:len(x1)]
			mm, mp := r.row(i3-1, i2-1)[:len(x1)], r.row(i3+1, i2-1)[:len(x1)]
			pm, pp := r.row(i3-1, i2+1)[:len(x1)], r.row(i3+1, i2+1)[:len(x1)]
			y1 := y1[:len(x1)]
			for i1 := 1; i1 < len(x1); i1 += 2 { // the odd fine points 2J−1, J = 1..m1+1
				x1[i1] = ym[i1] + yp[i1] + zm[i1] + zp[i1]
				y1[i1] = mm[i1] + mp[i1] + pm[i1] + pp[i1]
			}
			rc, sc := r.row(i3, i2)[:len(x1)], s.row(j3, j2)
			for i1 := 2; i1 < len(x1)-1; i1 += 2 { // the even fine points 2J under the coarse J
				y2 := mm[i1] + mp[i1] + pm[i1] + pp[i1]
				x2 := ym[i1] + yp[i1] + zm[i1] + zp[i1]
				sc[i1>>1] = 0.5*rc[i1] +
					0.25*(rc[i1-1]+rc[i1+1]+x2) +
					0.125*(x1[i1-1]+x1[i1+1]+y2) +
					0.0625*(y1[i1-1]+y1[i1+1])
			}
		}
	}
}

// Interp adds the trilinear interpolation of the coarse correction z to u (NPB's interp
// without its comm3): u = u + Q·z over the whole storage of u, ghost cells included (they are
// refreshed by the exchange that follows). The coarse point c sits on the fine point 2c (storage
// indices); u's interior is twice z's along every dimension, and z's ghost cells must be
// current.
func Interp(z, u Grid, w *Work) {
	if u.Empty() {
		return
	}
	if u.N1 != 2*z.N1 || u.N2 != 2*z.N2 || u.N3 != 2*z.N3 {
		panic(fmt.Sprintf("mg: interp from %dx%dx%d onto %dx%dx%d", z.N1, z.N2, z.N3, u.N1, u.N2, u.N3))
	}
	w.fits(z.N1)
	m := z.N1 + 2
	z1, z2, z3 := w.a[:m], w.b[:m], w.c[:m]
	for c3 := 0; c3 <= z.N3; c3++ {
		for c2 := 0; c2 <= z.N2; c2++ {
			zc, zy := z.row(c3, c2), z.row(c3, c2+1)
			zz, zyz := z.row(c3+1, c2), z.row(c3+1, c2+1)
			for c1 := range z1 {
				z1[c1] = zy[c1] + zc[c1]
				z2[c1] = zz[c1] + zc[c1]
				z3[c1] = zyz[c1] + zz[c1] + z1[c1]
			}
			u00, u10 := u.row(2*c3, 2*c2), u.row(2*c3, 2*c2+1)
			u01, u11 := u.row(2*c3+1, 2*c2), u.row(2*c3+1, 2*c2+1)
			for c1 := 0; c1 < m-1; c1++ {
				u00[2*c1] += zc[c1]
				u00[2*c1+1] += 0.5 * (zc[c1+1] + zc[c1])
			}
			for c1 := 0; c1 < m-1; c1++ {
				u10[2*c1] += 0.5 * z1[c1]
				u10[2*c1+1] += 0.25 * (z1[c1] + z1[c1+1])
			}
			for c1 := 0; c1 < m-1; c1++ {
				u01[2*c1] += 0.5 * z2[c1]
				u01[2*c1+1] += 0.25 * (z2[c1] + z2[c1+1])
			}
			for c1 := 0; c1 < m-1; c1++ {
				u11[2*c1] += 0.25 * z3[c1]
				u11[2*c1+1] += 0.125 * (z3[c1] + z3[c1+1])
			}
		}
	}
}

// Norm2 returns Σ r² and max |r| over the interior of r (NPB's norm2u3 before its reductions;
// rnm2 = sqrt(Σ r² / n³) once summed over every block).
func Norm2(r Grid) (sum, maxAbs float64) {
	if r.Empty() {
		return 0, 0
	}
	for i3 := 1; i3 <= r.N3; i3++ {
		for i2 := 1; i2 <= r.N2; i2++ {
			row := r.row(i3, i2)
			for _, x := range row[1 : r.N1+1] {
				sum += x * x
				if a := math.Abs(x); a > maxAbs {
					maxAbs = a
				}
			}
		}
	}
	return sum, maxAbs
}

// Comm3 fills the ghost cells of a grid that holds the whole periodic domain (NPB's comm3 on one
// process): along x, then y (ghost columns included), then z (ghost rows included), so edges and
// corners get their periodic images too.
func Comm3(g Grid) {
	if g.Empty() {
		return
	}
	n1, n2, n3 := g.N1, g.N2, g.N3
	for i3 := 1; i3 <= n3; i3++ {
		for i2 := 1; i2 <= n2; i2++ {
			row := g.row(i3, i2)
			row[0] = row[n1]
			row[n1+1] = row[1]
		}
	}
	for i3 := 1; i3 <= n3; i3++ {
		copy(g.row(i3, 0), g.row(i3, n2))
		copy(g.row(i3, n2+1), g.row(i3, 1))
	}
	plane := (n2+1)*g.S2 + n1 + 2 // one z plane, ghost rows included
	copy(g.Data[:plane], g.Data[n3*g.S3:n3*g.S3+plane])
	copy(g.Data[(n3+1)*g.S3:(n3+1)*g.S3+plane], g.Data[g.S3:g.S3+plane])
}
