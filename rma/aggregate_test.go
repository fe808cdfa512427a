package rma_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// aggregateRanks runs body at 1, 2, 4 and 5 ranks over shm and tcp with statistics on (the
// per-peer operation counts show the combining).
func aggregateRanks(t *testing.T, body func(ctx context.Context, t testing.TB, rt *rma.Runtime)) {
	for _, np := range []int{1, 2, 4, 5} {
		for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
			t.Run(fmt.Sprintf("%s/np%d", tr, np), func(t *testing.T) {
				rmatest.Run(t, np, body, rmatest.Transport(tr),
					rmatest.Configure(func(_ int, c *rma.Config) { c.Stats = true }))
			})
		}
	}
}

// Layout of one origin's slot in every rank's part: four values, a small and a large byte put.
const (
	aggSmall = 32
	aggLarge = 1500 // above the copy threshold: held by reference until Wait
	aggSlot  = 32 + aggSmall + aggLarge
	aggRead  = 16 // bytes each rank exposes for the Gets, after the slots
)

// TestAggregateHandle (ARMCI's aggregate handles, armci test.c's "aggregate put/get" test):
// under a set handle every rank issues to every rank four NbPutValue (int32, int64, float32,
// float64), a small and a large NbPut and a NbGet. Nothing moves to or from a network peer
// before Wait (the Gets' buffers are still zero); one Wait completes all of it, as one vector
// Put and one vector Get per network peer (the statistics count exactly one of each, and
// exactly the bytes issued; to this node's ranks each transfer is a copy at issue); the small
// put's source was copied at issue (overwritten afterwards, the target has the first bytes).
// Every value lands once at its place and the bytes between slots are untouched. After Unset,
// value puts are issued at once and the next Wait completes them; set again, polling Test
// completes the queue.
func TestAggregateHandle(t *testing.T) {
	aggregateRanks(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me, n := rt.Rank(), rt.Size()
		part := n*aggSlot + aggRead
		seg, err := rt.Malloc(ctx, part)
		require.NoError(t, err)
		copy(seg.Local()[n*aggSlot:], pattern(me+100, aggRead))
		require.NoError(t, rt.Barrier(ctx))

		h := rt.NewAggregate()
		require.False(t, h.Aggregating())
		require.NoError(t, h.Set())
		require.True(t, h.Aggregating())
		got := make([][]byte, n)
		for p := 0; p < n; p++ {
			base := me * aggSlot
			require.NoError(t, rma.NbPutValue(ctx, h, int32(-1000*me-p), seg, p, base))
			require.NoError(t, rma.NbPutValue(ctx, h, int64(1)<<40+int64(me*n+p), seg, p, base+8))
			require.NoError(t, rma.NbPutValue(ctx, h, float32(me)+0.25, seg, p, base+16))
			require.NoError(t, rma.NbPutValue(ctx, h, math.Pi*float64(me+1)+float64(p), seg, p, base+24))
			small := pattern(me, aggSmall)
			require.NoError(t, h.NbPut(ctx, small, seg, p, base+32))
			for i := range small {
				small[i] = 0xEE // copied at issue: the target gets the pattern
			}
			require.NoError(t, h.NbPut(ctx, pattern(me+50, aggLarge), seg, p, base+32+aggSmall))
			got[p] = make([]byte, aggRead)
			require.NoError(t, h.NbGet(ctx, seg, p, n*aggSlot, got[p]))
		}
		for p := 0; p < n; p++ {
			if rt.TransportTo(p) == "tcp" { // queued; to this node's ranks a copy at issue
				require.Equal(t, make([]byte, aggRead), got[p], "queued Get to rank %d ran before Wait", p)
			}
		}
		require.NoError(t, h.Wait(ctx))
		for p := 0; p < n; p++ {
			require.Equal(t, pattern(p+100, aggRead), got[p], "Get from rank %d", p)
		}
		stats := rt.Stats()
		require.Len(t, stats, n)
		puts := func(p int) int64 { // one vector Put to a network peer; six copies to this node's ranks
			if rt.TransportTo(p) == "tcp" {
				return 1
			}
			return 6
		}
		for _, s := range stats {
			require.Equal(t, puts(s.Rank), s.Puts, "puts to rank %d", s.Rank)
			require.Equal(t, int64(1), s.Gets, "gets from rank %d", s.Rank)
			require.Equal(t, int64(4+8+4+8+aggSmall+aggLarge), s.BytesOut, "bytes to rank %d", s.Rank)
			require.Equal(t, int64(aggRead), s.BytesIn, "bytes from rank %d", s.Rank)
		}
		require.NoError(t, rt.Barrier(ctx))

		loc := seg.Local()
		for q := 0; q < n; q++ {
			s := loc[q*aggSlot : (q+1)*aggSlot]
			require.Equal(t, int32(-1000*q-me), int32(binary.LittleEndian.Uint32(s)), "int32 from %d", q)
			require.Equal(t, make([]byte, 4), s[4:8], "gap after the int32 from %d", q)
			require.Equal(t, int64(1)<<40+int64(q*n+me), int64(binary.LittleEndian.Uint64(s[8:])))
			require.Equal(t, float32(q)+0.25, math.Float32frombits(binary.LittleEndian.Uint32(s[16:])))
			require.Equal(t, make([]byte, 4), s[20:24], "gap after the float32 from %d", q)
			require.Equal(t, math.Pi*float64(q+1)+float64(me), math.Float64frombits(binary.LittleEndian.Uint64(s[24:])))
			require.Equal(t, pattern(q, aggSmall), s[32:32+aggSmall], "small put from %d", q)
			require.Equal(t, pattern(q+50, aggLarge), s[32+aggSmall:], "large put from %d", q)
		}
		require.Equal(t, pattern(me+100, aggRead), loc[n*aggSlot:], "the Gets' source")
		require.NoError(t, rt.Barrier(ctx))

		// Not set: each NbPutValue is its own transfer; one Wait completes them all.
		require.NoError(t, h.Unset())
		require.False(t, h.Aggregating())
		for p := 0; p < n; p++ {
			require.NoError(t, rma.NbPutValue(ctx, h, int64(7*me+p+1), seg, p, me*aggSlot+8))
		}
		require.NoError(t, h.Wait(ctx))
		require.True(t, h.Test())
		for _, s := range rt.Stats() {
			require.Equal(t, puts(s.Rank)+1, s.Puts, "puts to rank %d", s.Rank)
		}
		require.NoError(t, rt.Barrier(ctx))
		for q := 0; q < n; q++ {
			require.Equal(t, int64(7*q+me+1), int64(binary.LittleEndian.Uint64(loc[q*aggSlot+8:])))
		}
		require.NoError(t, rt.Barrier(ctx))

		// Set again, completed by polling Test (ARMCI_Test sends the queue and makes progress).
		require.NoError(t, h.Set())
		for p := 0; p < n; p++ {
			require.NoError(t, rma.NbPutValue(ctx, h, float32(-p-me), seg, p, me*aggSlot+16))
		}
		for !h.Test() {
		}
		require.NoError(t, h.Wait(ctx))
		require.NoError(t, h.Unset())
		require.NoError(t, rt.Barrier(ctx))
		for q := 0; q < n; q++ {
			require.Equal(t, float32(-q-me), math.Float32frombits(binary.LittleEndian.Uint32(loc[q*aggSlot+16:])))
		}
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, seg.Free(ctx))
	})
}

