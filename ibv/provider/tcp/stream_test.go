package tcp

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
)

// TestBulkBothWays drives both streams of a connection at once with many large RDMA writes and
// reads in flight from each side (frames queued behind full sockets and written by reference,
// partial writes, payloads placed straight into memory, multi-SGE requests that take the copying
// paths), then checks every byte.
func TestBulkBothWays(t *testing.T) {
	for _, seg := range []int{0, DefaultSegmentSize} {
		t.Run(fmt.Sprint(seg), func(t *testing.T) { bulkBothWays(t, seg) })
	}
}

func bulkBothWays(t *testing.T, seg int) {
	size, depth := 3<<20+777, 6 // not a multiple of the segment size
	if testing.Short() {
		size, depth = 1<<20+777, 3
	}
	// a generous ACK timeout: a loaded machine (race builds) must not exhaust the retries
	cfg := Config{TimeoutFloor: 200 * time.Millisecond, SegmentSize: seg}
	a, b := open(t, 1, cfg), open(t, 1, cfg)
	x, y := connect(t, a, b, 2*depth*size, false, 7)
	bothWays(t, x, y, func(s, peer *side, i int) error { return bulk(s, peer, size, depth, byte(i*100)) })
}

// bothWays runs traffic from x to y and from y to x at once (i: 0 for x, 1 for y) and fails t
// with their errors.
func bothWays(t *testing.T, x, y *side, traffic func(s, peer *side, i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, s := range []*side{x, y} {
		peer := []*side{y, x}[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- traffic(s, peer, i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// bulk writes depth patterns into the first half of peer's MR (one of them from two local
// buffers), reads them back into local buffers (one into two), and compares.
func bulk(s, peer *side, size, depth int, seed byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// the peer writes into the second half of our MR at the same time: stay in the first half
	// of theirs
	base := uint64(0)
	if seed != 0 {
		base = uint64(depth * size)
	}
	srcs := make([][]byte, depth)
	for k := range srcs {
		srcs[k] = pattern(size, seed+byte(k))
	}
	wait := func(n int) error {
		var wc [16]ibv.WC
		for got := 0; got < n; {
			m := s.cq.Poll(wc[:])
			if m == 0 {
				if err := s.cq.Wait(ctx); err != nil {
					return err
				}
				continue
			}
			for _, c := range wc[:m] {
				if c.Status != ibv.WCSuccess {
					return fmt.Errorf("work request %d: %v", c.WRID, c.Status)
				}
			}
			got += m
		}
		return nil
	}
	lmr, err := s.pd.RegMR(make([]byte, size), ibv.AccessAll)
	if err != nil {
		return err
	}
	for k, src := range srcs {
		wr := ibv.SendWR{ID: uint64(k), Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled, LocalBuf: src,
			RemoteAddr: peer.mr.Addr + base + uint64(k*size), RKey: peer.mr.RKey}
		if k == 1 { // two SGEs: segments that straddle them are gathered (copied)
			copy(lmr.Buf(), src)
			wr.LocalBuf = nil
			wr.SGL = []ibv.SGE{lmr.SGE(0, 100001), lmr.SGE(100001, size-100001)}
		}
		if err := s.qp.PostSend(&wr); err != nil {
			return err
		}
	}
	if err := wait(depth); err != nil {
		return err
	}
	gots := make([][]byte, depth)
	for k := range gots {
		gots[k] = make([]byte, size)
		wr := ibv.SendWR{ID: uint64(100 + k), Opcode: ibv.OpRDMARead, Flags: ibv.SendSignaled, LocalBuf: gots[k],
			RemoteAddr: peer.mr.Addr + base + uint64(k*size), RKey: peer.mr.RKey}
		if k == 2 { // read into two SGEs: a response straddling them is not placed
			clear(lmr.Buf())
			wr.LocalBuf = nil
			wr.SGL = []ibv.SGE{lmr.SGE(0, 70000), lmr.SGE(70000, size-70000)}
		}
		if err := s.qp.PostSend(&wr); err != nil {
			return err
		}
	}
	if err := wait(depth); err != nil {
		return err
	}
	copy(gots[2], lmr.Buf())
	for k := range srcs {
		if !bytes.Equal(srcs[k], peer.mr.Buf()[base+uint64(k*size):base+uint64((k+1)*size)]) {
			return fmt.Errorf("seed %d: write %d differs", seed, k)
		}
		if !bytes.Equal(srcs[k], gots[k]) {
			return fmt.Errorf("seed %d: read %d differs", seed, k)
		}
	}
	return nil
}

// TestBrokenStreamsPlaced breaks streams again and again while large writes and reads with
// DefaultSegmentSize segments are placed straight into memory: every request completes once, with the
// right bytes (a placement cut short by a broken stream is dropped and retransmitted).
func TestBrokenStreamsPlaced(t *testing.T) {
	cfg := Config{SegmentSize: DefaultSegmentSize, TimeoutFloor: 50 * time.Millisecond}
	a, b := open(t, 1, cfg), open(t, 1, cfg)
	x, y := connect(t, a, b, 8<<20, false, 7)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
			d := provider.DeviceDriver(a).(*driver)
			if i%2 == 1 {
				d = provider.DeviceDriver(b).(*driver)
			}
			d.breakStreams()
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	for round := 0; round < rounds; round++ {
		src := pattern(4<<20+333, byte(round))
		wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.True(t, bytes.Equal(src, y.mr.Buf()[:len(src)]), "round %d write", round)
		got := make([]byte, len(src))
		wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.True(t, bytes.Equal(src, got), "round %d read", round)
	}
}
