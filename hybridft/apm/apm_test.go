package apm

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAlternate(t *testing.T) {
	p := func(port, bits uint8) Path { return Path{Port: port, PathBits: bits} }
	cases := []struct {
		name          string
		home, primary Path
		ps            Ports
		want          Path
		ok            bool
	}{
		{"other port", p(1, 0), p(1, 0), Ports{N: 2, Up: 3}, p(2, 0), true},
		{"round robin from primary", p(2, 0), p(2, 0), Ports{N: 3, Up: 7}, p(3, 0), true},
		{"home again after migration", p(1, 0), p(2, 0), Ports{N: 2, Up: 3}, p(1, 0), true},
		{"home down: next port", p(1, 0), p(2, 0), Ports{N: 3, Up: 6}, p(3, 0), true},
		{"other port down: path bits", p(1, 0), p(1, 0), Ports{N: 2, Up: 1, LMC: []uint8{1, 0}}, p(1, 1), true},
		{"path bits wrap", p(1, 0), p(1, 3), Ports{N: 1, Up: 1, LMC: []uint8{2}}, p(1, 0), true},
		{"single port, no LMC", p(1, 0), p(1, 0), Ports{N: 1, Up: 1}, Path{}, false},
		{"everything down", p(1, 0), p(1, 0), Ports{N: 2, Up: 0}, Path{}, false},
	}
	for _, c := range cases {
		got, ok := Alternate(c.home, c.primary, c.ps)
		require.Equal(t, c.ok, ok, c.name)
		require.Equal(t, c.want, got, c.name)
	}
}

func TestGiveBack(t *testing.T) {
	h := Path{Port: 1}
	require.True(t, GiveBack(h, Path{Port: 2}, h, true))
	require.False(t, GiveBack(h, Path{Port: 2}, h, false), "not armed yet")
	require.False(t, GiveBack(h, h, Path{Port: 2}, true), "already home")
}
