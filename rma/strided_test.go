package rma

import (
	"errors"
	"math"
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
	require.Equal(t, 64, s.srcExtent)
	require.Equal(t, 1204, s.dstExtent)
}

func TestStridedContiguousAndEmpty(t *testing.T) {
	s, err := checkStrided([]int{17}, nil, nil)
	require.NoError(t, err)
	n := 0
	require.NoError(t, s.each(func(so, do int) error { n++; require.Zero(t, so+do); return nil }))
	require.Equal(t, 1, n)
	require.Equal(t, 17, s.srcExtent)
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

// FuzzStridedBounds checks that a descriptor checkStrided accepts never makes each visit an
// offset at or past its side's extent (so bounds checked against the extent hold for every
// chunk), and that descriptors whose extents overflow int are refused rather than wrapped.
func FuzzStridedBounds(f *testing.F) {
	f.Add(8, 3, 2, 16, 64, 100, 1000)
	f.Add(8, 3, 1, math.MaxInt/2+1, 8, 8, 8)
	f.Add(1, math.MaxInt, 1, 1, 1, 1, 1)
	f.Add(0, 5, 5, 1, 1, 1, 1)
	f.Fuzz(func(t *testing.T, c0, c1, c2, s1, s2, d1, d2 int) {
		count := []int{c0, c1 % 64, c2 % 64}
		st, err := checkStrided(count, []int{s1, s2}, []int{d1, d2})
		if err != nil {
			if !errors.Is(err, ErrStride) && !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if st.srcExtent < 0 || st.dstExtent < 0 {
			t.Fatalf("negative extent %d/%d", st.srcExtent, st.dstExtent)
		}
		if st.empty() {
			return
		}
		n := 0
		_ = st.each(func(so, do int) error {
			if so < 0 || do < 0 || so > st.srcExtent-c0 || do > st.dstExtent-c0 {
				t.Fatalf("chunk at %d/%d of %d bytes outside extents %d/%d", so, do, c0, st.srcExtent, st.dstExtent)
			}
			if n++; n > 64*64 {
				return errors.New("enough")
			}
			return nil
		})
	})
}
