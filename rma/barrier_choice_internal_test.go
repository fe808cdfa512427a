package rma

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goarmci/goarmci/internal/config"
)

// GOARMCI_BARRIER=auto's policy, shape by shape (barrier_choice.go).
func TestChooseBarrier(t *testing.T) {
	tcp := func(ranks, nodes int) barrierShape {
		return barrierShape{ranks: ranks, nodes: nodes, ranksPerNode: (ranks + nodes - 1) / nodes, datagrams: true}
	}
	forced := func(s barrierShape) barrierShape { s.networkAll = true; return s }
	sim := func(s barrierShape) barrierShape { s.simulated = true; return s }
	mc := func(s barrierShape) barrierShape { s.multicast = true; return s }
	noUD := func(s barrierShape) barrierShape { s.datagrams = false; return s }
	cases := []struct {
		name  string
		shape barrierShape
		want  BarrierAlg
	}{
		{"one rank", barrierShape{ranks: 1, nodes: 1, ranksPerNode: 1}, BarrierDissemination},
		{"one node, shm, 2", barrierShape{ranks: 2, nodes: 1, ranksPerNode: 2}, BarrierDissemination},
		{"one node, shm, 64", barrierShape{ranks: 64, nodes: 1, ranksPerNode: 64}, BarrierDissemination},
		{"one node, shm, multicast", mc(barrierShape{ranks: 2048, nodes: 1, ranksPerNode: 2048, datagrams: true}), BarrierDissemination},
		{"tcp forced on one node, 2", forced(tcp(2, 1)), BarrierMessagePairwise},
		{"tcp forced on one node, 4", forced(tcp(4, 1)), BarrierMessage},
		{"tcp forced on one node, 8", forced(tcp(8, 1)), BarrierMessage},
		{"tcp forced on one node, 9", forced(tcp(9, 1)), BarrierMessagePairwise},
		{"tcp, 2 nodes", tcp(2, 2), BarrierMessagePairwise},
		{"tcp, 3 nodes", tcp(3, 3), BarrierMessagePairwise},
		{"tcp, 4 nodes", tcp(4, 4), BarrierMessage},
		{"2 nodes of 2", tcp(4, 2), BarrierHierarchical},
		{"4 nodes of 4", tcp(16, 4), BarrierHierarchical},
		{"4 nodes of 4, no UD queue pair", noUD(tcp(16, 4)), BarrierHierarchical},
		{"64 nodes of 16, multicast", mc(tcp(1024, 64)), BarrierHierarchical},
		{"2 nodes of 2, tcp forced", forced(tcp(4, 2)), BarrierMessage},
		{"4 nodes of 4, tcp forced", forced(tcp(16, 4)), BarrierMessagePairwise},
		{"64 nodes of 16, tcp forced, multicast", forced(mc(tcp(1024, 64))), BarrierRGM},
		{"tcp, 100 nodes", tcp(100, 100), BarrierMessagePairwise},
		{"tcp, no UD queue pair", noUD(tcp(4, 4)), BarrierDissemination},
		{"multicast, 1023", mc(tcp(1023, 1023)), BarrierMessagePairwise},
		{"multicast, 1024", mc(tcp(1024, 1024)), BarrierRGM},
		{"multicast, no UD queue pair", noUD(mc(tcp(2048, 2048))), BarrierDissemination},
		{"fabric, 2", sim(tcp(2, 2)), BarrierMessagePairwise},
		{"fabric, 5", sim(tcp(5, 5)), BarrierMessagePairwise},
		{"fabric, 512, multicast", mc(sim(tcp(512, 512))), BarrierMessagePairwise},
		{"fabric, 1024, multicast", mc(sim(tcp(1024, 1024))), BarrierRGM},
		{"fabric, 1024, no multicast", sim(tcp(1024, 1024)), BarrierMessagePairwise},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, chooseBarrier(c.shape), "%s: %+v", c.name, c.shape)
	}
}

// Every value GOARMCI_BARRIER accepts is auto or an algorithm of this package, and every
// algorithm has a value.
func TestBarrierKnobNamesAlgorithms(t *testing.T) {
	seen := map[BarrierAlg]bool{}
	for _, v := range config.BarrierAlgs {
		assert.NoError(t, checkBarrierName(v), v)
		if a, ok := parseBarrierAlg(v); ok {
			seen[a] = true
		} else {
			assert.Equal(t, barrierAuto, v)
		}
	}
	for a := BarrierDissemination; a <= BarrierHierarchical; a++ {
		assert.True(t, seen[a], "%v has no GOARMCI_BARRIER value", a)
	}
	assert.ErrorIs(t, checkBarrierName("tournament"), ErrConfig)
	_, ok := parseBarrierAlg(fmt.Sprint(BarrierAlg(99)))
	assert.False(t, ok)
}

// newNodeLayout groups the ranks by host id, in rank order, and names each node's leader.
func TestNewNodeLayout(t *testing.T) {
	hosts := [][]byte{[]byte("b"), []byte("a"), []byte("b"), []byte("c"), []byte("a")}
	cases := []struct {
		rank int
		want nodeLayout
	}{
		{0, nodeLayout{members: []int{0, 2}, idx: 0, leaders: []int{0, 1, 3}, lidx: 0}},
		{1, nodeLayout{members: []int{1, 4}, idx: 0, leaders: []int{0, 1, 3}, lidx: 1}},
		{2, nodeLayout{members: []int{0, 2}, idx: 1, leaders: []int{0, 1, 3}, lidx: -1}},
		{3, nodeLayout{members: []int{3}, idx: 0, leaders: []int{0, 1, 3}, lidx: 2}},
		{4, nodeLayout{members: []int{1, 4}, idx: 1, leaders: []int{0, 1, 3}, lidx: -1}},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, newNodeLayout(hosts, c.rank), "rank %d", c.rank)
	}
}

// The hierarchical barrier's leaders run what auto would choose for one rank per node, never
// RGM (no form for a subset of the ranks).
func TestLeadersBarrier(t *testing.T) {
	shape := func(ranks, nodes int, simulated, datagrams, multicast bool) barrierShape {
		return barrierShape{ranks: ranks, nodes: nodes, ranksPerNode: (ranks + nodes - 1) / nodes,
			simulated: simulated, datagrams: datagrams, multicast: multicast}
	}
	cases := []struct {
		s    barrierShape
		want BarrierAlg
	}{
		{shape(8, 1, false, true, false), BarrierDissemination},
		{shape(4, 2, false, true, false), BarrierMessagePairwise},
		{shape(8, 4, false, true, false), BarrierMessage},
		{shape(64, 8, false, true, false), BarrierMessage},
		{shape(64, 16, false, true, false), BarrierMessagePairwise},
		{shape(64, 16, false, false, false), BarrierDissemination},
		{shape(1<<14, 2048, false, true, true), BarrierMessagePairwise},
		{shape(64, 16, true, true, true), BarrierMessagePairwise},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, leadersBarrier(c.s), "%+v", c.s)
	}
}
