package rma_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// Jobs on the in-process fabric (ibv/fabric) under testing/synctest: every rank is a goroutine
// with its own runtime over its own fabric node, every peer a network peer, and every wait —
// ACK timeouts, retransmissions, the runtime's backed-off polls — passes in virtual time. The
// checks are exact values, never times.

// Layout of fabricJob's segment (bytes): n blocks of fabBlock (block p is what rank p put here),
// then accumulate target, counter, the barrier loop's two slots, and the ticket table (one
// 8-byte slot per ticket the counter hands out).
const (
	fabBlock   = 64
	fabAccLen  = 4 // int64 elements accumulated into rank 0
	fabTickets = 3 // fetch-and-adds per rank
	fabRounds  = 8 // barrier loop rounds
)

type fabLayout struct{ acc, counter, slots, tickets, total int }

func fabLayoutOf(n int) fabLayout {
	var l fabLayout
	l.acc = n * fabBlock
	l.counter = l.acc + 8*fabAccLen
	l.slots = l.counter + 8
	l.tickets = l.slots + 16
	l.total = l.tickets + 8*n*fabTickets
	return l
}

// fabPattern is byte k of the block rank p puts at rank q.
func fabPattern(p, q, k int) byte { return byte(p*7 + q*13 + k + 1) }

