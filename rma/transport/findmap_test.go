package transport

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestFindMap(t *testing.T) {
	c := DefaultCosts()
	per := c.perMessage() // 131.25 ns
	tests := []struct {
		name  string
		cands []Candidate
		h     int
		want  []int
		gain  float64
	}{
		{"no candidates", nil, 26, []int{}, 0},
		{"h = 0", []Candidate{{1, 1000, c.Setup}}, 0, []int{}, 0},
		{"one hot peer", []Candidate{{3, 1000, c.Setup}}, 26, []int{3},
			1000*per - 10000 - 1000*0.5*10},
		{"too few messages to pay the setup", []Candidate{{3, 50, c.Setup}}, 26, []int{}, 0},
		{"an open connection pays no setup", []Candidate{{3, 50, 0}}, 26, []int{3}, 50*per - 50*0.5*10},
		{"sorted by messages, bounded by h", []Candidate{{1, 1000, c.Setup}, {2, 5000, c.Setup}, {3, 3000, c.Setup}}, 2, []int{2, 3},
			8000*per - 20000 - 5000*2.0/2*10},
		{"ties: the cheaper setup first", []Candidate{{1, 1000, c.Setup}, {2, 1000, c.Reuse}, {3, 1000, 0}}, 1, []int{3},
			1000*per - 1000*0.5*10},
		{"silent candidates never chosen", []Candidate{{1, 0, 0}, {2, 0, 0}}, 5, []int{}, 0},
	}
	for _, tt := range tests {
		rc, gain := FindMap(c, slices.Clone(tt.cands), tt.h)
		if !slices.Equal(rc, tt.want) || gain != tt.gain {
			t.Errorf("%s: FindMap = %v, %.2f; want %v, %.2f", tt.name, rc, gain, tt.want, tt.gain)
		}
	}
}

// TestFindMapUniformTakesH: with n messages to every one of 63 peers the polling term n·m/2·p
// grows linearly in m like the saving, so when a dedicated connection pays at all the bound h
// decides how many get one; when the polling cost eats the saving, none does.
func TestFindMapUniformTakesH(t *testing.T) {
	c := DefaultCosts()
	var cands []Candidate
	for p := 1; p < 64; p++ {
		cands = append(cands, Candidate{p, 10000, c.Setup})
	}
	if rc, _ := FindMap(c, slices.Clone(cands), 26); len(rc) != 26 {
		t.Fatalf("uniform traffic to 63 peers, h 26: %d on RC", len(rc))
	}
	if rc, _ := FindMap(c, slices.Clone(cands), 63); len(rc) != 63 {
		t.Fatalf("uniform traffic to 63 peers, h 63: %d on RC", len(rc))
	}
	c.Poll = 2 * c.RCGain
	if rc, _ := FindMap(c, slices.Clone(cands), 26); len(rc) != 0 {
		t.Fatalf("polling dearer than the saving: %d on RC", len(rc))
	}
}

// TestFindMapIsBestPrefix checks FindMap against every prefix of the sorted candidates.
func TestFindMapIsBestPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := DefaultCosts()
	for range 200 {
		n := rng.IntN(40)
		cands := make([]Candidate, n)
		for i := range cands {
			cands[i] = Candidate{i, rng.Int64N(3000), []time.Duration{0, c.Reuse, c.Setup}[rng.IntN(3)]}
		}
		h := rng.IntN(30)
		rc, gain := FindMap(c, cands, h) // sorts cands
		best := 0.0
		for m := 1; m <= min(h, n); m++ {
			if cands[m-1].Msgs == 0 {
				break
			}
			var x float64
			for _, cd := range cands[:m] {
				x += float64(cd.Msgs)*c.perMessage() - float64(cd.Setup)
			}
			x -= float64(cands[0].Msgs) * float64(m) / 2 * float64(c.Poll)
			best = max(best, x)
		}
		if len(rc) > h || abs(gain-best) > 1e-6*max(1, best) {
			t.Fatalf("FindMap chose %d (h %d) with gain %.3f, best prefix %.3f", len(rc), h, gain, best)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
