package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
)

// A consumer that waits by polling its completion queue and calling the device's progress
// call gets every completion with the right data, both ways at once, on one processor
// (GOMAXPROCS 1: the Go scheduler consults the netpoller only when nothing else can run, and
// both consumers always can): the progress call read the parked readers' sockets in their
// place. Also under a stream reader that polls itself (Config.PollBudget), which reads with
// ReadPlaced and calls the progress call between polls.
func TestProgress(t *testing.T) {
	for _, budget := range []time.Duration{0, 200 * time.Microsecond} {
		t.Run(fmt.Sprintf("poll=%v", budget), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			cfg := Config{PollBudget: budget, TimeoutFloor: 200 * time.Millisecond}
			da, db := open(t, 1, cfg), open(t, 1, cfg)
			var progress [2]func() bool
			var woke atomic.Uint64 // progress calls that reported a wake
			for i, dev := range []*ibv.Context{da, db} {
				pr, err := Progress(dev)
				require.NoError(t, err)
				progress[i] = func() bool {
					w := pr()
					if w {
						woke.Add(1)
					}
					return w
				}
			}
			x, y := connect(t, da, db, 1<<20, false, 7)
			bothWays(t, x, y, func(s, peer *side, i int) error { return consumerTraffic(s, peer, byte(i+1), progress[i]) })
			var kicks, steals uint64
			for _, dev := range []*ibv.Context{da, db} {
				d, err := engine.DriverOf[*driver]("tcp", dev)
				require.NoError(t, err)
				kicks += d.streams.kicks.Load()
				steals += d.streams.steals.Load()
			}
			// Which of the two a wake was depends on where the reader was when the consumer
			// called (parked inside serve: read in its place, a steal; parked elsewhere, or
			// a read in its place refused: woken, a kick), which the scheduler decides:
			// mostly steals without a poll budget, kicks with one, but either may be all of
			// them on a loaded machine (the race detector under parallel packages).
			t.Logf("kicks %d, steals %d", kicks, steals)
			require.NotZero(t, kicks+steals, "no progress call read a parked reader's socket or woke it")
			require.NotZero(t, woke.Load(), "no progress call reported its wake")
			require.LessOrEqual(t, woke.Load(), kicks+steals, "a progress call reported a wake it did not make")
		})
	}
}

// A kick that comes late, after its reader or writer woke by itself, leaves a deadline in the
// past on the socket: the stream goes on, the next read and write clear it.
func TestProgressStaleDeadline(t *testing.T) {
	cfg := Config{TimeoutFloor: 200 * time.Millisecond}
	da, db := open(t, 1, cfg), open(t, 1, cfg)
	x, y := connect(t, da, db, 1<<20, false, 7)
	bothWays(t, x, y, func(s, peer *side, i int) error { return consumerTraffic(s, peer, byte(i+1), nil) })
	var streams []*conn
	for _, dev := range []*ibv.Context{da, db} {
		d, err := engine.DriverOf[*driver]("tcp", dev)
		require.NoError(t, err)
		d.mu.Lock()
		for c := range d.all {
			require.NoError(t, c.nc.SetReadDeadline(kickTime))
			require.NoError(t, c.nc.SetWriteDeadline(kickTime))
			streams = append(streams, c)
		}
		d.mu.Unlock()
	}
	require.NotEmpty(t, streams)
	x, y = connect(t, da, db, 1<<20, false, 7) // new queue pairs and memory, the same streams
	bothWays(t, x, y, func(s, peer *side, i int) error { return consumerTraffic(s, peer, byte(i+1), nil) })
	for _, c := range streams {
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		require.NoError(t, err, "a stream broke")
	}
}

// Progress refuses a device of another provider.
func TestProgressNotTCP(t *testing.T) {
	_, err := Progress(&ibv.Context{})
	require.ErrorIs(t, err, ibv.ErrInvalidArgument)
}

// consumerTraffic writes and reads back small and large patterns in its half of peer's MR and
// adds to a counter word there, checking every value; it waits with postWait (progress nil) or
// by polling and calling progress.
func consumerTraffic(s, peer *side, seed byte, progress func() bool) error {
	postWait := func(s *side, wr ibv.SendWR) (ibv.WC, error) { return postPoll(s, wr, progress) }
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

// postPoll posts wr signaled and waits for its completion (at most 30 s): parked in the
// completion queue's Wait (progress nil), or polling it, calling progress and yielding between
// polls.
func postPoll(s *side, wr ibv.SendWR, progress func() bool) (ibv.WC, error) {
	wr.Flags |= ibv.SendSignaled
	if err := s.qp.PostSend(&wr); err != nil {
		return ibv.WC{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wc [1]ibv.WC
	for i := 0; s.cq.Poll(wc[:]) == 0; i++ {
		if progress == nil {
			if err := s.cq.Wait(ctx); err != nil {
				return ibv.WC{}, err
			}
			continue
		}
		if i%1024 == 1023 && ctx.Err() != nil {
			return ibv.WC{}, ctx.Err()
		}
		progress()
		runtime.Gosched()
	}
	return wc[0], nil
}

// The arrival hook runs after the frames that change a consumer's memory were delivered: each
// side's hook has run by the time the other side's writes into it completed and were read back
// (the writes are acknowledged from the batch whose end calls the hook; nothing here is timed,
// the hook's channel is waited for). A device of another provider is refused.
func TestOnArrival(t *testing.T) {
	cfg := Config{TimeoutFloor: 200 * time.Millisecond}
	da, db := open(t, 1, cfg), open(t, 1, cfg)
	var calls [2]atomic.Uint64
	arrived := [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	for i, dev := range []*ibv.Context{da, db} {
		require.NoError(t, OnArrival(dev, func() {
			calls[i].Add(1)
			select {
			case arrived[i] <- struct{}{}:
			default:
			}
		}))
	}
	x, y := connect(t, da, db, 1<<20, false, 7)
	bothWays(t, x, y, func(s, peer *side, i int) error { return consumerTraffic(s, peer, byte(i+1), nil) })
	for i := range arrived {
		<-arrived[i] // the test's deadline ends a hook that never runs
		require.NotZero(t, calls[i].Load())
	}
	require.NoError(t, OnArrival(da, nil))
	require.ErrorIs(t, OnArrival(&ibv.Context{}, func() {}), ibv.ErrInvalidArgument)
}
