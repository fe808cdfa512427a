package rma_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/internal/config"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
	"github.com/goarmci/goarmci/rma/transport"
)

// netTransport configures every rank of a job for GOARMCI_NET_TRANSPORT=mode.
func netTransport(mode string, ft bool) rmatest.Option {
	return rmatest.Configure(func(_ int, c *rma.Config) {
		c.NetworkTransport = mode
		c.NetworkDeviceFT = ft
	})
}

// The shared datagram path carries the whole fabric job — puts and gets to every peer,
// accumulates and gap-free fetch-and-add tickets at one rank, barriers, collectives and mutexes —
// over one DC queue pair per rank, with seeded loss, duplication and reordering on every link:
// every value is exact, so no write was lost and no atomic or accumulate applied twice. No rank
// holds an RC queue pair.
func TestSharedPathFabricJob(t *testing.T) {
	plans := map[string]fabric.Plan{
		"clean": {},
		"faults": {Seed: 0x5eed, Rules: []fabric.Rule{
			{Drop: 0.02, Duplicate: 0.02, Reorder: 0.03, ReorderBy: 200 * time.Microsecond}}},
	}
	for name, plan := range plans {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var fab *fabric.Fabric
				rmatest.RunFabric(t, 8, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
					fabricJob(ctx, t, rt)
					require.NoError(t, rt.Barrier(ctx))
					if rt.Rank() == 0 && len(plan.Rules) > 0 {
						var lost, dup int64
						for p := 0; p < 8; p++ {
							for q := 0; q < 8; q++ {
								if p != q {
									st := fab.Stats(p, q, 1)
									lost += int64(st.Lost)
									dup += int64(st.Delivered) - int64(st.Sent-st.Lost)
								}
							}
						}
						t.Logf("%d packets lost, %d duplicated (net of reordering)", lost, dup)
						require.Positive(t, lost, "the plan lost no packet")
						require.Positive(t, dup, "the plan duplicated no packet")
					}
					mem := rt.Memory()
					for _, k := range mem.Kinds {
						require.NotEqual(t, rma.MemRC, k.Kind, "rank %d holds RC connections on the shared path", rt.Rank())
					}
					require.Len(t, mem.Peers, rt.Size()-1)
					for _, p := range mem.Peers {
						require.Equal(t, rma.MemDC, p.Kind, "peer %d", p.Rank)
					}
				}, rmatest.Fabric(fabric.Config{Plan: plan}), rmatest.OnFabric(func(f *fabric.Fabric) { fab = f }),
					netTransport(rma.NetDC, name == "faults"))
			})
		})
	}
}

// Ranks that disagree on the network transport fail Init with ErrConfig on both sides.
func TestNetTransportMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		job := rmatest.FabricJob{Configure: func(i int, c *rma.Config) {
			if i == 1 {
				c.NetworkTransport = rma.NetDC
			}
		}}
		err := rmatest.StartFabricJob(context.Background(), 2, job, func(context.Context, *rma.Runtime) error { return nil })
		require.ErrorIs(t, err, rma.ErrConfig)
	})
}

// adaptiveEnv sets the adaptive selection's knobs for a test on virtual time: a short window
// and idle timeout, and the bound h.
func adaptiveEnv(t *testing.T, maxRC int) {
	t.Setenv("GOARMCI_RC_WINDOW", "10ms")
	t.Setenv("GOARMCI_RC_IDLE_TIMEOUT", "20ms")
	t.Setenv("GOARMCI_MAX_RC", fmt.Sprint(maxRC))
}

