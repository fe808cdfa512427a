package rma_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// groupShapes are member lists of a job of np ranks: the evens, every rank in reverse order, the
// last rank alone, and the odds after the evens.
func groupShapes(np int) [][]int {
	var evens, odds, rev []int
	for p := 0; p < np; p++ {
		if p%2 == 0 {
			evens = append(evens, p)
		} else {
			odds = append(odds, p)
		}
		rev = append(rev, np-1-p)
	}
	return [][]int{evens, rev, {np - 1}, append(slices.Clone(evens), odds...)}
}

func i64s(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func i64bytes(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

// TestGroupCreateQueries: ARMCI_Group_create, _rank, _size and ARMCI_Absolute_id give the ranks
// in the order listed, on members and non-members alike; a non-member's rank is -1.
func TestGroupCreateQueries(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		for _, members := range groupShapes(rt.Size()) {
			g, err := rt.GroupCreate(ctx, members)
			require.NoError(t, err, "members %v", members)
			require.Equal(t, len(members), g.Size())
			require.Equal(t, members, g.Members())
			require.Equal(t, slices.Index(members, rt.Rank()), g.Rank())
			for k, p := range members {
				abs, err := g.Absolute(k)
				require.NoError(t, err)
				require.Equal(t, p, abs)
				require.Equal(t, k, g.Member(p))
			}
			for p := -1; p <= rt.Size(); p++ {
				if !slices.Contains(members, p) {
					require.Equal(t, -1, g.Member(p), "rank %d", p)
				}
			}
			for _, k := range []int{-1, len(members)} {
				_, err := g.Absolute(k)
				require.ErrorIs(t, err, rma.ErrBadRank)
			}
			require.Same(t, rt, g.Runtime())
			if g.Rank() >= 0 {
				require.NoError(t, g.Free(ctx))
			}
		}
		require.NoError(t, rt.Barrier(ctx))
	})
}

// TestGroupCreateBadInput: an empty list, a rank twice, a rank out of range, different lists on
// different ranks and a list only one rank rejects all fail on every rank with ErrBadGroup, and
// leave no segment behind; a good list works after them.
func TestGroupCreateBadInput(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		np, me := rt.Size(), rt.Rank()
		live := rt.LiveSegments()
		cases := map[string]func() []int{
			"empty":        func() []int { return nil },
			"twice":        func() []int { return []int{0, np - 1, 0} },
			"out of range": func() []int { return []int{0, np} },
			"negative":     func() []int { return []int{-1} },
		}
		if np > 1 {
			cases["different lists"] = func() []int {
				if me == 0 {
					return []int{0}
				}
				return []int{0, 1}
			}
			cases["rejected by one rank"] = func() []int {
				if me == np-1 {
					return []int{0, 0}
				}
				return []int{0, 1}
			}
		}
		for _, name := range []string{"empty", "twice", "out of range", "negative", "different lists", "rejected by one rank"} {
			f, ok := cases[name]
			if !ok {
				continue
			}
			g, err := rt.GroupCreate(ctx, f())
			require.ErrorIs(t, err, rma.ErrBadGroup, name)
			require.Nil(t, g, name)
			if name == "out of range" || name == "negative" {
				require.ErrorIs(t, err, rma.ErrBadRank, name)
			}
			require.Equal(t, live, rt.LiveSegments(), "%s: a segment was left behind", name)
		}
		g, err := rt.GroupCreate(ctx, []int{np - 1})
		require.NoError(t, err)
		if me == np-1 {
			require.Equal(t, live+1, rt.LiveSegments())
			require.NoError(t, g.Free(ctx))
		}
		require.Equal(t, live, rt.LiveSegments())
	})
}

