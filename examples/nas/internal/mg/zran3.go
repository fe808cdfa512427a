package mg

import (
	"sort"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Charge is a candidate position of zran3: the random value drawn there and the point's linear
// global index i1 + n·(i2 + n·i3) (0-based interior coordinates).
type Charge struct {
	Value float64
	Index int
}

// Candidates are one block's NCharges largest (Max, largest first) and smallest (Min, smallest
// first) random values; unused slots hold Index −1.
type Candidates struct {
	Max, Min [NCharges]Charge
}

// Fill draws NPB's random field into the interior of g, the block of the n×n×n grid whose first
// interior point has global coordinates (lo3, lo2, lo1): the point with linear index
// i = i1 + n·(i2 + n·i3) gets the (i+1)-th number of NPB's generator from NPB's seed 314159265
// with multiplier 5^13 (zran3's vranlc rows, each started by the jump power(a, ...)); the ghost
// cells are zeroed. It returns the block's candidates for the charges.
func Fill(g Grid, n, lo3, lo2, lo1 int) Candidates {
	g.Zero()
	var c Candidates
	for k := range c.Max {
		c.Max[k] = Charge{Value: -1, Index: -1}
		c.Min[k] = Charge{Value: 2, Index: -1}
	}
	if g.Empty() {
		return c
	}
	for i3 := 1; i3 <= g.N3; i3++ {
		for i2 := 1; i2 <= g.N2; i2++ {
			base := lo1 + n*(lo2+i2-1+n*(lo3+i3-1))
			r := npb.NewRand(npb.Seed, npb.Mult)
			r.Skip(uint64(base))
			row := g.row(i3, i2)[1 : g.N1+1]
			r.Fill(row)
			for i1, x := range row {
				if x > c.Max[NCharges-1].Value {
					c.Max[NCharges-1] = Charge{x, base + i1}
					for k := NCharges - 1; k > 0 && c.Max[k].Value > c.Max[k-1].Value; k-- {
						c.Max[k], c.Max[k-1] = c.Max[k-1], c.Max[k]
					}
				}
				if x < c.Min[NCharges-1].Value {
					c.Min[NCharges-1] = Charge{x, base + i1}
					for k := NCharges - 1; k > 0 && c.Min[k].Value < c.Min[k-1].Value; k-- {
						c.Min[k], c.Min[k-1] = c.Min[k-1], c.Min[k]
					}
				}
			}
		}
	}
	return c
}

// Select merges the candidates of every block and returns the linear indices of the NCharges
// globally largest values (+1 charges) and of the NCharges smallest (−1 charges): the global
// ten of zran3's max/min reductions. The values of NPB's generator over a grid are distinct, so
// the choice does not depend on how the grid is cut into blocks.
func Select(blocks []Candidates) (plus, minus []int) {
	var hi, lo []Charge
	for _, b := range blocks {
		for k := range NCharges {
			if b.Max[k].Index >= 0 {
				hi = append(hi, b.Max[k])
			}
			if b.Min[k].Index >= 0 {
				lo = append(lo, b.Min[k])
			}
		}
	}
	sort.Slice(hi, func(i, j int) bool { return hi[i].Value > hi[j].Value })
	sort.Slice(lo, func(i, j int) bool { return lo[i].Value < lo[j].Value })
	for k := 0; k < NCharges && k < len(hi); k++ {
		plus = append(plus, hi[k].Index)
	}
	for k := 0; k < NCharges && k < len(lo); k++ {
		minus = append(minus, lo[k].Index)
	}
	return plus, minus
}

// Place zeroes g (ghost cells included) and sets +1 at the points of plus and −1 at those of
// minus that fall in g's block (global lower corner (lo3, lo2, lo1) of the n×n×n grid): the end
// of zran3, before its comm3. A point in both lists gets −1 first, then +1, as in zran3.
func Place(g Grid, n, lo3, lo2, lo1 int, plus, minus []int) {
	g.Zero()
	set := func(idx []int, val float64) {
		for _, i := range idx {
			i1, i2, i3 := i%n-lo1, (i/n)%n-lo2, i/(n*n)-lo3
			if i1 >= 0 && i1 < g.N1 && i2 >= 0 && i2 < g.N2 && i3 >= 0 && i3 < g.N3 {
				g.Data[g.Index(i3+1, i2+1, i1+1)] = val
			}
		}
	}
	set(minus, -1)
	set(plus, +1)
}
