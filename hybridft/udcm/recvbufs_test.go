package udcm

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The CM's receive buffers follow the traffic: a CM starts with one chunk posted to its SRQ;
// while its handler is held, messages use up the posted receives and the SRQ limit event makes
// it post a second chunk before they run out; once released, every message is handled, in order.
func TestReceiveBuffersGrowOnSRQLimit(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var got []uint32
	h := func(m *Msg, _ string) {
		mu.Lock()
		first := len(got) == 0
		got = append(got, m.Seq)
		mu.Unlock()
		if first {
			<-release
		}
	}
	a, err := Open([]string{"127.0.0.1:0"}, h, nil)
	require.NoError(t, err)
	defer a.Close()
	b, err := Open([]string{"127.0.0.1:0"}, func(*Msg, string) {}, nil)
	require.NoError(t, err)
	defer b.Close()
	require.NotNil(t, a.srq, "udp devices have shared receive queues")
	require.Equal(t, int64(recvPerChunk*bufLen), a.recvBytes(), "one chunk at first")
	small := a.MemoryFootprint()

	handled := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	// 2 chunks minus recvLow messages: the second chunk is needed, a third is not
	const n = 2*recvPerChunk - recvLow
	for i := range n {
		require.NoError(t, b.Send(a.Addrs(), a.QPN(), &Msg{Type: ConnREQ, Src: 2, Dst: 1, Seq: uint32(i)}))
		if i == 0 {
			require.Eventually(t, func() bool { return handled() == 1 }, 10*time.Second, time.Millisecond)
			continue
		}
		// the receive goroutine is held in the handler of message 0: the others wait in the CQ
		require.Eventually(t, func() bool { return a.rcq.Len() == i }, 10*time.Second, time.Millisecond, "message %d arrived", i)
		if i == recvPerChunk-recvLow { // fewer than recvLow posted: the limit fired
			require.Eventually(t, func() bool { return a.recvBytes() == 2*recvPerChunk*bufLen }, 10*time.Second, time.Millisecond)
		}
	}
	close(release)
	require.Eventually(t, func() bool { return handled() == n }, 10*time.Second, time.Millisecond)
	for i, s := range got {
		require.EqualValues(t, i, s)
	}
	require.Equal(t, int64(2*recvPerChunk*bufLen), a.recvBytes())
	require.GreaterOrEqual(t, a.MemoryFootprint()-small, int64(recvPerChunk*bufLen), "the footprint counts the new chunk")
}
