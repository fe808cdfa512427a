package rma_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// stripePolicies is every multi-rail policy (multirail/sched), with parameters where it takes
// them.
var stripePolicies = []string{"auto", "binding", "round-robin", "window:3", "even", "weighted:1:3", "adaptive",
	"hsam", "bss:1", "epc", "fragment"}

const testThreshold = 16 << 10

// loopRails returns n rails on loopback addresses 127.0.0.1, 127.0.0.2, ...
func loopRails(n int) []string {
	var r []string
	for i := 0; i < n; i++ {
		r = append(r, fmt.Sprintf("127.0.0.%d", i+1))
	}
	return r
}

func railsOption(rails int, policy string) rmatest.Option {
	return rmatest.Configure(func(_ int, c *rma.Config) {
		c.Rails, c.StripePolicy, c.StripeThreshold = loopRails(rails), policy, testThreshold
	})
}

// stripedSizes: 1 B, odd sizes, sizes around the switchover threshold, and (unless -short) 64 MiB.
func stripedSizes(short bool) []int {
	s := []int{1, 3, 63, 4097, testThreshold - 1, testThreshold, testThreshold + 1, 100003, 1<<20 + 5}
	if !short {
		s = append(s, 64<<20)
	}
	return s
}

// TestStripedTransfers runs two ranks over two loopback rails (one RC queue pair per rail, the
// channel's two subchannels) under every policy: puts and gets of every size, mixed and in
// flight together, each non-blocking put followed at once by a Get of the same range that must
// return the new data (ARMCI ordering under striping), overlapping puts, striped accumulates
// (atomic per element) and remote atomics; then a fence completes every subchannel.
func TestStripedTransfers(t *testing.T) {
	for _, pol := range stripePolicies {
		t.Run(pol, func(t *testing.T) {
			rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				stripedBody(ctx, t, rt, testing.Short() || pol != "auto" && raceEnabled)
			}, rmatest.Transport(rma.TransportTCP), railsOption(2, pol))
		})
	}
}

// TestStripedThreeRails: three rails, even striping and BSS (3,2).
func TestStripedThreeRails(t *testing.T) {
	for _, pol := range []string{"even", "bss:2"} {
		t.Run(pol, func(t *testing.T) {
			rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				require.Len(t, rt.Channel(1-rt.Rank()).Subchannels(), 3)
				stripedBody(ctx, t, rt, true)
			}, rmatest.Transport(rma.TransportTCP), railsOption(3, pol))
		})
	}
}