// TestAggregateBadInput: a nil handle, Unset of a handle that is not set, Unset with transfers
// queued, and transfers out of range or to a bad rank each return their sentinel and change
// nothing: the handle keeps its state, nothing is queued (Wait sends no operation) and the
// target memory is untouched.
func TestAggregateBadInput(t *testing.T) {
	aggregateRanks(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me, n := rt.Rank(), rt.Size()
		seg, err := rt.Malloc(ctx, 16)
		require.NoError(t, err)

		var nilh *rma.Aggregate
		for _, err := range []error{nilh.Set(), nilh.Unset(), nilh.Wait(ctx),
			nilh.NbPut(ctx, []byte{1}, seg, 0, 0), nilh.NbGet(ctx, seg, 0, 0, make([]byte, 1)),
			rma.NbPutValue(ctx, nilh, 1.5, seg, 0, 0)} {
			require.True(t, errors.Is(err, rma.ErrHandle), "%v", err)
		}
		require.True(t, nilh.Test())
		require.False(t, nilh.Aggregating())

		h := rt.NewAggregate()
		require.True(t, errors.Is(h.Unset(), rma.ErrHandle), "unset without set")
		require.False(t, h.Aggregating())
		require.NoError(t, h.Set())
		to := (me + 1) % n
		require.True(t, errors.Is(rma.NbPutValue(ctx, h, int64(1), seg, to, 12), rma.ErrOutOfRange))
		require.True(t, errors.Is(h.NbPut(ctx, []byte{1}, seg, n, 0), rma.ErrBadRank))
		require.True(t, errors.Is(h.NbGet(ctx, seg, -1, 0, make([]byte, 4)), rma.ErrBadRank))
		require.True(t, errors.Is(h.NbGet(ctx, seg, to, 8, make([]byte, 9)), rma.ErrOutOfRange))
		require.NoError(t, h.Wait(ctx)) // nothing was queued
		for _, s := range rt.Stats() {
			require.Zero(t, s.Puts+s.Gets, "operations to rank %d", s.Rank)
		}

		require.NoError(t, rma.NbPutValue(ctx, h, int32(5), seg, to, 4))
		require.True(t, errors.Is(h.Unset(), rma.ErrHandle), "unset with a transfer queued")
		require.True(t, h.Aggregating())
		require.NoError(t, h.Wait(ctx))
		require.NoError(t, h.Unset())
		require.NoError(t, rt.Barrier(ctx))
		want := make([]byte, 16)
		binary.LittleEndian.PutUint32(want[4:], 5)
		require.True(t, bytes.Equal(want, seg.Local()), "%v", seg.Local())
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, seg.Free(ctx))
	})
}

// BenchmarkAggregate: 64 NbPutValue of a float64 to rank 1 and one Wait per operation, under a
// set aggregate handle (one vector transfer) and under a handle that is not set (64 transfers).
func BenchmarkAggregate(b *testing.B) {
	const values = 64
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		for _, set := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/set=%v", tr, set), func(b *testing.B) {
				pair(b, tr, values*8, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, _ []byte) error {
					h := rt.NewAggregate()
					if set {
						if err := h.Set(); err != nil {
							return err
						}
					}
					for i := 0; i < values; i++ {
						if err := rma.NbPutValue(ctx, h, float64(i), seg, 1, 8*i); err != nil {
							return err
						}
					}
					return h.Wait(ctx)
				})
			})
		}
	}
}
