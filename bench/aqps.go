package bench

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/goarmci/goarmci/rma"
)

// AQPSRankResult is what one rank measured of [Takagi15 §4.3]'s patterns (AQPSRank): its time per
// put in onetoall (rank 0 only; 0 elsewhere) and in alltoone (ranks other than 0; 0 at rank 0), the
// execution time of repeat, and its segment's slots after the job (slot r: the last value rank r
// put here, 0 for none).
type AQPSRankResult struct {
	OneToAll, AllToOne time.Duration
	Repeat             time.Duration
	Slots              []uint64
}

// AQPSRank runs [Takagi15 §4.3]'s three micro-benchmarks on this rank of rt's job (collective: every
// rank calls it): onetoall (rank 0 puts messages times to each of ranks 1..n-1 in turn), alltoone
// (ranks 1..n-1 put messages times each to rank 0, all at once) and repeat (both, aqpsRepeat
// times), a message being a blocking 8-byte rma.Put of a value aqpsValue names, with a barrier
// before each phase and one untimed put per pair and pattern first (the peers connected). It runs
// on the simulated fabric (AQPSSim) and in a real job (goarmci run) alike; the transport of the
// network peers is the job's (GOARMCI_NET_TRANSPORT). Errors: those of rma's calls; the segment is
// freed on success.
func AQPSRank(ctx context.Context, rt *rma.Runtime, messages int) (AQPSRankResult, error) {
	n := rt.Size()
	seg, err := rt.Malloc(ctx, 8*n)
	if err != nil {
		return AQPSRankResult{}, err
	}
	me := rt.Rank()
	var buf [8]byte
	// phase puts this rank's messages of one phase; its time per message
	phase := func(round, p, messages int) (time.Duration, error) {
		if err := rt.Barrier(ctx); err != nil {
			return 0, err
		}
		puts := 0
		switch {
		case p == 0 && me == 0:
			puts = messages * (n - 1)
		case p == 1 && me != 0:
			puts = messages
		default:
			return 0, nil
		}
		t0 := time.Now()
		for i := range puts {
			target := 0
			if p == 0 {
				target = aqpsOneToAllTarget(n, i)
			}
			binary.LittleEndian.PutUint64(buf[:], aqpsValue(round, p, i))
			if err := rt.Put(ctx, buf[:], seg, target, 8*me); err != nil {
				return 0, err
			}
		}
		return time.Since(t0) / time.Duration(puts), nil
	}
	// warm-up: every pair of the patterns connected, untimed
	for p := range 2 {
		if _, err := phase(0, p, 1); err != nil {
			return AQPSRankResult{}, err
		}
	}
	var res AQPSRankResult
	for p, d := range []*time.Duration{&res.OneToAll, &res.AllToOne} {
		if *d, err = phase(0, p, messages); err != nil {
			return AQPSRankResult{}, err
		}
	}
	if err := rt.Barrier(ctx); err != nil {
		return AQPSRankResult{}, err
	}
	t0 := time.Now()
	for round := 1; round <= aqpsRepeat; round++ {
		for p := range 2 {
			if _, err := phase(round, p, messages); err != nil {
				return AQPSRankResult{}, err
			}
		}
	}
	if err := rt.Barrier(ctx); err != nil {
		return AQPSRankResult{}, err
	}
	res.Repeat = time.Since(t0)
	res.Slots = make([]uint64, n)
	for r := range n {
		res.Slots[r] = binary.LittleEndian.Uint64(seg.Local()[8*r:])
	}
	return res, seg.Free(ctx)
}

// aqpsRepeat is the number of onetoall+alltoone rounds of repeat [Takagi15 §4.3].
const aqpsRepeat = 5

// aqpsValue is the value a put of rank origin carries: the round (1-based), the phase (0
// onetoall, 1 alltoone) and the message index.
func aqpsValue(round, phase, i int) uint64 {
	return uint64(round)<<40 | uint64(phase)<<32 | uint64(i+1)
}

// aqpsOneToAllTarget is the target of rank 0's i-th put in onetoall.
func aqpsOneToAllTarget(n, i int) int { return 1 + i%(n-1) }
