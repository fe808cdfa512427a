package rma

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStridedEachVisitsEveryChunkInOrder(t *testing.T) {
	s, err := checkStrided([]int{4, 3, 2}, []int{10, 40}, []int{100, 1000})
	require.NoError(t, err)
	var got [][2]int
	require.NoError(t, s.each(func(so, do int) error { got = append(got, [2]int{so, do}); return nil }))
	want := [][2]int{{0, 0}, {10, 100}, {20, 200}, {40, 1000}, {50, 1100}, {60, 1200}}
	require.Equal(t, want, got)
	require.Equal(t, 64, s.extent(s.srcStride))
	require.Equal(t, 1204, s.extent(s.dstStride))
}

func TestStridedContiguousAndEmpty(t *testing.T) {
	s, err := checkStrided([]int{17}, nil, nil)
	require.NoError(t, err)
	n := 0
	require.NoError(t, s.each(func(so, do int) error { n++; require.Zero(t, so+do); return nil }))
	require.Equal(t, 1, n)
	require.Equal(t, 17, s.extent(nil))
	e, err := checkStrided([]int{8, 0}, []int{8}, []int{8})
	require.NoError(t, err)
	require.True(t, e.empty())
	require.NoError(t, e.each(func(int, int) error { t.Fatal("chunk of an empty descriptor"); return nil }))
}

func TestStridedRejectsBadDescriptors(t *testing.T) {
	nine := make([]int, 9)
	for _, c := range []struct {
		name            string
		count, src, dst []int
	}{
		{"no count", nil, nil, nil},
		{"9 levels", append([]int{1}, nine...), nine, nine},
		{"missing strides", []int{4, 2}, nil, []int{4}},
		{"negative count", []int{4, -1}, []int{4}, []int{4}},
		{"negative stride", []int{4, 2}, []int{-4}, []int{4}},
	} {
		_, err := checkStrided(c.count, c.src, c.dst)
		require.True(t, errors.Is(err, ErrStride), "%s: %v", c.name, err)
	}
	_, err := checkStrided(append([]int{1}, make([]int, 8)...), make([]int, 8), make([]int, 8))
	require.NoError(t, err, "8 levels are allowed")
}
