package wqring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A ring doubles up to its limit and keeps its outstanding entries at their absolute indexes
// (here wrapped around it); it refuses exactly at the limit, keeps its size while entries are
// outstanding and goes back to First entries once the queue has emptied.
func TestRingGrowsToLimitAndShrinksWhenEmpty(t *testing.T) {
	r := New[uint64](12)
	require.Equal(t, First, r.Len())
	head, tail := uint64(6), uint64(6)
	post := func() bool {
		if !r.Reserve(head, tail) {
			return false
		}
		*r.At(tail) = tail
		tail++
		return true
	}
	for range First {
		require.True(t, post())
	}
	assert.Equal(t, First, r.Len(), "no growth before full")
	for _, want := range []int{8, 12} {
		require.True(t, post())
		assert.Equal(t, want, r.Len())
		for i := head; i != tail; i++ {
			assert.Equal(t, i, *r.At(i), "entry %d after growing to %d", i, want)
		}
		for int(tail-head) < want {
			require.True(t, post())
		}
	}
	assert.False(t, post(), "bounded by the limit: the 13th outstanding is refused")
	assert.Equal(t, 12, int(tail-head))
	r.Idle(head, tail)
	assert.Equal(t, 12, r.Len(), "entries outstanding: no shrinking")
	head++
	assert.True(t, post(), "a completion frees a slot")
	assert.False(t, post())
	head = tail
	r.Idle(head, tail)
	assert.Equal(t, First, r.Len(), "emptied: back to the first size")
	for range 12 {
		require.True(t, post())
	}
	assert.False(t, post())
	for i := head; i != tail; i++ {
		assert.Equal(t, i, *r.At(i))
	}
}

// Limits below First and zero: the ring holds the limit, and a zero ring refuses every post.
func TestRingSmallLimits(t *testing.T) {
	r := New[int](2)
	assert.Equal(t, 2, r.Len())
	assert.True(t, r.Reserve(0, 1))
	assert.False(t, r.Reserve(0, 2))
	var z Ring[int]
	assert.False(t, z.Reserve(0, 0))
	z = New[int](-1)
	assert.Equal(t, 0, z.Limit())
	assert.False(t, z.Reserve(0, 0))
}

// Posting into a ring that has room allocates nothing.
func TestRingReserveAllocatesNothingWhenRoom(t *testing.T) {
	r := New[[64]byte](1024)
	var head, tail uint64
	for range 64 {
		r.Reserve(head, tail)
		tail++
	}
	head = tail - 1
	allocs := testing.AllocsPerRun(1000, func() {
		r.Reserve(head, tail)
		tail++
		head++
		r.Idle(head, tail-1)
	})
	assert.Zero(t, allocs)
}

// The ring follows the pattern: one burst leaves First entries behind; a second burst of the
// same depth raises the floor, and from then on bursts of that depth allocate nothing; after
// floorDecay busy periods using at most a quarter of the floor it halves (and the ring with
// it), down to First.
func TestRingFollowsThePattern(t *testing.T) {
	r := New[[32]byte](1024)
	var head, tail uint64
	burst := func(n int) {
		for range n {
			require.True(t, r.Reserve(head, tail))
			tail++
		}
		head = tail
		r.Idle(head, tail)
		r.Idle(head, tail) // a second Idle without a post (a duplicate ACK) ends no busy period
	}
	burst(32)
	assert.Equal(t, First, r.Len(), "one burst: back to the first size")
	burst(32)
	assert.Equal(t, 32, r.Len(), "a burst again: the floor follows it")
	assert.Zero(t, testing.AllocsPerRun(20, func() { burst(32) }), "steady bursts allocate nothing")
	assert.Zero(t, testing.AllocsPerRun(20, func() { burst(12) }), "shallower bursts neither")
	assert.Equal(t, 32, r.Len())
	for range floorDecay - 1 {
		burst(8)
	}
	assert.Equal(t, 32, r.Len(), "a few quiet periods keep the floor")
	burst(8)
	assert.Equal(t, 16, r.Len(), "floorDecay quiet periods in a row halve it")
	for range 2 * floorDecay {
		burst(1)
	}
	assert.Equal(t, First, r.Len(), "down to the first size")
	burst(40)
	assert.Equal(t, 64, r.Len(), "a deeper burst after shrinking raises the floor again")
}