// TestGroupNonMember: every collective call of a group by a non-member fails with ErrNotMember
// and changes nothing (the buffers keep their values, no segment is allocated).
func TestGroupNonMember(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me := rt.Rank()
		g, err := rt.GroupCreate(ctx, []int{0})
		require.NoError(t, err)
		live := rt.LiveSegments()
		if me != 0 {
			require.Equal(t, -1, g.Rank())
			buf := i64bytes(int64(me), 7)
			require.ErrorIs(t, g.Barrier(ctx), rma.ErrNotMember)
			require.ErrorIs(t, g.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, buf), rma.ErrNotMember)
			require.ErrorIs(t, g.Broadcast(ctx, 0, buf), rma.ErrNotMember)
			require.Equal(t, []int64{int64(me), 7}, i64s(buf))
			seg, err := g.Malloc(ctx, 64)
			require.ErrorIs(t, err, rma.ErrNotMember)
			require.Nil(t, seg)
			require.ErrorIs(t, g.Free(ctx), rma.ErrNotMember)
			require.Equal(t, live, rt.LiveSegments())
		} else {
			// The member alone: its calls complete without the others.
			buf := i64bytes(5)
			require.NoError(t, g.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, buf))
			require.Equal(t, []int64{5}, i64s(buf))
			require.NoError(t, g.Barrier(ctx))
		}
		require.NoError(t, rt.Barrier(ctx))
		if me == 0 {
			require.NoError(t, g.Free(ctx))
			require.ErrorIs(t, g.Free(ctx), rma.ErrFreed)
			require.ErrorIs(t, g.Barrier(ctx), rma.ErrFreed)
			require.ErrorIs(t, g.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, make([]byte, 8)), rma.ErrFreed)
		}
	})
}

// TestGroupBarrierOrdering: in every round each member puts a value into the next member's word
// (in group order) of a world segment, then the group barrier; after it every member reads the
// value its predecessor wrote in that round. Two disjoint groups (the first and second half)
// run different numbers of rounds at the same time.
func TestGroupBarrierOrdering(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		np, me := rt.Size(), rt.Rank()
		seg, err := rt.Malloc(ctx, 16)
		require.NoError(t, err)
		half := (np + 1) / 2
		var lo, hi []int
		for p := 0; p < np; p++ {
			if p < half {
				lo = append(lo, p)
			} else {
				hi = append(hi, p)
			}
		}
		groups := [][]int{lo}
		if len(hi) > 0 {
			groups = append(groups, hi)
		}
		var mine *rma.Group
		for _, members := range groups {
			g, err := rt.GroupCreate(ctx, members)
			require.NoError(t, err)
			if g.Rank() >= 0 {
				mine = g
			}
		}
		require.NotNil(t, mine)
		rounds := 3
		if me >= half {
			rounds = 7
		}
		n, k := mine.Size(), mine.Rank()
		next, _ := mine.Absolute((k + 1) % n)
		prev, _ := mine.Absolute((k - 1 + n) % n)
		for i := 1; i <= rounds; i++ {
			// two words, alternating by round: a round's read never races the next round's write
			off := 8 * (i % 2)
			require.NoError(t, rt.Put(ctx, i64bytes(int64(1000*i+me)), seg, next, off))
			require.NoError(t, mine.Barrier(ctx))
			require.Equal(t, []int64{int64(1000*i + prev)}, i64s(seg.Local()[off:off+8]), "round %d", i)
		}
		require.NoError(t, mine.Barrier(ctx))
		require.NoError(t, mine.Free(ctx))
		require.NoError(t, seg.Free(ctx))
	})
}

