package rma

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// AllReduce runs by recursive doubling where more than two members and one of them is reached
// over the network, by the direct exchange among the ranks of one node over shared memory.
func TestReduceByDoubling(t *testing.T) {
	for _, c := range []struct {
		name      string
		transport Transport
		node      []int // the ranks on this rank's node
		size      int
		want      bool
	}{
		{"one node, shared memory", TransportAuto, []int{0, 1, 2, 3}, 4, false},
		{"one node, tcp", TransportTCP, []int{0, 1, 2, 3}, 4, true},
		{"two nodes", TransportAuto, []int{0, 1}, 4, true},
		{"three nodes of one rank", TransportAuto, []int{1}, 3, true},
		{"two ranks over the network", TransportTCP, []int{0, 1}, 2, false},
		{"one rank", TransportTCP, []int{0}, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Runtime{cfg: Config{Transport: c.transport}, node: nodeLayout{members: c.node}, size: c.size}
			require.Equal(t, c.want, r.reduceByDoubling(worldScratch{r}))
		})
	}
}
