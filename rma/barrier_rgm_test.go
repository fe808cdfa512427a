package rma_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

var everyBarrier = []rma.BarrierAlg{rma.BarrierDissemination, rma.BarrierPairwise, rma.BarrierGatherBroadcast,
	rma.BarrierRGM, rma.BarrierMessage, rma.BarrierMessagePairwise, rma.BarrierHierarchical}

// barrierRounds runs rounds barriers of every algorithm in turn: before barrier e every rank
// puts e into its word of array e%2 at rank 0, after it every rank reads that array back, and
// every word must be at least e — no rank has left before all arrived. (Two arrays: the reads
// after barrier e end before anyone passes barrier e+1 and writes that array again.) It returns
// this rank's NAKs.
func barrierRounds(ctx context.Context, t testing.TB, rt *rma.Runtime, algs []rma.BarrierAlg, rounds int) uint64 {
	n := rt.Size()
	seg, err := rt.Malloc(ctx, 16*n)
	require.NoError(t, err)
	clear(seg.Local())
	require.NoError(t, rt.Barrier(ctx))
	var b [8]byte
	all := make([]byte, 8*n)
	for e := 1; e <= rounds; e++ {
		alg := algs[e%len(algs)]
		binary.LittleEndian.PutUint64(b[:], uint64(e))
		base := 8 * n * (e % 2)
		require.NoError(t, rt.Put(ctx, b[:], seg, 0, base+8*rt.Rank()))
		require.NoError(t, rt.BarrierWith(ctx, alg), "%v barrier %d", alg, e)
		require.NoError(t, rt.Get(ctx, seg, 0, base, all))
		for p := 0; p < n; p++ {
			if v := binary.LittleEndian.Uint64(all[8*p:]); v < uint64(e) {
				t.Fatalf("rank %d left %v barrier %d of %d ranks before rank %d arrived (its epoch %d)", rt.Rank(), alg, e, n, p, v)
			}
		}
	}
	require.NoError(t, rt.Barrier(ctx))
	require.NoError(t, seg.Free(ctx))
	return rt.BarrierNAKs()
}

// Every algorithm holds every rank, at sizes of powers of two and others, on a lossless fabric
// and with 2 % of the packets lost on every link (multicast copies included: RGM's NAKs recover
// the lost releases).
func TestBarrierAlgorithmsFabric(t *testing.T) {
	sizes := []int{1, 2, 3, 5, 8, 13, 16, 24}
	if !testing.Short() {
		sizes = append(sizes, 57, 64)
	}
	for _, loss := range []float64{0, 0.02} {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("loss%v/%d", loss, n), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var naks atomic.Uint64
					var mc atomic.Bool
					rmatest.RunFabric(t, n, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
						mc.Store(rt.Multicast())
						naks.Add(barrierRounds(ctx, t, rt, everyBarrier, 3*len(everyBarrier)))
					}, rmatest.Fabric(fabric.Config{Plan: fabric.Plan{Seed: uint64(n), Rules: []fabric.Rule{{Drop: loss}}}}))
					if n > 1 {
						assert.True(t, mc.Load(), "the fabric carries multicast")
					}
					t.Logf("%d ranks, loss %v: %d NAKs", n, loss, naks.Load())
				})
			})
		}
	}
}

// Many ranks (not in -short): 127, 128, 129 and 257 ranks, with loss.
func TestBarrierAlgorithmsFabricLarge(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("large fabric jobs: not in -short, nor under the race detector")
	}
	for _, n := range []int{129, 257} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rmatest.RunFabric(t, n, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
					barrierRounds(ctx, t, rt, everyBarrier, len(everyBarrier))
				}, rmatest.Timeout(20*time.Minute),
					rmatest.Fabric(fabric.Config{Plan: fabric.Plan{Seed: 7, Rules: []fabric.Rule{{Drop: 0.01}}}}))
			})
		})
	}
}

// NAK recovery: a quarter of the packets from rank 0, the root, are lost — multicast release
// copies among them (and RC packets, which the RC retransmissions recover); the ranks that miss
// a release get it by NAK.
func TestRGMReleaseLossNAK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var naks atomic.Uint64
		rmatest.RunFabric(t, 9, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			require.True(t, rt.Multicast())
			naks.Add(barrierRounds(ctx, t, rt, []rma.BarrierAlg{rma.BarrierRGM}, 10))
		}, rmatest.Fabric(fabric.Config{Plan: fabric.Plan{Seed: 3, Rules: []fabric.Rule{{Src: []int{0}, Drop: 0.25}}}}))
		assert.NotZero(t, naks.Load(), "lost releases were asked for again")
		t.Logf("NAKs: %d", naks.Load())
	})
}

