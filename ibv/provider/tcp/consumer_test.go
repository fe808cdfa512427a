package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
)

// The poll token: one reader of a device holds it at a time, a reader without a consumer never
// takes it, and a release hands it on.
func TestPollToken(t *testing.T) {
	var tok atomic.Bool
	a, b := &pollReader{poller: &tok}, &pollReader{poller: &tok}
	require.True(t, a.hold())
	require.True(t, a.hold(), "the holder holds it again")
	require.False(t, b.hold(), "taken")
	a.release()
	require.False(t, tok.Load())
	require.True(t, b.hold())
	require.False(t, a.hold())
	b.release()
	b.release() // twice changes nothing
	require.False(t, tok.Load())
	require.True(t, (&pollReader{}).hold(), "no token: always")
}

// Writes, reads, atomics and sends complete with the right data whatever the consumer is doing,
// both ways at once, while the state changes under the readers: the readers park at once for a
// busy consumer, poll and yield the processor for a spinning one, poll and yield to goroutines
// for a parked one, and one reader of a device polls at a time.
func TestConsumerStates(t *testing.T) {
	states := []ConsumerState{ConsumerBusy, ConsumerSpinning, ConsumerParked}
	names := []string{"busy", "spinning", "parked"}
	for _, fixed := range []int{0, 1, 2, -1} {
		name := "changing"
		if fixed >= 0 {
			name = names[fixed]
		}
		t.Run(name, func(t *testing.T) {
			var n atomic.Uint32
			consumer := func() ConsumerState {
				if fixed >= 0 {
					return states[fixed]
				}
				return states[n.Add(1)/64%3]
			}
			cfg := Config{PollBudget: 200 * time.Microsecond, Consumer: consumer, TimeoutFloor: 200 * time.Millisecond}
			x, y := connect(t, open(t, 1, cfg), open(t, 1, cfg), 1<<20, false, 7)
			bothWays(t, x, y, func(s, peer *side, i int) error { return consumerTraffic(s, peer, byte(i+1)) })
		})
	}
}

// consumerTraffic writes and reads back small and large patterns in its half of peer's MR and
// adds to a counter word there, checking every value.
func consumerTraffic(s, peer *side, seed byte) error {
	half := uint64(len(peer.mr.Buf()) / 2)
	base := peer.mr.Addr + uint64(seed-1)*half
	for i, size := range []int{8, 64, 4096, 64 << 10, 300 << 10} {
		src := pattern(size, seed+byte(i))
		if wc, err := postWait(s, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: base, RKey: peer.mr.RKey}); err != nil || wc.Status != ibv.WCSuccess {
			return fmt.Errorf("write %d: %v %v", size, wc.Status, err)
		}
		got := make([]byte, size)
		if wc, err := postWait(s, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: base, RKey: peer.mr.RKey}); err != nil || wc.Status != ibv.WCSuccess {
			return fmt.Errorf("read %d: %v %v", size, wc.Status, err)
		}
		if !bytes.Equal(src, got) {
			return fmt.Errorf("read %d: other bytes than written", size)
		}
	}
	ctr := base + half - 8
	res := make([]byte, 8)
	for i := range 200 {
		if wc, err := postWait(s, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: ctr, RKey: peer.mr.RKey, CompareAdd: 1}); err != nil || wc.Status != ibv.WCSuccess {
			return fmt.Errorf("fetch-add %d: %v %v", i, wc.Status, err)
		}
		if v := binary.LittleEndian.Uint64(res); v != uint64(i) {
			return fmt.Errorf("fetch-add %d returned %d", i, v)
		}
	}
	return nil
}

// postWait posts wr signaled and waits for its completion (at most 30 s).
func postWait(s *side, wr ibv.SendWR) (ibv.WC, error) {
	wr.Flags |= ibv.SendSignaled
	if err := s.qp.PostSend(&wr); err != nil {
		return ibv.WC{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wc [1]ibv.WC
	for s.cq.Poll(wc[:]) == 0 {
		if err := s.cq.Wait(ctx); err != nil {
			return ibv.WC{}, err
		}
	}
	return wc[0], nil
}