// TestGroupMalloc: ARMCI_Malloc_group among the members only: each member's part has the size it
// asked for, a non-member's part 0 bytes (an access is ErrOutOfRange); members Put into each
// other's parts with absolute ranks and read the values after the group barrier. A negative size
// is ErrOutOfRange, a member's failed allocation fails every member and leaves nothing behind,
// and Free is collective over the members.
func TestGroupMalloc(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		np, me := rt.Size(), rt.Rank()
		for _, members := range groupShapes(np) {
			g, err := rt.GroupCreate(ctx, members)
			require.NoError(t, err)
			if g.Rank() < 0 {
				continue // the members' calls below involve no other rank
			}
			n, k := g.Size(), g.Rank()
			live := rt.LiveSegments()
			_, err = g.Malloc(ctx, -8)
			require.ErrorIs(t, err, rma.ErrOutOfRange)
			require.Equal(t, live, rt.LiveSegments())

			size := 8 * n * (k + 1) // different per member
			seg, err := g.Malloc(ctx, size)
			require.NoError(t, err)
			require.Len(t, seg.Local(), size)
			for p := 0; p < np; p++ {
				want := 0
				if j := g.Member(p); j >= 0 {
					want = 8 * n * (j + 1)
				}
				require.Equal(t, want, seg.Len(p), "rank %d's part", p)
			}
			for j, p := range members {
				require.NoError(t, rt.Put(ctx, i64bytes(int64(100*me+j)), seg, p, 8*k))
			}
			require.NoError(t, g.Barrier(ctx))
			for j, p := range members {
				require.Equal(t, int64(100*p+k), i64s(seg.Local()[8*j:])[0], "word %d", j)
				got := make([]byte, 8)
				require.NoError(t, rt.Get(ctx, seg, p, 8*k, got))
				require.Equal(t, []int64{int64(100*me + j)}, i64s(got))
			}
			for p := 0; p < np; p++ {
				if g.Member(p) < 0 {
					require.ErrorIs(t, rt.Put(ctx, make([]byte, 8), seg, p, 0), rma.ErrOutOfRange)
					require.ErrorIs(t, rt.Get(ctx, seg, p, 0, make([]byte, 1)), rma.ErrOutOfRange)
				}
			}
			require.NoError(t, seg.Free(ctx))
			require.ErrorIs(t, seg.Free(ctx), rma.ErrFreed)
			require.Equal(t, live, rt.LiveSegments())

			// a member whose allocation fails (shared memory refused; tcp jobs allocate from the
			// heap, which FailAlloc does not touch, so there the allocation succeeds): every
			// member fails, nothing stays
			if k == n-1 {
				rt.FailAlloc(errors.New("injected"))
			}
			seg, err = g.Malloc(ctx, 64)
			if k == n-1 {
				rt.FailAlloc(nil)
			}
			if err == nil {
				for _, p := range members {
					require.NotEqual(t, "shm", rt.TransportTo(p), "the injected failure was not seen")
				}
				require.NoError(t, seg.Free(ctx))
			} else {
				require.Nil(t, seg)
				if k != n-1 {
					require.ErrorIs(t, err, rma.ErrPeerAlloc)
				}
			}
			require.Equal(t, live, rt.LiveSegments())
			require.NoError(t, g.Free(ctx))
		}
		require.NoError(t, rt.Barrier(ctx))
	})
}

