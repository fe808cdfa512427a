package bench

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallTree is a job of 8 ranks on two leaves of 4 hosts and 4 spines: small enough for a test.
func smallTree(pattern string) SimOptions {
	o := SimOptions{Pattern: pattern, HostsPerLeaf: 4, Spines: 4, Size: 64 << 10, Iters: 2, Window: 4}
	o, err := o.check()
	if err != nil {
		panic(err)
	}
	return o
}

func simOne(t *testing.T, o SimOptions, n int, run SimRun) simStats {
	var st simStats
	var err error
	synctest.Test(t, func(t *testing.T) { st, err = simulate(context.Background(), o, n, run) })
	require.NoError(t, err)
	return st
}

// A hot spot on the leaf→spine link of a pair's single path: adaptive striping over 2 paths
// moves fewer bytes over it than the single path does. In a DRC whose pairs load every uplink
// that does not raise the average bandwidth (the hot link's lost capacity is lost either way);
// for one pair with spare paths it does: adaptive striping over 4 paths gets more than even
// striping, which waits for the slow stripe, and more than the single path. (Virtual time: the
// figures are the model's, the same on every run of a configuration.)
func TestHotspotAdaptiveAvoidsHotLink(t *testing.T) {
	o := smallTree(SimDRC)
	o.HotFactor = 10
	single := simOne(t, o, 8, SimRun{1, "binding"})
	adaptive := simOne(t, o, 8, SimRun{2, "adaptive"})
	t.Logf("DRC hot link bytes: single %d, adaptive %d; bandwidth %.1f, %.1f MB/s", single.hotBytes, adaptive.hotBytes, single.bw, adaptive.bw)
	assert.Less(t, adaptive.hotBytes, single.hotBytes)

	o.HostsPerLeaf, o.Displacement = 1, 1 // one pair, on two leaves
	single = simOne(t, o, 2, SimRun{1, "binding"})
	even := simOne(t, o, 2, SimRun{4, "even"})
	adaptive = simOne(t, o, 2, SimRun{4, "adaptive"})
	t.Logf("pair: single %.1f, even %.1f, adaptive %.1f MB/s", single.bw, even.bw, adaptive.bw)
	assert.Greater(t, adaptive.bw, even.bw)
	assert.Greater(t, adaptive.bw, single.bw)
}

// An all-to-all completes with every configuration, and its time is at least what the host
// links need: (n-1) blocks through each host's link at the link rate.
func TestHotspotAlltoall(t *testing.T) {
	o := smallTree(SimAlltoall)
	for _, run := range []SimRun{{1, "binding"}, {4, "hsam"}, {4, "bss:2"}} {
		st := simOne(t, o, 8, run)
		bound := time.Duration(float64(7*o.Size) / float64(o.LinkRate) * 1e9)
		t.Logf("%s: %v (host-link bound %v)", run.Name(), st.lat, bound)
		assert.GreaterOrEqual(t, st.lat, bound)
	}
}

func TestHotspotOptions(t *testing.T) {
	runs, err := ParseSimRuns("1/binding, 4/hsam,12/bss:3")
	require.NoError(t, err)
	assert.Equal(t, []SimRun{{1, "binding"}, {4, "hsam"}, {12, "bss:3"}}, runs)
	for _, bad := range []string{"4", "0/even", "x/even", "4/"} {
		_, err := ParseSimRuns(bad)
		assert.ErrorIs(t, err, ErrOptions, bad)
	}
	_, err = SimOptions{Pattern: "ring"}.check()
	assert.ErrorIs(t, err, ErrOptions)
	_, err = SimOptions{Ranks: []int{12}, Displacement: 12}.check()
	assert.ErrorIs(t, err, ErrOptions)
	assert.Equal(t, []int{0, 1, 2}, placement(SimOptions{Placement: PlaceSeq}, 3))
	p := placement(SimOptions{Placement: PlaceRandom, Shuffle: 1}, 16)
	assert.ElementsMatch(t, placement(SimOptions{}, 16), p)
	assert.Equal(t, p, placement(SimOptions{Placement: PlaceRandom, Shuffle: 1}, 16), "the same PRNG seed places the same way")
}
