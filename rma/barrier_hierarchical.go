package rma

import (
	"context"
	"fmt"
)

// BarrierHierarchical (barrier_algos.go) is the two-level barrier of a job with several ranks
// on each of several nodes (the shape of MVAPICH2's and Open MPI's hierarchical collectives):
// the ranks of a node gather at its leader (its lowest rank) up a tree of fan-in hierFanIn of
// flag writes over shared memory; the leaders, one per node, run a barrier among themselves over
// the network (the algorithm GOARMCI_BARRIER=auto would choose for a job of one rank per node:
// a datagram barrier, or RDMA dissemination without the barrier queue pairs); each leader then
// releases its node's ranks with one flag write each. A node's other ranks send nothing over the
// network, and the network barrier has one member per node rather than per rank.
//
// Flag words (system segment): hierChildSlot+c at a rank is written by its child c on the node,
// hierReleaseSlot by its node's leader, hierRoundSlot+k at a leader by the leader 2^k places
// before it: one writer each, so the barrier ids written into them only grow [Kini03 §4]. The
// leaders' datagram barriers use the words and datagram slots of BarrierMessage and
// BarrierMessagePairwise (barrier_rgm.go), whose receivers keep the highest id seen per slot.
const (
	hierFanIn       = 16
	hierChildSlot   = 64 // + child index 0..hierFanIn-1
	hierReleaseSlot = hierChildSlot + hierFanIn
	hierRoundSlot   = hierReleaseSlot + 1 // + round k among the leaders, k < 32
)

// nodeLayout is where this rank sits for BarrierHierarchical, from the host ids at Init.
type nodeLayout struct {
	members []int // the ranks of this rank's node, ascending; members[0] is the node's leader
	idx     int   // this rank's index in members
	leaders []int // every node's leader, ascending (leaders[0] is rank 0)
	lidx    int   // this rank's index in leaders; -1 unless it leads its node
	// leaderAlg is the leaders' barrier: dissemination, message or message-pairwise.
	leaderAlg BarrierAlg
}

// newNodeLayout places rank among the ranks of hostIDs (rank p on host hostIDs[p]).
func newNodeLayout(hostIDs [][]byte, rank int) nodeLayout {
	l := nodeLayout{lidx: -1}
	seen := make(map[string]bool)
	for p, id := range hostIDs {
		if string(id) == string(hostIDs[rank]) {
			if p == rank {
				l.idx = len(l.members)
			}
			l.members = append(l.members, p)
		}
		if !seen[string(id)] {
			seen[string(id)] = true
			if p == rank {
				l.lidx = len(l.leaders)
			}
			l.leaders = append(l.leaders, p)
		}
	}
	return l
}

// hierarchicalBarrier is BarrierHierarchical for barrier id.
func (r *Runtime) hierarchicalBarrier(ctx context.Context, id uint64) error {
	l := &r.node
	m, j := len(l.members), l.idx
	for c := 0; c < hierFanIn && hierFanIn*j+1+c < m; c++ {
		child := l.members[hierFanIn*j+1+c]
		if err := r.await(ctx, hierChildSlot+c, id, child); err != nil {
			return fmt.Errorf("rma: hierarchical barrier: waiting for rank %d: %w", child, err)
		}
	}
	if j > 0 {
		parent := l.members[(j-1)/hierFanIn]
		if err := r.signal(ctx, parent, hierChildSlot+(j-1)%hierFanIn, id); err != nil {
			return fmt.Errorf("rma: hierarchical barrier: report to rank %d: %w", parent, err)
		}
		if err := r.await(ctx, hierReleaseSlot, id, l.members[0]); err != nil {
			return fmt.Errorf("rma: hierarchical barrier: release by rank %d: %w", l.members[0], err)
		}
		return nil
	}
	var err error
	switch l.leaderAlg {
	case BarrierMessage:
		err = r.messageBarrier(ctx, id, l.leaders, l.lidx)
	case BarrierMessagePairwise:
		err = r.messagePairwiseBarrier(ctx, id, l.leaders, l.lidx)
	default:
		err = r.leadersDissemination(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("rma: hierarchical barrier: among the nodes' leaders: %w", err)
	}
	for _, p := range l.members[1:] {
		if err := r.signal(ctx, p, hierReleaseSlot, id); err != nil {
			return fmt.Errorf("rma: hierarchical barrier: release of rank %d: %w", p, err)
		}
	}
	return nil
}

// leadersDissemination is the dissemination barrier among the nodes' leaders, on flag words
// hierRoundSlot+k.
func (r *Runtime) leadersDissemination(ctx context.Context, id uint64) error {
	l := &r.node
	n, me := len(l.leaders), l.lidx
	for k, dist := 0, 1; dist < n; k, dist = k+1, dist*2 {
		to, from := l.leaders[(me+dist)%n], l.leaders[(me-dist+n)%n]
		if err := r.signal(ctx, to, hierRoundSlot+k, id); err != nil {
			return fmt.Errorf("round %d to rank %d: %w", k, to, err)
		}
		if err := r.await(ctx, hierRoundSlot+k, id, from); err != nil {
			return fmt.Errorf("round %d: waiting for rank %d: %w", k, from, err)
		}
	}
	return nil
}
