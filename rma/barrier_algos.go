package rma

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/goarmci/goarmci/internal/accum"
)

// BarrierAlg selects the algorithm of BarrierWith [Kini03 §3].
type BarrierAlg int

const (
	// BarrierDissemination is RDMA dissemination ("RDS", [Kini03 §3.2]),
	// ⌈log2 N⌉ rounds for any N.
	BarrierDissemination BarrierAlg = iota
	// BarrierPairwise is RDMA pairwise exchange by recursive doubling ("RPE", [Kini03 §3.1], MPICH's
	// MPI_Barrier): log2 N rounds for a power of two, ⌊log2 N⌋+2 otherwise (the ranks beyond the
	// largest power of two first report to a partner below it and are released by it at the end).
	BarrierPairwise
	// BarrierGatherBroadcast is RDMA gather and a linear broadcast: arrivals are gathered up a
	// tree of fan-in 7 to rank 0, which then releases every rank with one write each (RGM's
	// gather [Kini03 §3.3] without its multicast; BarrierRGM has the multicast).
	BarrierGatherBroadcast
	// BarrierRGM is RDMA gather and multicast ("RGM", [Kini03 §3.3]): a gather tree of fan-in
	// GOARMCI_BARRIER_FANIN (default 7), then one UD multicast datagram from rank 0 releases
	// every rank, with NAKs for lost releases; without multicast on every rank (Multicast false)
	// the release goes down the tree by RDMA writes (barrier_rgm.go).
	BarrierRGM
	// BarrierMessage is the message-passing baseline: a central-coordinator barrier of two-sided
	// UD datagrams (every rank sends ARRIVE to rank 0 and waits for its RELEASE), with resends
	// and NAKs for lost datagrams. It needs a network device on every rank (ErrBadOp otherwise).
	BarrierMessage
	// BarrierMessagePairwise is the pairwise exchange of BarrierPairwise with two-sided UD
	// datagrams instead of RDMA ("MPI-PE", MPICH's barrier: [Kini03 §5]'s baseline), with
	// resends for lost datagrams; it needs a network device on every rank (barrier_rgm.go).
	BarrierMessagePairwise
	// BarrierHierarchical gathers the ranks of each node at its leader over shared memory, runs
	// RDMA dissemination among the nodes' leaders, and releases each node from its leader
	// (barrier_hierarchical.go): the choice for several ranks on each of several nodes.
	BarrierHierarchical
)

func (a BarrierAlg) String() string {
	switch a {
	case BarrierDissemination:
		return "dissemination"
	case BarrierPairwise:
		return "pairwise"
	case BarrierGatherBroadcast:
		return "gather-broadcast"
	case BarrierRGM:
		return "rgm"
	case BarrierMessage:
		return "message"
	case BarrierMessagePairwise:
		return "message-pairwise"
	case BarrierHierarchical:
		return "hierarchical"
	}
	return fmt.Sprintf("BarrierAlg(%d)", int(a))
}

// Flag words of the system segment used by the algorithms of this file. Barrier's dissemination
// uses words 0..⌈log2 N⌉-1; each word here has a single writer per job size, so the barrier ids
// written into it only grow [Kini03 §4] whatever algorithms are mixed.
const (
	pairwiseExtraSlot = 32 // written by rank me+P (an extra rank) to its partner me < N-P
	pairwiseRoundSlot = 33 // + round k, written by me XOR 2^k; also an extra rank's release, from me-P
	pairwiseMaxRounds = 14 // words 33..46
	gatherChildSlot   = 48 // + child index 0..6, written by that child
	gatherFanIn       = 7
	gatherReleaseSlot = 63 // written by rank 0
)

// BarrierWith synchronizes all ranks with the chosen algorithm (ARMCI_Barrier with a choice of
// [Kini03]'s algorithms, for the barrier benchmark): it first completes this rank's outstanding
// operations (AllFence). Every rank must pass the same alg. Errors: ErrBadOp for an unknown
// algorithm, a datagram barrier without a network device on every rank, or a job too large
// for pairwise exchange (more than 2^14 ranks), ctx's, transport errors.
func (r *Runtime) BarrierWith(ctx context.Context, alg BarrierAlg) error {
	if err := r.checkBarrierAlg(alg); err != nil {
		return err
	}
	if err := r.AllFence(ctx); err != nil {
		return err
	}
	return r.barrierOf(ctx, alg)
}

