package ibv_test

import (
	"context"
	"sync"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCQCreateBounds(t *testing.T) {
	c, _ := newStub(t)
	for _, n := range []int{0, -1, 1<<22 + 1} {
		_, err := c.CreateCQ(n)
		assert.ErrorIs(t, err, ibv.ErrInvalidArgument, "cqe %d", n)
	}
	cq, err := c.CreateCQ(1 << 22)
	require.NoError(t, err)
	assert.Equal(t, 1<<22, cq.Cap())
}

func TestCQRingWraparound(t *testing.T) {
	c, _ := newStub(t)
	cq, err := c.CreateCQ(4)
	require.NoError(t, err)
	next := uint64(0) // next WRID to push
	want := uint64(0) // next WRID expected from Poll
	push := func(k int) {
		for i := 0; i < k; i++ {
			require.True(t, provider.Push(cq, ibv.WC{WRID: next, ByteLen: uint32(next * 3)}))
			next++
		}
	}
	poll := func(k int) {
		wc := make([]ibv.WC, k)
		n := cq.Poll(wc)
		require.Equal(t, k, n)
		for _, w := range wc[:n] {
			assert.Equal(t, want, w.WRID)
			assert.Equal(t, uint32(want*3), w.ByteLen)
			want++
		}
	}
	// Walk the head around the ring several times with every fill level.
	for round := 0; round < 5; round++ {
		push(3)
		assert.Equal(t, 3, cq.Len())
		poll(2)
		push(3) // wraps
		assert.Equal(t, 4, cq.Len())
		poll(4)
		assert.Equal(t, 0, cq.Len())
	}
	assert.Equal(t, 0, cq.Poll(make([]ibv.WC, 4)), "empty")
	push(1)
	assert.Equal(t, 1, cq.Poll(make([]ibv.WC, 8)), "poll more than present")
	assert.Equal(t, 0, cq.Poll(nil))
	assert.False(t, cq.Overrun())
}

func TestCQOverrun(t *testing.T) {
	c, _ := newStub(t)
	cq, err := c.CreateCQ(2)
	require.NoError(t, err)
	require.True(t, provider.Push(cq, ibv.WC{WRID: 1}))
	require.True(t, provider.Push(cq, ibv.WC{WRID: 2}))
	assert.False(t, provider.Push(cq, ibv.WC{WRID: 3}), "full: dropped")
	assert.True(t, cq.Overrun())
	assert.False(t, provider.Push(cq, ibv.WC{WRID: 4}))
	ev := nextEvent(t, c)
	assert.Equal(t, ibv.EventCQErr, ev.Type)
	assert.Same(t, cq, ev.CQ)
	// The older completions are intact; the dropped ones never appear.
	wc := make([]ibv.WC, 4)
	require.Equal(t, 2, cq.Poll(wc))
	assert.Equal(t, uint64(1), wc[0].WRID)
	assert.Equal(t, uint64(2), wc[1].WRID)
	// One overrun, one event.
	provider.PostEvent(c, ibv.AsyncEvent{Type: ibv.EventCommEst})
	assert.Equal(t, ibv.EventCommEst, nextEvent(t, c).Type)
}

func TestCQWait(t *testing.T) {
	c, _ := newStub(t)
	cq, err := c.CreateCQ(8)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, cq.Wait(ctx), context.Canceled, "nothing there, context over")

	require.True(t, provider.Push(cq, ibv.WC{WRID: 5}))
	assert.NoError(t, cq.Wait(ctx), "a completion is there: no need to block")
	require.Equal(t, 1, cq.Poll(make([]ibv.WC, 1)))

	// A waiter blocks until a completion arrives from another goroutine.
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errc <- cq.Wait(context.Background())
	}()
	require.True(t, provider.Push(cq, ibv.WC{WRID: 6}))
	wg.Wait()
	require.NoError(t, <-errc)
	wc := make([]ibv.WC, 1)
	require.Equal(t, 1, cq.Poll(wc))
	assert.Equal(t, uint64(6), wc[0].WRID)

	// Cancelling a blocked waiter.
	ctx, cancel = context.WithCancel(context.Background())
	go func() { errc <- cq.Wait(ctx) }()
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)

	// Closing the device releases a blocked waiter.
	go func() { errc <- cq.Wait(context.Background()) }()
	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-errc, ibv.ErrClosed)
}

func TestCQConcurrentPushPoll(t *testing.T) {
	c, _ := newStub(t)
	const producers, per = 4, 500
	cq, err := c.CreateCQ(producers * per)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				provider.Push(cq, ibv.WC{WRID: uint64(p*per + i), QPNum: uint32(p)})
			}
		}()
	}
	last := make([]int, producers) // per producer: the next index expected
	got := 0
	wc := make([]ibv.WC, 7)
	for got < producers*per {
		require.NoError(t, cq.Wait(context.Background()))
		n := cq.Poll(wc)
		for _, w := range wc[:n] {
			p := int(w.QPNum)
			assert.Equal(t, uint64(p*per+last[p]), w.WRID, "per-producer order")
			last[p]++
		}
		got += n
	}
	wg.Wait()
	assert.False(t, cq.Overrun())
	assert.Equal(t, 0, cq.Len())
}

// A CQ's entries follow the completions waiting, not its capacity: a CQ of 64 Ki entries holds a
// few, grows while completions wait, shrinks once polled empty, and still overruns exactly when
// Cap completions wait.
func TestCQGrowsWithCompletions(t *testing.T) {
	c, _ := newStub(t)
	const cqe = 1 << 16
	cq, err := c.CreateCQ(cqe)
	require.NoError(t, err)
	small := cq.MemoryFootprint()
	assert.Less(t, small, 64*ibv.CQEntryBytes(), "a new CQ holds its capacity")
	for i := range 1000 {
		require.True(t, provider.Push(cq, ibv.WC{WRID: uint64(i)}))
	}
	grown := cq.MemoryFootprint()
	assert.GreaterOrEqual(t, grown, small+(1000-8)*ibv.CQEntryBytes(), "1000 completions waiting")
	assert.Less(t, grown, small+2048*ibv.CQEntryBytes(), "grows by doubling")
	wc := make([]ibv.WC, 1000)
	require.Equal(t, 1000, cq.Poll(wc))
	for i, w := range wc {
		require.Equal(t, uint64(i), w.WRID, "order kept across the growth")
	}
	assert.Equal(t, small, cq.MemoryFootprint(), "polled empty: back to its first size")

	small3, err := c.CreateCQ(3)
	require.NoError(t, err)
	for i := range 3 {
		require.True(t, provider.Push(small3, ibv.WC{WRID: uint64(i)}))
	}
	assert.False(t, provider.Push(small3, ibv.WC{WRID: 3}), "overrun at exactly cqe")
	assert.True(t, small3.Overrun())
	assert.Equal(t, ibv.EventCQErr, nextEvent(t, c).Type)
}
