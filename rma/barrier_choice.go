package rma

import (
	"fmt"
	"strings"
)

// barrierShape is what Init knows of the job when it chooses Barrier's algorithm; every rank
// computes the same shape (host ids, the barrier queue pairs and their multicast are agreed
// collectively at Init).
type barrierShape struct {
	ranks        int
	nodes        int  // distinct host ids
	ranksPerNode int  // the most ranks on one node
	networkAll   bool // GOARMCI_TRANSPORT=tcp: ranks of one node also reach each other over the network
	simulated    bool // the network device is Config.NetworkDevice's (the fabric model), not the tcp provider
	datagrams    bool // every rank has a UD barrier queue pair (BarrierMessage*, RGM's multicast)
	multicast    bool // the barrier queue pairs share a multicast group (Runtime.Multicast)
}

// Thresholds of the auto policy, from bench/README.md ("Barrier choice"): over the tcp provider
// the central datagram barrier leads from 4 to 8 ranks (fewest messages on a host with fewer
// cores than ranks) and pairwise exchange of datagrams at 2 and 3; on the fabric model pairwise
// exchange of datagrams leads up to 512 ranks, RGM's single multicast release from 1024.
const (
	autoCentralMin  = 4 // tcp: BarrierMessage for autoCentralMin..autoCentralMax ranks
	autoCentralMax  = 8
	autoRGMMinRanks = 1024 // RGM where the network carries multicast, from this many ranks
)

// chooseBarrier is GOARMCI_BARRIER=auto's policy, a pure function of the job's shape:
//   - every rank on one node over shared memory: dissemination (CPU atomics on mapped flag
//     words, ⌈log2 N⌉ rounds);
//   - several ranks on each of several nodes over shared memory within a node: hierarchical
//     (the node's ranks through shared memory, one rank per node over the network);
//   - otherwise, without a UD barrier queue pair on every rank: dissemination (RDMA);
//   - multicast and at least autoRGMMinRanks ranks: RGM [Kini03 §3.3];
//   - the tcp provider: the central message barrier for autoCentralMin..autoCentralMax ranks,
//     message-pairwise below and above (the central barrier's rank 0 serializes 2(N−1)
//     datagrams);
//   - the simulated fabric: message-pairwise.
func chooseBarrier(s barrierShape) BarrierAlg {
	n := s.ranks
	switch {
	case n <= 1, s.nodes <= 1 && !s.networkAll:
		return BarrierDissemination
	case s.ranksPerNode > 1 && !s.networkAll:
		return BarrierHierarchical
	case !s.datagrams:
		return BarrierDissemination
	case s.multicast && n >= autoRGMMinRanks:
		return BarrierRGM
	case !s.simulated && n >= autoCentralMin && n <= autoCentralMax:
		return BarrierMessage
	}
	return BarrierMessagePairwise
}

// leadersBarrier is BarrierHierarchical's algorithm among the nodes' leaders of a job of shape
// s: chooseBarrier's for one rank per node, message-pairwise where that is RGM (which has no
// form for a subset of the ranks).
func leadersBarrier(s barrierShape) BarrierAlg {
	s.ranks, s.ranksPerNode, s.networkAll = s.nodes, 1, false
	if a := chooseBarrier(s); a != BarrierRGM {
		return a
	}
	return BarrierMessagePairwise
}

// barrierAuto is GOARMCI_BARRIER's default.
const barrierAuto = "auto"

// parseBarrierAlg returns the algorithm named name (BarrierAlg.String), or ok false.
func parseBarrierAlg(name string) (BarrierAlg, bool) {
	name = strings.ToLower(strings.TrimSpace(name))
	for a := BarrierDissemination; a <= BarrierHierarchical; a++ {
		if a.String() == name {
			return a, true
		}
	}
	return 0, false
}

// checkBarrierName returns ErrConfig unless name is "auto" or an algorithm's name.
func checkBarrierName(name string) error {
	if _, ok := parseBarrierAlg(name); ok || name == barrierAuto {
		return nil
	}
	return fmt.Errorf("%w: GOARMCI_BARRIER (Config.Barrier) %q: want auto or a barrier algorithm", ErrConfig, name)
}

// chooseBarrierAlg sets the job's barrier algorithm at Init, after the barrier queue pairs are
// set up: Config.Barrier's, or chooseBarrier's for "auto" and for an algorithm this job cannot
// run (a datagram barrier without a network: a warning). hostIDs are every rank's host id.
func (r *Runtime) chooseBarrierAlg(hostIDs [][]byte) {
	name := r.cfg.Barrier
	r.node = newNodeLayout(hostIDs, r.rank)
	perNode := make(map[string]int)
	most := 0
	for _, id := range hostIDs {
		perNode[string(id)]++
		most = max(most, perNode[string(id)])
	}
	shape := barrierShape{ranks: r.size,
		nodes: len(perNode), ranksPerNode: most, networkAll: r.cfg.Transport == TransportTCP,
		simulated: r.cfg.NetworkDevice != nil, datagrams: r.bq != nil, multicast: r.Multicast(),
	}
	r.node.leaderAlg = leadersBarrier(shape)
	r.barrierAlg = chooseBarrier(shape)
	if name != barrierAuto {
		alg, _ := parseBarrierAlg(name) // checked by fillDefaults
		if err := r.checkBarrierAlg(alg); err != nil {
			r.log.Warn().Err(err).Stringer("barrier", r.barrierAlg).Msg("rma: GOARMCI_BARRIER names a barrier this job cannot run: auto's choice instead")
		} else {
			r.barrierAlg = alg
		}
	}
	r.log.Debug().Stringer("barrier", r.barrierAlg).Str("GOARMCI_BARRIER", name).Msg("rma: barrier algorithm")
}

// BarrierAlg returns the algorithm of Barrier (and of GA_Sync over it), chosen at Init from
// GOARMCI_BARRIER (Config.Barrier).
func (r *Runtime) BarrierAlg() BarrierAlg { return r.barrierAlg }