// checkBarrierAlg returns ErrBadOp when this job cannot run alg.
func (r *Runtime) checkBarrierAlg(alg BarrierAlg) error {
	switch alg {
	case BarrierDissemination, BarrierPairwise, BarrierGatherBroadcast, BarrierRGM, BarrierHierarchical:
	case BarrierMessage, BarrierMessagePairwise:
		if r.bq == nil && r.size > 1 {
			return fmt.Errorf("%w: %v barrier: %w", ErrBadOp, alg, errNoBarrierQP)
		}
	default:
		return fmt.Errorf("%w: barrier algorithm %v", ErrBadOp, alg)
	}
	if (alg == BarrierPairwise || alg == BarrierMessagePairwise) && r.size > 1<<pairwiseMaxRounds {
		return fmt.Errorf("%w: pairwise barrier of %d ranks (at most %d)", ErrBadOp, r.size, 1<<pairwiseMaxRounds)
	}
	return nil
}

// await polls this rank's flag word slot until it holds id or more, written by rank from (probed
// while the wait is long: pollUntilProbe), or until some rank is declared failed (ErrPeerFailed:
// a barrier needs every rank).
//
// The spin of pollUntilProbe runs here, on the word itself (no closure to build and call per
// poll): on one node the flag arrives one cache-line transfer after the peer's swap, usually
// within the spin, and then the wait costs no allocation. The yields and sleeps follow as in
// pollUntilProbe.
func (r *Runtime) await(ctx context.Context, slot int, id uint64, from int) error {
	w := r.sys.local[8*slot : 8*slot+8]
	cond := func() bool {
		v, _ := accum.Load64(w)
		return v >= id || r.anyFailedErr() != nil
	}
	var err error
	if r.stats { // pollUntilProbe times the whole wait, spin included
		err = r.pollUntilProbe(ctx, cond, r.liveness(ctx, from))
	} else {
		for i := 0; i < r.spin && !r.fail.any.Load(); i++ {
			if v, _ := accum.Load64(w); v >= id {
				return nil
			}
		}
		// called directly, not through a func value: the closures then stay on the stack
		err = r.yieldUntil(ctx, cond, r.liveness(ctx, from))
	}
	if v, _ := accum.Load64(w); err == nil && v < id {
		err = r.anyFailedErr() // a barrier needs every rank: it cannot complete now
	}
	return err
}

func (r *Runtime) pairwiseBarrier(ctx context.Context, id uint64) error {
	n, me := r.size, r.rank
	p := 1 << (bits.Len(uint(n)) - 1) // largest power of two ≤ n
	if me >= p {
		// Extra rank: report to me-p, wait for its release.
		if err := r.signal(ctx, me-p, pairwiseExtraSlot, id); err != nil {
			return fmt.Errorf("rma: pairwise barrier: %w", err)
		}
		return r.await(ctx, pairwiseRoundSlot, id, me-p)
	}
	if me < n-p {
		if err := r.await(ctx, pairwiseExtraSlot, id, me+p); err != nil {
			return err
		}
	}
	for k := 0; 1<<k < p; k++ {
		partner := me ^ (1 << k)
		if err := r.signal(ctx, partner, pairwiseRoundSlot+k, id); err != nil {
			return fmt.Errorf("rma: pairwise barrier round %d to rank %d: %w", k, partner, err)
		}
		if err := r.await(ctx, pairwiseRoundSlot+k, id, partner); err != nil {
			return fmt.Errorf("rma: pairwise barrier round %d: waiting for rank %d: %w", k, partner, err)
		}
	}
	if me < n-p {
		if err := r.signal(ctx, me+p, pairwiseRoundSlot, id); err != nil {
			return fmt.Errorf("rma: pairwise barrier release of rank %d: %w", me+p, err)
		}
	}
	return nil
}

func (r *Runtime) gatherBarrier(ctx context.Context, id uint64) error {
	n, me := r.size, r.rank
	// Gather: wait for my children 7me+1..7me+7, then report to my parent.
	for c := 0; c < gatherFanIn; c++ {
		if gatherFanIn*me+1+c >= n {
			break
		}
		if err := r.await(ctx, gatherChildSlot+c, id, gatherFanIn*me+1+c); err != nil {
			return fmt.Errorf("rma: gather barrier: waiting for rank %d: %w", gatherFanIn*me+1+c, err)
		}
	}
	if me != 0 {
		parent, idx := (me-1)/gatherFanIn, (me-1)%gatherFanIn
		if err := r.signal(ctx, parent, gatherChildSlot+idx, id); err != nil {
			return fmt.Errorf("rma: gather barrier: report to rank %d: %w", parent, err)
		}
		return r.await(ctx, gatherReleaseSlot, id, 0)
	}
	// Broadcast: rank 0 releases every rank.
	for p := 1; p < n; p++ {
		if err := r.signal(ctx, p, gatherReleaseSlot, id); err != nil {
			return fmt.Errorf("rma: gather barrier: release of rank %d: %w", p, err)
		}
	}
	return nil
}
