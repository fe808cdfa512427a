package rma

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// cpuShare gives each rank of a machine an equal, disjoint slice of the CPUs, and nothing where
// binding would not help or a launcher bound the process already.
func TestCPUShare(t *testing.T) {
	four := []int{0, 1, 2, 3}
	for _, c := range []struct {
		allowed      []int
		online, i, n int
		want         []int
	}{
		{four, 4, 0, 2, []int{0, 1}},
		{four, 4, 1, 2, []int{2, 3}},
		{four, 4, 2, 4, []int{2}},
		{four, 4, 1, 3, []int{1}},
		{four, 4, 2, 3, []int{2, 3}},
		{[]int{0, 1}, 2, 1, 2, []int{1}},
		{four, 4, 0, 1, nil},        // alone on its machine
		{four, 4, 0, 5, nil},        // more ranks than CPUs
		{[]int{2}, 4, 0, 2, nil},    // bound by the launcher
		{[]int{0, 1}, 4, 0, 2, nil}, // bound by the launcher to a share
		{four, 4, 4, 4, nil},        // bad index
	} {
		require.Equal(t, c.want, cpuShare(c.allowed, c.online, c.i, c.n), "%+v", c)
	}
}

func TestCPUListLen(t *testing.T) {
	for s, want := range map[string]int{"0": 1, "0-1": 2, "0-3,6": 5, "0,2,4-7": 6} {
		n, err := cpuListLen(s)
		require.NoError(t, err, s)
		require.Equal(t, want, n, s)
	}
	for _, s := range []string{"", "a", "3-1", "0-x"} {
		_, err := cpuListLen(s)
		require.Error(t, err, s)
	}
}

// A rank bound to a share of the CPUs runs one Go processor per CPU of it, unless the user set
// GOMAXPROCS; an unbound rank is left as it is.
func TestProcsFor(t *testing.T) {
	require.Equal(t, 1, procsFor(1, ""))
	require.Equal(t, 4, procsFor(4, ""))
	require.Equal(t, 0, procsFor(1, "2"))
	require.Equal(t, 0, procsFor(0, ""))
}