// TestGroupAllReduceBroadcast: a group's all-reduce and broadcast give the members' values,
// small and chunked (larger than a scratch slot), in every group shape; bad input (unknown
// operation, root out of the group) fails with nothing sent.
func TestGroupAllReduceBroadcast(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me := rt.Rank()
		for _, members := range groupShapes(rt.Size()) {
			g, err := rt.GroupCreate(ctx, members)
			require.NoError(t, err)
			if g.Rank() < 0 {
				continue
			}
			k, n := g.Rank(), g.Size()
			// sum and max of int64s
			buf := i64bytes(int64(me+1), int64(k), int64(-me))
			require.NoError(t, g.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, buf))
			var sum, sumK, sumNeg int64
			for j, p := range members {
				sum += int64(p + 1)
				sumK += int64(j)
				sumNeg -= int64(p)
			}
			require.Equal(t, []int64{sum, sumK, sumNeg}, i64s(buf))
			buf = i64bytes(int64(-me), int64(me))
			require.NoError(t, g.AllReduce(ctx, rma.AccInt64, rma.ReduceMax, buf))
			require.Equal(t, []int64{int64(-slices.Min(members)), int64(slices.Max(members))}, i64s(buf))
			// a chunked float64 sum: element i of member p is p+i
			const elems = 40000 // 320 kB: more than a slot of the group's scratch
			fb := make([]byte, 8*elems)
			for i := 0; i < elems; i++ {
				binary.LittleEndian.PutUint64(fb[8*i:], math.Float64bits(float64(me+i)))
			}
			require.NoError(t, g.AllReduce(ctx, rma.AccFloat64, rma.ReduceSum, fb))
			var ps float64
			for _, p := range members {
				ps += float64(p)
			}
			for i := 0; i < elems; i += 997 {
				require.Equal(t, ps+float64(n*i), math.Float64frombits(binary.LittleEndian.Uint64(fb[8*i:])), "element %d", i)
			}
			// bad operation: nothing sent, buf unchanged (every member fails the same way)
			buf = i64bytes(42)
			require.ErrorIs(t, g.AllReduce(ctx, rma.AccInt64, rma.ReduceOp(99), buf), rma.ErrBadOp)
			require.Equal(t, []int64{42}, i64s(buf))
			// broadcast from the last group rank, small and chunked
			root := n - 1
			rootAbs, _ := g.Absolute(root)
			small := i64bytes(int64(me), int64(k))
			require.NoError(t, g.Broadcast(ctx, root, small))
			require.Equal(t, []int64{int64(rootAbs), int64(root)}, i64s(small))
			big := make([]byte, 300000)
			for i := range big {
				big[i] = byte(me*7 + i)
			}
			require.NoError(t, g.Broadcast(ctx, root, big))
			for i := 0; i < len(big); i += 101 {
				require.Equal(t, byte(rootAbs*7+i), big[i], "byte %d", i)
			}
			require.ErrorIs(t, g.Broadcast(ctx, n, small), rma.ErrBadRank)
			require.ErrorIs(t, g.Broadcast(ctx, -1, small), rma.ErrBadRank)
			require.Equal(t, []int64{int64(rootAbs), int64(root)}, i64s(small))
			// the group's collectives leave the world's in step
			require.NoError(t, g.Free(ctx))
		}
		wb := i64bytes(1)
		require.NoError(t, rt.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, wb))
		require.Equal(t, []int64{int64(rt.Size())}, i64s(wb))
	})
}

// TestGroupSplitConcurrent: the world split into two groups that run all-reduces, broadcasts and
// barriers at the same time, a different number of each, with correct values in each group;
// world collectives after them still agree.
func TestGroupSplitConcurrent(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		np, me := rt.Size(), rt.Rank()
		var mine *rma.Group
		for c := 0; c < 2; c++ {
			var members []int
			for p := c; p < np; p += 2 {
				members = append(members, p)
			}
			if len(members) == 0 {
				continue
			}
			g, err := rt.GroupCreate(ctx, members)
			require.NoError(t, err)
			if g.Rank() >= 0 {
				mine = g
			}
		}
		members := mine.Members()
		iters := 5 + 3*(me%2)
		for it := 0; it < iters; it++ {
			buf := i64bytes(int64(me*it), 1)
			require.NoError(t, mine.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, buf))
			var want int64
			for _, p := range members {
				want += int64(p * it)
			}
			require.Equal(t, []int64{want, int64(len(members))}, i64s(buf), "iteration %d", it)
			root := it % len(members)
			b := i64bytes(int64(me))
			require.NoError(t, mine.Broadcast(ctx, root, b))
			require.Equal(t, []int64{int64(members[root])}, i64s(b))
			require.NoError(t, mine.Barrier(ctx))
		}
		require.NoError(t, mine.Free(ctx))
		wb := i64bytes(int64(me))
		require.NoError(t, rt.AllReduce(ctx, rma.AccInt64, rma.ReduceMax, wb))
		require.Equal(t, []int64{int64(np - 1)}, i64s(wb))
	})
}