// Under the adaptive transport a peer that takes much traffic is promoted from the shared path
// to a dedicated RC connection while operations to it flow, and overlapping puts from one origin
// keep their order across the switch: rank 0 writes increasing values into one word of rank 1,
// alternating blocking and non-blocking puts, and every get between them sees the latest value
// (a put overtaken by an earlier one on the other path would show an older value or leave it at
// the end).
func TestAdaptivePromotesAndKeepsOrder(t *testing.T) {
	adaptiveEnv(t, 1)
	synctest.Test(t, func(t *testing.T) {
		rmatest.RunFabric(t, 4, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			seg, err := rt.Malloc(ctx, 8)
			require.NoError(t, err)
			clear(seg.Local())
			require.NoError(t, rt.Barrier(ctx))
			var last uint64
			if rt.Rank() == 0 {
				var onRC bool
				buf := make([]byte, 8)
				got := make([]byte, 8)
				deadline := time.Now().Add(60 * time.Millisecond)
				for i := uint64(1); time.Now().Before(deadline); i++ {
					binary.LittleEndian.PutUint64(buf, i)
					if i%3 == 0 {
						h, err := rt.NbPut(ctx, buf, seg, 1, 0)
						require.NoError(t, err)
						require.NoError(t, h.Wait(ctx))
					} else {
						require.NoError(t, rt.Put(ctx, buf, seg, 1, 0))
					}
					if i%16 == 0 {
						require.NoError(t, rt.Get(ctx, seg, 1, 0, got))
						require.Equal(t, i, binary.LittleEndian.Uint64(got), "get after put %d", i)
					}
					onRC = onRC || slices.Contains(rt.Adaptive().OnRC, 1)
					last = i
					time.Sleep(20 * time.Microsecond) // an application's compute between the puts
				}
				st := rt.Adaptive()
				t.Logf("rank 0: %d puts, adaptive %+v", last, st)
				require.True(t, onRC, "rank 1 was never promoted to RC")
				require.LessOrEqual(t, st.OpenRC, 1, "more RC connections than GOARMCI_MAX_RC")
				require.NoError(t, rt.Fence(ctx, 1))
				binary.LittleEndian.PutUint64(buf, last)
				require.NoError(t, rt.Put(ctx, buf, seg, 2, 0)) // tell rank 1 what to expect, through rank 2's word
			}
			require.NoError(t, rt.Barrier(ctx))
			if rt.Rank() == 1 {
				want := make([]byte, 8)
				require.NoError(t, rt.Get(ctx, seg, 2, 0, want))
				require.Equal(t, binary.LittleEndian.Uint64(want), binary.LittleEndian.Uint64(seg.Local()), "the last put is the value")
			}
			require.NoError(t, rt.Barrier(ctx))
			require.NoError(t, seg.Free(ctx))
		}, netTransport(rma.NetAdaptive, true))
	})
}

// The shared datagram path and the adaptive transport over the tcp provider (DC queue pairs
// over its streams; adaptive dials RC connections through the UD connection manager on UDP):
// the fabric job's exact values at 4 ranks.
func TestNetTransportsOverTCP(t *testing.T) {
	adaptiveEnv(t, 1)
	for _, mode := range []string{rma.NetDC, rma.NetAdaptive} {
		t.Run(mode, func(t *testing.T) {
			rmatest.Run(t, 4, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				fabricJob(ctx, t, rt)
				fabricJob(ctx, t, rt) // again: under adaptive, after the first evaluations
			}, rmatest.Transport(rma.TransportTCP), rmatest.Configure(func(_ int, c *rma.Config) { c.NetworkTransport = mode }))
		})
	}
}

// allToAllPhase has every rank put increasing values into its own word at every other rank, round
// robin, for d of virtual time, with compute between rounds; check runs after each round. It
// then writes its last value beside the running one (after a fence to each peer), and after a
// barrier every rank checks, for every origin, that the running word holds the last value: no
// put was overtaken by an earlier one across a path switch. Layout: 16 bytes per origin.
func allToAllPhase(ctx context.Context, t testing.TB, rt *rma.Runtime, d time.Duration, to func(round int) []int, check func()) {
	me := rt.Rank()
	seg, err := rt.Malloc(ctx, 16*rt.Size())
	require.NoError(t, err)
	clear(seg.Local())
	require.NoError(t, rt.Barrier(ctx))
	buf := make([]byte, 8)
	last := make([]uint64, rt.Size()) // the last value put to each rank
	deadline := time.Now().Add(d)
	for round := 0; time.Now().Before(deadline); round++ {
		for _, p := range to(round) {
			last[p] += uint64(1 + round%3)
			binary.LittleEndian.PutUint64(buf, last[p])
			require.NoError(t, rt.Put(ctx, buf, seg, p, 16*me))
		}
		check()
		time.Sleep(20 * time.Microsecond)
	}
	for p := 0; p < rt.Size(); p++ {
		if p != me {
			binary.LittleEndian.PutUint64(buf, last[p])
			require.NoError(t, rt.Fence(ctx, p))
			require.NoError(t, rt.Put(ctx, buf, seg, p, 16*me+8))
		}
	}
	require.NoError(t, rt.Barrier(ctx))
	loc := seg.Local()
	for p := 0; p < rt.Size(); p++ {
		if p == me {
			continue
		}
		run, fin := binary.LittleEndian.Uint64(loc[16*p:]), binary.LittleEndian.Uint64(loc[16*p+8:])
		require.Equal(t, fin, run, "rank %d: origin %d's last put", me, p)
	}
	require.NoError(t, seg.Free(ctx))
}

// others returns every rank but me.
func others(rt *rma.Runtime) []int {
	var out []int
	for p := 0; p < rt.Size(); p++ {
		if p != rt.Rank() {
			out = append(out, p)
		}
	}
	return out
}