// fabricJob runs on every rank: Put of a pattern into every other rank, Get of them back, an
// accumulate of every rank into rank 0, a fetch-and-add counter at the last rank whose tickets
// are gap-free, barriers in a loop that pass a value around the ring, AllReduce and Broadcast,
// and a mutex-guarded read-increment-write that loses no increment.
func fabricJob(ctx context.Context, t testing.TB, rt *rma.Runtime) {
	n, me := rt.Size(), rt.Rank()
	l := fabLayoutOf(n)
	seg, err := rt.Malloc(ctx, l.total)
	require.NoError(t, err)
	clear(seg.Local())
	require.NoError(t, rt.Barrier(ctx))

	// Put: my pattern into block me of every other rank.
	blk := make([]byte, fabBlock)
	for d := 1; d < n; d++ {
		q := (me + d) % n
		for k := range blk {
			blk[k] = fabPattern(me, q, k)
		}
		require.NoError(t, rt.Put(ctx, blk, seg, q, me*fabBlock))
	}
	require.NoError(t, rt.Barrier(ctx))
	for p := 0; p < n; p++ {
		if p == me {
			continue
		}
		for k := 0; k < fabBlock; k++ {
			if got := seg.Local()[p*fabBlock+k]; got != fabPattern(p, me, k) {
				t.Fatalf("block of rank %d byte %d: %d, want %d", p, k, got, fabPattern(p, me, k))
			}
		}
	}
	// Get: read back what I put at every other rank.
	for d := 1; d < n; d++ {
		q := (me + n - d) % n
		require.NoError(t, rt.Get(ctx, seg, q, me*fabBlock, blk))
		for k := range blk {
			if blk[k] != fabPattern(me, q, k) {
				t.Fatalf("get from rank %d byte %d: %d, want %d", q, k, blk[k], fabPattern(me, q, k))
			}
		}
	}

	// Acc: every rank adds (me+1)·(i+1), scaled by 2, into element i at rank 0.
	src := make([]byte, 8*fabAccLen)
	for i := 0; i < fabAccLen; i++ {
		binary.LittleEndian.PutUint64(src[8*i:], uint64((me+1)*(i+1)))
	}
	require.NoError(t, rt.Acc(ctx, rma.AccInt64, 2, src, seg, 0, l.acc))

	// Rmw: fabTickets fetch-and-adds each on the counter at the last rank; each ticket marks
	// its slot of the table at rank 0 with me+1.
	for range fabTickets {
		v, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, n-1, l.counter, 1)
		require.NoError(t, err)
		require.True(t, v >= 0 && v < int64(n*fabTickets), "ticket %d of %d", v, n*fabTickets)
		var mark [8]byte
		binary.LittleEndian.PutUint64(mark[:], uint64(me+1))
		require.NoError(t, rt.Put(ctx, mark[:], seg, 0, l.tickets+8*int(v)))
	}
	require.NoError(t, rt.Barrier(ctx))
	if me == 0 {
		for i := 0; i < fabAccLen; i++ {
			got := int64(binary.LittleEndian.Uint64(seg.Local()[l.acc+8*i:]))
			want := int64(2 * (i + 1) * n * (n + 1) / 2)
			require.Equal(t, want, got, "accumulated element %d", i)
		}
		per := make([]int, n)
		for v := 0; v < n*fabTickets; v++ {
			m := int(binary.LittleEndian.Uint64(seg.Local()[l.tickets+8*v:]))
			require.True(t, m >= 1 && m <= n, "ticket %d not handed out (mark %d)", v, m)
			per[m-1]++
		}
		for p, c := range per {
			require.Equal(t, fabTickets, c, "tickets of rank %d", p)
		}
	}
	if me == n-1 {
		require.Equal(t, uint64(n*fabTickets), binary.LittleEndian.Uint64(seg.Local()[l.counter:]), "counter")
	}

	// Barriers in a loop: round i puts i+1 into slot i%2 of the next rank; after the barrier my
	// slot i%2 holds i+1 from the previous rank. Round i+2 reuses the slot only after round
	// i+1's barrier, which the next rank enters after reading round i's value.
	prev := (me + n - 1) % n
	for i := range fabRounds {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(i+1))
		require.NoError(t, rt.Put(ctx, b[:], seg, (me+1)%n, l.slots+8*(i%2)))
		require.NoError(t, rt.Barrier(ctx))
		got := binary.LittleEndian.Uint64(seg.Local()[l.slots+8*(i%2):])
		require.Equal(t, uint64(i+1), got, "round %d: slot from rank %d", i, prev)
	}

	// Collectives: a sum and a max over every rank, a broadcast from the middle rank.
	red := make([]byte, 16)
	binary.LittleEndian.PutUint64(red, uint64(me+1))
	binary.LittleEndian.PutUint64(red[8:], uint64(3*me))
	require.NoError(t, rt.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, red[:8]))
	require.NoError(t, rt.AllReduce(ctx, rma.AccInt64, rma.ReduceMax, red[8:]))
	require.Equal(t, uint64(n*(n+1)/2), binary.LittleEndian.Uint64(red), "sum")
	require.Equal(t, uint64(3*(n-1)), binary.LittleEndian.Uint64(red[8:]), "max")
	bc := make([]byte, 24)
	if me == n/2 {
		copy(bc, "broadcast from the midd")
	}
	require.NoError(t, rt.Broadcast(ctx, n/2, bc))
	require.Equal(t, "broadcast from the midd", string(bc[:23]))

	// A mutex at rank 0 guards a Get, increment, Put of the counter slot at rank 1: no
	// increment is lost.
	require.NoError(t, rt.CreateMutexes(ctx, 1))
	require.NoError(t, rt.Lock(ctx, 0, 0))
	var c [8]byte
	require.NoError(t, rt.Get(ctx, seg, 1%n, l.counter, c[:]))
	binary.LittleEndian.PutUint64(c[:], binary.LittleEndian.Uint64(c[:])+1)
	require.NoError(t, rt.Put(ctx, c[:], seg, 1%n, l.counter))
	require.NoError(t, rt.Unlock(ctx, 0, 0))
	require.NoError(t, rt.Barrier(ctx))
	if me == 1%n {
		want := uint64(n)
		if n == 2 { // rank 1 is also the fetch-and-add counter's rank (n-1)
			want += uint64(n * fabTickets)
		}
		require.Equal(t, want, binary.LittleEndian.Uint64(seg.Local()[l.counter:]), "mutex-guarded counter")
	}
	require.NoError(t, rt.DestroyMutexes(ctx))
	require.NoError(t, seg.Free(ctx))
}

func TestFabricJob16(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rmatest.RunFabric(t, 16, fabricJob)
	})
}

