package npb

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The integer generator must reproduce the reference double-precision randlc bit for bit.
func TestRandMatchesReferenceRandlc(t *testing.T) {
	r := NewRand(Seed, Mult)
	x := float64(Seed)
	for i := 0; i < 100000; i++ {
		want := Randlc(&x, float64(Mult))
		got := r.Next()
		require.Equal(t, want, got, "draw %d", i)
		require.Equal(t, uint64(x), r.State(), "state %d", i)
	}
}

// Known first value: 5^13 · 314159265 mod 2^46.
func TestRandFirstDraw(t *testing.T) {
	r := NewRand(Seed, Mult)
	r.Next()
	// 1220703125·314159265 = 383495196533203125; mod 2^46 (computed with arbitrary precision)
	assert.Equal(t, uint64(55909509111989), r.State())
}

func TestSkipEqualsSteps(t *testing.T) {
	for _, n := range []uint64{0, 1, 2, 3, 17, 1000, 65537} {
		a := NewRand(Seed, Mult)
		for i := uint64(0); i < n; i++ {
			a.Next()
		}
		b := NewRand(Seed, Mult)
		b.Skip(n)
		assert.Equal(t, a.State(), b.State(), "n=%d", n)
	}
}

func TestFillEqualsNext(t *testing.T) {
	a, b := NewRand(Seed, Mult), NewRand(Seed, Mult)
	y := make([]float64, 1000)
	a.Fill(y)
	for i := range y {
		require.Equal(t, b.Next(), y[i])
	}
	assert.Equal(t, a.State(), b.State())
}

func TestParseClass(t *testing.T) {
	for _, s := range []string{"S", "w", " A ", "B"} {
		_, err := ParseClass(s)
		require.NoError(t, err, s)
	}
	c, _ := ParseClass("a")
	assert.Equal(t, ClassA, c)
	for _, s := range []string{"", "X", "SS", "C"} {
		_, err := ParseClass(s)
		assert.ErrorIs(t, err, ErrClass, s)
	}
}

func TestReportLines(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Report{Name: "CG", Class: ClassA, Size: "14000", Iterations: 15, Ranks: 4,
		Seconds: 1.5, Mops: 1000, OpType: "floating point", Verified: true,
		Extra: []string{"Zeta = 1.7130235054029E+01"}}.Print(&b))
	out := b.String()
	for _, l := range []string{" Class = A\n", " Ranks = 4\n", " Verification = SUCCESSFUL\n",
		" Time in seconds = 1.50\n", " Mop/s total = 1000.00\n", " Zeta = 1.7130235054029E+01\n"} {
		assert.Contains(t, out, l)
	}
	b.Reset()
	require.NoError(t, Report{Name: "IS", Class: ClassS, Ranks: 1}.Print(&b))
	assert.Contains(t, b.String(), " Verification = UNSUCCESSFUL\n")
}