// Under the adaptive transport with h = 2 on 6 ranks: during an all-to-all that would want every
// peer on RC no rank ever holds more than 2 RC connections (its own promotions and the dials it
// admitted); after a pause longer than the idle timeout every connection has been closed by
// agreement of both ends; then a phase where rank 0 sends to rank 1 alone promotes rank 1 again
// (a new connection dialled transparently). Every put's value is exact at the end of each phase.
func TestAdaptiveBoundEvictionRedial(t *testing.T) {
	adaptiveEnv(t, 2)
	synctest.Test(t, func(t *testing.T) {
		rmatest.RunFabric(t, 6, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			maxOpen := 0
			all := others(rt)
			allToAllPhase(ctx, t, rt, 60*time.Millisecond, func(int) []int { return all }, func() {
				maxOpen = max(maxOpen, rt.Adaptive().OpenRC)
			})
			st := rt.Adaptive()
			t.Logf("rank %d after all-to-all: %+v, most open %d", rt.Rank(), st, maxOpen)
			require.LessOrEqual(t, maxOpen, 2, "rank %d held more RC connections than GOARMCI_MAX_RC", rt.Rank())
			require.Positive(t, st.Promotions, "rank %d promoted no peer", rt.Rank())

			time.Sleep(100 * time.Millisecond) // idle: longer than GOARMCI_RC_IDLE_TIMEOUT plus an evaluation
			st = rt.Adaptive()
			t.Logf("rank %d after the pause: %+v", rt.Rank(), st)
			require.Zero(t, st.OpenRC, "rank %d: idle connections left open", rt.Rank())
			require.NoError(t, rt.Barrier(ctx))

			var onRC bool
			allToAllPhase(ctx, t, rt, 60*time.Millisecond, func(int) []int {
				if rt.Rank() == 0 {
					return []int{1}
				}
				return nil
			}, func() {
				onRC = onRC || slices.Contains(rt.Adaptive().OnRC, 1)
			})
			if rt.Rank() == 0 {
				require.True(t, onRC, "rank 1 not promoted again after its connection was closed")
			}
		}, netTransport(rma.NetAdaptive, true), rmatest.Timeout(5*time.Minute))
	})
}

// Under the adaptive transport with h = 1, traffic that moves from one peer to another moves the
// RC connection with it while operations to both keep flowing: rank 0 first sends mostly to
// rank 1, then mostly to rank 2 with a trickle to rank 1, so rank 1 is demoted (its connection
// closed to make room) and rank 2 promoted mid-traffic; the last value of every put sequence is
// exact at its target (allToAllPhase), across both switches.
func TestAdaptiveFollowsShiftingTraffic(t *testing.T) {
	adaptiveEnv(t, 1)
	synctest.Test(t, func(t *testing.T) {
		rmatest.RunFabric(t, 3, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			var on1, on2 bool
			sample := func() {
				st := rt.Adaptive()
				on1 = on1 || slices.Contains(st.OnRC, 1)
				on2 = on2 || slices.Contains(st.OnRC, 2)
			}
			phase := func(heavy, light int) func(int) []int {
				return func(round int) []int {
					switch {
					case rt.Rank() != 0:
						return nil
					case round%8 == 0:
						return []int{heavy, light}
					}
					return []int{heavy}
				}
			}
			allToAllPhase(ctx, t, rt, 60*time.Millisecond, phase(1, 2), sample)
			if rt.Rank() == 0 {
				require.True(t, on1, "rank 1 not promoted while it took most of the traffic")
			}
			on2 = false
			allToAllPhase(ctx, t, rt, 60*time.Millisecond, phase(2, 1), sample)
			if rt.Rank() == 0 {
				st := rt.Adaptive()
				t.Logf("rank 0: %+v", st)
				require.True(t, on2, "rank 2 not promoted when the traffic moved to it")
				require.LessOrEqual(t, st.OpenRC, 1)
				require.Positive(t, st.Demotions)
			}
		}, netTransport(rma.NetAdaptive, true))
	})
}

// The environment's defaults of the adaptive selection (internal/config's table, what Init
// reads) are the selection core's (transport.DefaultConfig).
func TestAdaptiveDefaultsAgree(t *testing.T) {
	c := config.Default()
	d := transport.DefaultConfig()
	require.Equal(t, d.MaxRC, c.MaxRC)
	require.Equal(t, d.Window, c.RCWindow)
	require.Equal(t, d.Gamma, c.RCGamma)
	require.Equal(t, d.IdleTimeout, c.RCIdleTimeout)
	require.Equal(t, rma.NetRC, c.NetTransport)
}