// A fan-in from GOARMCI_BARRIER_FANIN changes the tree, not the outcome.
func TestRGMFanIn(t *testing.T) {
	for _, k := range []string{"2", "15"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv("GOARMCI_BARRIER_FANIN", k)
			synctest.Test(t, func(t *testing.T) {
				rmatest.RunFabric(t, 20, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
					barrierRounds(ctx, t, rt, []rma.BarrierAlg{rma.BarrierRGM}, 5)
				})
			})
		})
	}
}

// Without multicast (shared memory: ranks of one node) RGM releases down the tree and says so;
// the message barrier needs a network device.
func TestRGMFallbackWithoutMulticast(t *testing.T) {
	rmatest.Run(t, 6, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		assert.False(t, rt.Multicast())
		barrierRounds(ctx, t, rt, []rma.BarrierAlg{rma.BarrierRGM, rma.BarrierDissemination}, 6)
		assert.ErrorIs(t, rt.BarrierWith(ctx, rma.BarrierMessage), rma.ErrBadOp)
	})
	rmatest.Run(t, 4, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		assert.False(t, rt.Multicast(), "tcp has no multicast")
		barrierRounds(ctx, t, rt, []rma.BarrierAlg{rma.BarrierRGM, rma.BarrierMessage}, 6)
	}, rmatest.Transport(rma.TransportTCP))
}

// A rank cut off from the others (every packet to and from it lost from 1 s on): every
// algorithm's barrier ends on the other ranks with ErrPartition (the hybridft manager, run on the
// fabric device by rma.Config.NetworkDeviceFT as it runs over the tcp provider, found no path to
// the rank for the partition timeout) or ErrPeerFailed, never with a bare transport error nor by
// waiting forever; then the cut-off rank is declared failed (the in-process bootstrap stands for
// the rendezvous, which would declare it after the failure timeout) and every rank learns it.
func TestBarriersCutOffRank(t *testing.T) {
	t.Setenv("GOARMCI_PARTITION_TIMEOUT", "2s")
	for _, alg := range everyBarrier {
		t.Run(alg.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n, cut = 6, 4
				var g *rmatest.Group
				rmatest.RunFabric(t, n, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
					require.NoError(t, rt.BarrierWith(ctx, alg))
					time.Sleep(2 * time.Second) // the cut is in place
					if rt.Rank() != cut {
						err := rt.BarrierWith(ctx, alg)
						require.Error(t, err)
						assert.True(t, errors.Is(err, rma.ErrPartition) || errors.Is(err, rma.ErrPeerFailed), "%v", err)
						if rt.Rank() == 0 {
							t.Logf("%v: %v", alg, err)
						}
						g.Fail(cut, nil)
					}
					// Finalize once this rank's runtime knows (its barrier then ends with
					// ErrPeerFailed, which the harness expects)
					for !slices.Contains(rt.FailedRanks(), cut) {
						time.Sleep(10 * time.Millisecond)
					}
				}, rmatest.UseGroup(func(gr *rmatest.Group) { g = gr }), rmatest.Timeout(5*time.Minute),
					rmatest.Configure(func(_ int, c *rma.Config) { c.NetworkDeviceFT = true }), rmatest.Fabric(fabric.Config{Plan: fabric.Plan{Rules: []fabric.Rule{
						{Src: []int{cut}, Down: true, From: time.Second}, {Dst: []int{cut}, Down: true, From: time.Second}}}}))
			})
		})
	}
}

// Barrier latency per algorithm on the fabric, in virtual time (not in -short): every link
// has a one-way latency of 2 µs (a Plan delay), ranks poll as on a simulated network (they back
// off to sleeps, 20 µs doubling to 1 ms, which quantizes the figures). The log has one line per
// size; these figures chose Barrier's algorithm by size (sync.go).
func TestBarrierLatencyFabric(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("latency figures: not in -short, nor under the race detector")
	}
	const iters = 20
	for _, n := range []int{8, 16, 24, 64, 128} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				res := make([]time.Duration, len(everyBarrier))
				rmatest.RunFabric(t, n, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
					for i, alg := range everyBarrier {
						for range 3 {
							require.NoError(t, rt.BarrierWith(ctx, alg))
						}
						t0 := time.Now()
						for range iters {
							require.NoError(t, rt.BarrierWith(ctx, alg))
						}
						if rt.Rank() == 0 {
							res[i] = time.Since(t0) / iters
						}
						require.NoError(t, rt.BarrierWith(ctx, rma.BarrierDissemination))
					}
				}, rmatest.Timeout(30*time.Minute),
					rmatest.Fabric(fabric.Config{Plan: fabric.Plan{Rules: []fabric.Rule{{Delay: 2 * time.Microsecond}}}}))
				line := fmt.Sprintf("%4d ranks:", n)
				for i, alg := range everyBarrier {
					line += fmt.Sprintf(" %s %v", alg, res[i])
				}
				t.Log(line)
			})
		})
	}
}
