package rma_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// allReducer is the world (rma.Runtime) or a group (rma.Group).
type allReducer interface {
	Rank() int
	Size() int
	AllReduce(ctx context.Context, typ rma.AccType, op rma.ReduceOp, buf []byte) error
}

// allReduceBackToBack runs AllReduces of many lengths one after the other with no other
// synchronization (one element, odd lengths, one larger than a scratch slot: several chunks), each
// with values that depend on the call, and checks every element of every result: a contribution
// read before it arrived, or from the wrong call, shows.
func allReduceBackToBack(ctx context.Context, t testing.TB, rt allReducer, calls int) {
	me, n := rt.Rank(), rt.Size()
	// int64 elements; 200 after the short ones outgrows the message buffers while the
	// accumulator's rounding still holds it; the last spans several slots
	lengths := []int{1, 2, 3, 17, 200, 1000, 1, 300000}
	for c := range calls {
		l := lengths[c%len(lengths)]
		if c%len(lengths) == len(lengths)-1 && c >= len(lengths) {
			l = 5 // the largest once
		}
		b := make([]byte, 8*l)
		for i := range l {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(me+1)*int64(c+1)+int64(i)))
		}
		require.NoError(t, rt.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, b))
		for i := range l {
			want := int64(c+1)*int64(n*(n+1)/2) + int64(n*i)
			require.Equal(t, want, int64(binary.LittleEndian.Uint64(b[8*i:])), "call %d, element %d", c, i)
		}
	}
}

// TestAllReduceBackToBack: jobs of 1–5 ranks over shared memory and over tcp, a group of three of
// four ranks (its calls between the world's), and three ranks over
// tcp on two rails with three paths each under the even policy (a small operation may go on any
// of six queue pairs: a flag that overtook its data would show).
func TestAllReduceBackToBack(t *testing.T) {
	for _, np := range []int{1, 2, 3, 5} {
		transports(t, np, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			allReduceBackToBack(ctx, t, rt, 200)
		})
	}
	// a group of three of four ranks, its AllReduces interleaved with the world's
	groupBetweenWorld(t, 3, 10, 30, func(ctx context.Context, t testing.TB, c allGatherer, calls int) {
		allReduceBackToBack(ctx, t, c, calls)
	})
	t.Run("tcp/np3/rails2/paths3", func(t *testing.T) {
		rmatest.Run(t, 3, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			allReduceBackToBack(ctx, t, rt, 300)
		}, rmatest.Transport(rma.TransportTCP), rmatest.Configure(func(_ int, c *rma.Config) {
			c.Rails, c.Paths, c.StripePolicy, c.StripeThreshold = loopRails(2), 3, "even", 64
		}))
	})
}

// allGatherer is the world (rma.Runtime) or a group (rma.Group).
type allGatherer interface {
	allReducer
	AllGather(ctx context.Context, buf []byte, offs []int) error
}

// allGatherCalls gathers parts of unequal lengths (empty ones; in call 5 the last rank's spans
// several scratch slots), with AllReduces between the calls on the same scratch, and checks every
// byte; offsets that do not describe the buffer are refused before anything is sent.
func allGatherCalls(ctx context.Context, t testing.TB, ag allGatherer, calls int) {
	me, n := ag.Rank(), ag.Size()
	for c := range calls {
		offs := make([]int, n+1)
		for p := range n {
			l := (p*7 + c*13) % 50 // some parts empty
			if c == 5 && p == n-1 {
				l = 300 << 10
			}
			offs[p+1] = offs[p] + l
		}
		buf := make([]byte, offs[n])
		for i := offs[me]; i < offs[me+1]; i++ {
			buf[i] = byte(me*31 + c + i)
		}
		require.NoError(t, ag.AllGather(ctx, buf, offs))
		for p := range n {
			for i := offs[p]; i < offs[p+1]; i++ {
				require.Equal(t, byte(p*31+c+i), buf[i], "call %d, rank %d's part, byte %d", c, p, i)
			}
		}
		allReduceBackToBack(ctx, t, ag, 3)
	}
	require.ErrorIs(t, ag.AllGather(ctx, make([]byte, 4), make([]int, n)), rma.ErrOutOfRange)
	bad := make([]int, n+1)
	bad[n] = 4
	if n > 1 {
		bad[1] = 5 // descending
	} else {
		bad[1] = 3 // not the buffer's end
	}
	require.ErrorIs(t, ag.AllGather(ctx, make([]byte, 4), bad), rma.ErrOutOfRange)
}

// TestAllGather: jobs of 1–5 ranks over shared memory and over tcp, and a group of three of four
// ranks whose calls interleave with the world's (allGatherCalls).
func TestAllGather(t *testing.T) {
	for _, np := range []int{1, 2, 3, 5} {
		transports(t, np, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			allGatherCalls(ctx, t, rt, 12)
		})
	}
	groupBetweenWorld(t, 2, 3, 7, allGatherCalls)
}

// groupBetweenWorld runs jobs of four ranks over shared memory and over tcp in which a group of
// ranks 0, 2 and 3 and the world take turns, rounds times: batch runs calls collectives on the
// group (groupCalls, its members only) or on the world (worldCalls).
func groupBetweenWorld(t *testing.T, rounds, worldCalls, groupCalls int, batch func(ctx context.Context, t testing.TB, c allGatherer, calls int)) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		t.Run(string(tr)+"/group", func(t *testing.T) {
			rmatest.Run(t, 4, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				g, err := rt.GroupCreate(ctx, []int{0, 2, 3})
				require.NoError(t, err)
				for range rounds {
					if g.Rank() >= 0 {
						batch(ctx, t, g, groupCalls)
					}
					batch(ctx, t, rt, worldCalls)
				}
			}, rmatest.Transport(tr))
		})
	}
}