// Two rails: every peer's channel stripes over both ports of the fabric.
func TestFabricJobTwoRails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rmatest.RunFabric(t, 8, fabricJob, rmatest.Fabric(fabric.Config{Ports: 2}))
	})
}

// A seeded plan loses 1 % of the packets on every link: the RC retransmissions (on virtual time)
// hide every loss, and the values are exact.
func TestFabricJobLoss(t *testing.T) {
	for _, seed := range []uint64{1, 0x5eed} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var fab *fabric.Fabric
				rmatest.RunFabric(t, 16, fabricJob,
					rmatest.Fabric(fabric.Config{Plan: fabric.Plan{Seed: seed, Rules: []fabric.Rule{{Drop: 0.01}}}}),
					rmatest.OnFabric(func(f *fabric.Fabric) { fab = f }))
				var lost uint64
				for p := 0; p < 16; p++ {
					_, _, l := fab.PortStats(p, 1)
					lost += l
				}
				require.NotZero(t, lost, "the plan lost no packet")
				t.Logf("packets lost: %d", lost)
			})
		})
	}
}

// Large jobs on the fabric (not in -short): the same job at 64, 128 and 256 ranks, with the
// wall time and the heap after the job in the log.
func TestFabricJobLarge(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("large fabric jobs: not in -short, nor under the race detector (tens of thousands of goroutines)")
	}
	for _, n := range []int{64, 128, 256} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			start := time.Now()
			var peak runtime.MemStats
			var gs int
			var mem rma.MemoryStats
			synctest.Test(t, func(t *testing.T) {
				rmatest.RunFabric(t, n, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
					fabricJob(ctx, t, rt)
					if rt.Rank() == 0 {
						runtime.ReadMemStats(&peak)
						gs = runtime.NumGoroutine()
						mem = rt.Memory()
					}
				}, rmatest.Timeout(10*time.Minute))
			})
			t.Logf("%d ranks: %v wall, heap in use at the end of rank 0's body %d MiB, "+
				"stacks %d MiB, sys %d MiB, goroutines then %d",
				n, time.Since(start).Round(time.Millisecond), peak.HeapInuse>>20, peak.StackInuse>>20, peak.Sys>>20, gs)
			for _, k := range mem.Kinds {
				t.Logf("%d ranks: rank 0 accounts %d %s, %s (%s each)", n, k.Count, k.Kind, rma.MemorySize(k.Bytes),
					rma.MemorySize(k.Bytes/int64(k.Count)))
			}
			require.Len(t, mem.Peers, n-1, "rank 0 is connected to every other rank")
		})
	}
}

// TestCancelledPutKeepsBufferContract: a blocking 8 MiB Put over a slow fabric link whose
// context ends mid-transfer returns the context's error (not ErrTransport) only once the
// runtime is done reading src: src is scribbled right after the return, and the target then
// holds either nothing of the scribble, i.e. only the original pattern or zeros.
func TestCancelledPutKeepsBufferContract(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size = 8 << 20
		rmatest.RunFabric(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			seg, err := rt.Malloc(ctx, size)
			require.NoError(t, err)
			if rt.Rank() == 0 {
				src := make([]byte, size)
				for i := range src {
					src[i] = byte(i%200) + 1 // 1..200: never 0xEE, never 0
				}
				cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				err := rt.Put(cctx, src, seg, 1, 0)
				cancel()
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.NotErrorIs(t, err, rma.ErrTransport)
				for i := range src {
					src[i] = 0xEE // the runtime no longer reads src: none of this may arrive
				}
				require.NoError(t, rt.Fence(ctx, 1))
			}
			require.NoError(t, rt.Barrier(ctx))
			if rt.Rank() == 1 {
				for i, b := range seg.Local() {
					if b == 0xEE {
						t.Fatalf("byte %d of the target came from src after Put returned", i)
					}
				}
			}
			require.NoError(t, rt.Barrier(ctx))
			require.NoError(t, seg.Free(ctx))
		}, rmatest.Fabric(fabric.Config{Plan: fabric.Plan{Rules: []fabric.Rule{{Delay: 2 * time.Millisecond}}}}))
	})
}
