package rma_test

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// phaser is a barrier of the test's goroutines (the ranks), outside the runtime: it orders test
// phases without creating any connection.
type phaser struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
	in   int
	gen  int
}

func newPhaser(n int) *phaser {
	p := &phaser{n: n}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *phaser) wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.gen
	if p.in++; p.in == p.n {
		p.in, p.gen = 0, p.gen+1
		p.cond.Broadcast()
		return
	}
	for g == p.gen {
		p.cond.Wait()
	}
}

// TestOnDemandConnections: with GOARMCI_ON_DEMAND_THRESHOLD=0 a rank holds no network
// connection after Init; the first operation to a peer connects exactly that pair (the
// passive side included), simultaneous first operations of two ranks to each other meet in one
// connection, and afterwards puts, gets, accumulates, fetch-and-adds and barriers give exact
// values between every pair.
func TestOnDemandConnections(t *testing.T) {
	defer testutil.CheckGoroutines(t)
	t.Setenv("GOARMCI_ON_DEMAND_THRESHOLD", "0")
	const np, part = 4, 1000
	ph := newPhaser(np)
	rmatest.Run(t, np, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me := rt.Rank()
		seg, err := rt.Malloc(ctx, part*np+8)
		require.NoError(t, err)
		for p := 0; p < np; p++ {
			require.False(t, rt.Connected(p), "rank %d connected to %d at Init", me, p)
		}
		ph.wait()
		// rank 0 -> 2 only: rank 2 learns of it by its own Get (which finds or waits for the
		// connection rank 0 started)
		if me == 0 {
			require.NoError(t, rt.Put(ctx, pattern(0, part), seg, 2, 0))
			require.True(t, rt.Connected(2))
		}
		ph.wait()
		if me == 2 {
			got := make([]byte, part)
			require.NoError(t, rt.Get(ctx, seg, 0, 0, got))
			require.Equal(t, make([]byte, part), got) // rank 0's slot 0 of its own part: untouched
			require.Equal(t, pattern(0, part), seg.Local()[:part])
			require.True(t, rt.Connected(0))
		}
		ph.wait()
		for p := 0; p < np; p++ {
			want := me == 0 && p == 2 || me == 2 && p == 0
			require.Equal(t, want, rt.Connected(p), "rank %d to %d", me, p)
		}
		if me == 0 || me == 2 {
			require.Len(t, rt.Channel(2-me).Subchannels(), 1)
			require.Nil(t, rt.Channel(1))
		}
		ph.wait()
		// every pair at once (1<->3 dial each other simultaneously, like every other pair)
		for p := 0; p < np; p++ {
			require.NoError(t, rt.Put(ctx, pattern(me, part), seg, p, me*part))
		}
		var one [8]byte
		binary.LittleEndian.PutUint64(one[:], 1)
		for i := 0; i < 25; i++ {
			require.NoError(t, rt.Acc(ctx, rma.AccInt64, 1, one[:], seg, 0, part*np))
		}
		require.NoError(t, rt.Barrier(ctx))
		for q := 0; q < np; q++ {
			require.Equal(t, pattern(q, part), seg.Local()[q*part:(q+1)*part], "slot of rank %d", q)
		}
		if me == 0 {
			require.Equal(t, uint64(25*np), binary.LittleEndian.Uint64(seg.Local()[part*np:]))
		}
		for p := 0; p < np; p++ {
			require.True(t, rt.Connected(p) || p == me)
		}
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, seg.Free(ctx))
	}, rmatest.Transport(rma.TransportTCP))
}

// TestEagerBelowThreshold: by default (GOARMCI_ON_DEMAND_THRESHOLD 64) a small job connects
// every peer at Init.
func TestEagerBelowThreshold(t *testing.T) {
	t.Setenv("GOARMCI_ON_DEMAND_THRESHOLD", "64")
	rmatest.Run(t, 3, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		for p := 0; p < rt.Size(); p++ {
			require.Equal(t, p != rt.Rank(), rt.Connected(p))
		}
	}, rmatest.Transport(rma.TransportTCP))
}