func stripedBody(ctx context.Context, t testing.TB, rt *rma.Runtime, short bool) {
	sizes := stripedSizes(short)
	maxSize := sizes[len(sizes)-1]
	part := max(3*maxSize, 8<<20) + 64
	seg, err := rt.Malloc(ctx, part)
	require.NoError(t, err)
	me, peer := rt.Rank(), 1-rt.Rank()
	ch := rt.Channel(peer)
	require.NotNil(t, ch)
	subs := len(ch.Subchannels())
	require.GreaterOrEqual(t, subs, 2)

	for i, size := range sizes {
		if size >= 16<<20 && me != 0 {
			// 64 MiB both ways at once over loopback TCP trips the engine's retry limit even on
			// one rail (a transport issue, not striping): one origin for the largest size.
			continue
		}
		// Non-blocking put, then at once a blocking get of the same range: the new data.
		data := pattern(me*100+i, size)
		h, err := rt.NbPut(ctx, data, seg, peer, 0)
		require.NoError(t, err)
		got := make([]byte, size)
		require.NoError(t, rt.Get(ctx, seg, peer, 0, got))
		require.True(t, bytes.Equal(data, got), "size %d: get after put returned old data", size)
		require.NoError(t, h.Wait(ctx))
		if size >= 16<<20 {
			continue // keep the test short: the mixed steps run on the other sizes
		}

		// Mixed and in flight together: a put to a second region, a get of the first, then a
		// put overlapping both halves and a get of the whole.
		d2 := pattern(me*100+i+50, size)
		hp, err := rt.NbPut(ctx, d2, seg, peer, 2*maxSize)
		require.NoError(t, err)
		g1 := make([]byte, size)
		hg, err := rt.NbGet(ctx, seg, peer, 0, g1)
		require.NoError(t, err)
		half := size / 2
		d3 := pattern(me*100+i+70, size)
		hp2, err := rt.NbPut(ctx, d3, seg, peer, half)
		require.NoError(t, err)
		whole := make([]byte, half+size)
		require.NoError(t, rt.Get(ctx, seg, peer, 0, whole))
		for _, hh := range []*rma.Handle{hp, hg, hp2} {
			require.NoError(t, hh.Wait(ctx))
		}
		require.True(t, bytes.Equal(data, g1), "size %d: get in flight with puts", size)
		require.True(t, bytes.Equal(data[:half], whole[:half]), "size %d: first half", size)
		require.True(t, bytes.Equal(d3, whole[half:]), "size %d: overlapping put not seen", size)
		g2 := make([]byte, size)
		require.NoError(t, rt.Get(ctx, seg, peer, 2*maxSize, g2))
		require.True(t, bytes.Equal(d2, g2), "size %d: second region", size)
	}

	// Accumulates of odd element counts, striped on element boundaries: twice +1 on zeros.
	for _, n := range []int{1, 2047, testThreshold/8 + 1, 300001} {
		zeros := make([]byte, 8*n)
		require.NoError(t, rt.Put(ctx, zeros, seg, peer, 8))
		ones := make([]byte, 8*n)
		for k := 0; k < n; k++ {
			binary.LittleEndian.PutUint64(ones[8*k:], 1)
		}
		h1, err := rt.NbAcc(ctx, rma.AccInt64, 1, ones, seg, peer, 8)
		require.NoError(t, err)
		h2, err := rt.NbAcc(ctx, rma.AccInt64, 2, ones, seg, peer, 8)
		require.NoError(t, err)
		got := make([]byte, 8*n)
		require.NoError(t, rt.Get(ctx, seg, peer, 8, got))
		require.NoError(t, h1.Wait(ctx))
		require.NoError(t, h2.Wait(ctx))
		for k := 0; k < n; k++ {
			if v := binary.LittleEndian.Uint64(got[8*k:]); v != 3 {
				t.Fatalf("%d elements: element %d = %d, want 3", n, k, v)
			}
		}
	}

	// Atomics (never striped) after a striped put to the same word.
	big := make([]byte, 1<<20)
	binary.LittleEndian.PutUint64(big[64:], 40)
	h, err := rt.NbPut(ctx, big, seg, peer, 0)
	require.NoError(t, err)
	old, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, peer, 64, 2)
	require.NoError(t, err)
	require.Equal(t, int64(40), old)
	require.NoError(t, h.Wait(ctx))

	// A fence completes every subchannel.
	var before int64
	for s := 0; s < subs; s++ {
		before += ch.Posted(s)
	}
	for k := 0; k < 8; k++ {
		_, err := rt.NbPut(ctx, pattern(k, 1<<20), seg, peer, k*(1<<20))
		require.NoError(t, err)
	}
	require.NoError(t, rt.Fence(ctx, peer))
	used, posted := 0, -before
	for s := 0; s < subs; s++ {
		require.Zero(t, ch.Outstanding(s), "subchannel %d busy after the fence", s)
		if ch.Posted(s) > 0 {
			used++
		}
		posted += ch.Posted(s)
	}
	switch p := ch.Policy(); {
	case p == "binding:0":
		require.Equal(t, 1, used, "binding used %d subchannels", used)
		require.Equal(t, int64(8), posted, "binding: one work request per put")
	case strings.HasPrefix(p, "bss:1:"):
		// n_batch = 1: the single best path per put (it may move between puts as it measures)
		require.Equal(t, int64(8), posted, "bss n_batch=1: one work request per put")
	default:
		require.Equal(t, subs, used, "policy %s left subchannels unused", p)
	}
	require.NoError(t, rt.Barrier(ctx))
	require.NoError(t, seg.Free(ctx))
}