// TestGroupPeerFailure: a group barrier that needs a failed member ends with ErrPeerFailed, as
// the world barrier does; a group of survivors keeps synchronizing and reducing.
func TestGroupPeerFailure(t *testing.T) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		t.Run(string(tr), func(t *testing.T) {
			var g *rmatest.Group
			rmatest.Run(t, 4, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				seg, err := rt.Malloc(ctx, 64)
				require.NoError(t, err)
				withFailed, err := rt.GroupCreate(ctx, []int{0, 1, 2})
				require.NoError(t, err)
				survivors, err := rt.GroupCreate(ctx, []int{3, 0, 2})
				require.NoError(t, err)
				require.NoError(t, rt.Barrier(ctx))
				if rt.Rank() == 1 {
					for { // fail once every survivor has left the barrier above
						v, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 1, 40, 0)
						require.NoError(t, err)
						if v == 3 {
							break
						}
						time.Sleep(time.Millisecond)
					}
					g.Fail(1, nil)
					return
				}
				if _, err = rt.Rmw(ctx, rma.FetchAndAddLong, seg, 1, 40, 1); err != nil {
					requirePeerFailed(t, err, 1, "arrival at rank 1")
				}
				if withFailed.Rank() >= 0 {
					requirePeerFailed(t, withFailed.Barrier(ctx), 1, "group barrier with the failed rank")
					requirePeerFailed(t, withFailed.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, make([]byte, 8)), 1, "group all-reduce")
				} else {
					require.ErrorIs(t, withFailed.Barrier(ctx), rma.ErrNotMember)
				}
				require.NoError(t, survivors.Barrier(ctx))
				buf := i64bytes(int64(rt.Rank()))
				require.NoError(t, survivors.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, buf))
				require.Equal(t, []int64{5}, i64s(buf))
				survivorsDone(ctx, t, rt, seg, []int{0, 2, 3})
			}, rmatest.Transport(tr), rmatest.UseGroup(func(gr *rmatest.Group) { g = gr }))
		})
	}
}

// TestGroupBarrierFencesEveryTarget: the group barrier completes a member's operations to every
// rank, not only to the members: members put into a non-member's part (non-blocking, waited for
// only after the barrier), and after the group barrier the next member reads the values from it.
// (The in-process transports deliver so fast that this passes without the fence as well: it
// checks values, it cannot catch a missing fence.)
func TestGroupBarrierFencesEveryTarget(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		np, me := rt.Size(), rt.Rank()
		if np < 2 {
			return // no non-member
		}
		const words = 512
		outside := np - 1
		// outside's part: two halves (alternate rounds) of a slot of words per member
		seg, err := rt.Malloc(ctx, 2*np*words*8)
		require.NoError(t, err)
		members := make([]int, outside)
		for p := range members {
			members[p] = p
		}
		g, err := rt.GroupCreate(ctx, members)
		require.NoError(t, err)
		slot := func(round, m int) int { return 8 * words * (np*(round%2) + m) }
		if me != outside {
			for round := 0; round < 4; round++ {
				vals := make([]int64, words)
				for i := range vals {
					vals[i] = int64(round*100000 + me*1000 + i)
				}
				// non-blocking, waited for only after the barrier: the barrier's fence completes it
				h, err := rt.NbPut(ctx, i64bytes(vals...), seg, outside, slot(round, me))
				require.NoError(t, err)
				require.NoError(t, g.Barrier(ctx))
				require.NoError(t, h.Wait(ctx))
				src := members[(g.Rank()+1)%len(members)]
				got := make([]byte, 8*words)
				require.NoError(t, rt.Get(ctx, seg, outside, slot(round, src), got))
				for i, v := range i64s(got) {
					require.Equal(t, int64(round*100000+src*1000+i), v, "round %d, word %d of rank %d", round, i, src)
				}
			}
			require.NoError(t, g.Free(ctx))
		}
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, seg.Free(ctx))
	})
}
