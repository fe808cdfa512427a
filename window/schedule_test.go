package window

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIssueOrder(t *testing.T) {
	// 16 puts then 16 gets of one size (the interleaving test of [Vishnu07 §5.3.4])
	var dirs []dir
	var sizes []int
	for i := 0; i < 32; i++ {
		dirs = append(dirs, dir(i/16))
		sizes = append(sizes, 1024)
	}
	inOrder := issueOrder(dirs, sizes, false, nil)
	for i, v := range inOrder {
		require.Equal(t, i, v)
	}
	re := issueOrder(dirs, sizes, true, nil)
	require.Len(t, re, 32)
	for k := 0; k < 16; k++ {
		require.Equal(t, k, re[2*k], "put %d at slot %d", k, 2*k)
		require.Equal(t, 16+k, re[2*k+1], "get %d at slot %d", k, 2*k+1)
	}

	// byte-balanced: one big put is followed by the small gets until they catch up
	dirs = []dir{dirPut, dirPut, dirGet, dirGet, dirGet, dirGet}
	sizes = []int{4000, 1000, 1000, 1000, 1000, 1000}
	require.Equal(t, []int{0, 2, 3, 4, 5, 1}, issueOrder(dirs, sizes, true, nil))

	// only one direction: program order
	require.Equal(t, []int{0, 1, 2}, issueOrder([]dir{dirGet, dirGet, dirGet}, []int{1, 2, 3}, true, nil))
	require.Empty(t, issueOrder(nil, nil, true, nil))

	// every index exactly once for a mixed queue
	dirs = []dir{dirGet, dirPut, dirGet, dirGet, dirPut, dirPut, dirPut, dirGet}
	sizes = []int{8, 64, 8, 512, 8, 8, 1, 0}
	got := issueOrder(dirs, sizes, true, nil)
	seen := map[int]bool{}
	for _, i := range got {
		require.False(t, seen[i])
		seen[i] = true
	}
	require.Len(t, seen, len(dirs))
}
