// Package npb holds the pieces the NAS Parallel Benchmarks kernels share: the NPB linear
// congruential pseudo-random generator (randlc/vranlc), benchmark classes, a wall-clock timer
// and the NPB-style result report.
//
// Source: D. H. Bailey et al., "The NAS Parallel Benchmarks", RNR-94-007 (§2.2, pseudorandom
// number generator) and the NPB 3.x reference codes (common/randdp, common/c_print_results).
package npb

// Generator constants of the NPB pseudo-random number generator: x_{k+1} = a·x_k mod 2^46.
const (
	// Mult is a = 5^13 = 1220703125, the multiplier every NPB kernel uses.
	Mult uint64 = 1220703125
	// Seed is the NPB seed 314159265 (CG's tran, IS's create_seq seed).
	Seed uint64 = 314159265

	modBits = 46
	modMask = 1<<modBits - 1
	r46     = 1.0 / (1 << modBits) // 2^-46, exact
)

// Rand is the NPB generator state x (an odd integer in (0, 2^46)). The reference randlc does the
// 46-bit arithmetic exactly in double precision by splitting a and x into 23-bit halves; the
// product a·x mod 2^46 is the same integer as the low 46 bits of the 64-bit wrapping product, so
// Rand computes it with one integer multiply and a mask and returns exactly the same numbers.
type Rand struct {
	x uint64
	a uint64
}

// NewRand returns a generator with state seed and multiplier a (both taken mod 2^46).
func NewRand(seed, a uint64) Rand {
	return Rand{x: seed & modMask, a: a & modMask}
}

// Next advances the state (x = a·x mod 2^46) and returns x·2^-46 in (0, 1): NPB's randlc(x, a).
func (r *Rand) Next() float64 {
	r.x = (r.a * r.x) & modMask
	return float64(r.x) * r46
}

// State returns the current state x (the value the reference keeps in its double X).
func (r *Rand) State() uint64 { return r.x }

// Fill writes len(y) successive numbers into y: NPB's vranlc(n, x, a, y).
func (r *Rand) Fill(y []float64) {
	x, a := r.x, r.a
	for i := range y {
		x = (a * x) & modMask
		y[i] = float64(x) * r46
	}
	r.x = x
}

// Skip advances the state by n steps in O(log n) multiplications (x = a^n·x mod 2^46), the
// jump NPB's find_my_seed does to start each processor's subsequence.
func (r *Rand) Skip(n uint64) {
	r.x = (PowMod46(r.a, n) * r.x) & modMask
}

// PowMod46 returns a^n mod 2^46.
func PowMod46(a, n uint64) uint64 {
	result := uint64(1)
	a &= modMask
	for n > 0 {
		if n&1 == 1 {
			result = (result * a) & modMask
		}
		a = (a * a) & modMask
		n >>= 1
	}
	return result
}

// Randlc is the reference randlc(x, a) on double-precision state, kept for cross-checking:
// it splits a and x as A = 2^23·A1 + A2 and computes x = a·x mod 2^46 in exact double arithmetic.
// It updates *x and returns *x·2^-46.
func Randlc(x *float64, a float64) float64 {
	const (
		r23 = 1.0 / (1 << 23)
		t23 = float64(1 << 23)
		t46 = float64(1 << 46)
	)
	a1 := float64(int64(r23 * a))
	a2 := a - t23*a1
	x1 := float64(int64(r23 * *x))
	x2 := *x - t23*x1
	t1 := a1*x2 + a2*x1
	t2 := float64(int64(r23 * t1))
	z := t1 - t23*t2
	t3 := t23*z + a2*x2
	t4 := float64(int64(r46 * t3))
	*x = t3 - t46*t4
	return r46 * *x
}
