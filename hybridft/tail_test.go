package hybridft

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/wire"
	"github.com/goarmci/goarmci/internal/testutil"
)

// An accumulate fails twice: first after the responder applied its first packet (the recovery
// re-issues the unexecuted tail), then before the responder applied any packet of that tail, or
// after it applied the tail's first packet. The second recovery must resume from what both
// incarnations executed, not from the start of the accumulate nor at an offset counted from it
// (each element must end at exactly 1).
func TestTailFailsAgainExactlyOnce(t *testing.T) {
	for _, tailApplied := range []int{0, 1} {
		t.Run(fmt.Sprintf("tail-packets-applied-%d", tailApplied), func(t *testing.T) { tailFailsAgain(t, tailApplied) })
	}
}

func tailFailsAgain(t *testing.T, tailApplied int) {
	testutil.CheckGoroutines(t)
	o := testOptions()
	o.APM = false
	const accElems = 2048 // 16 KiB: 4 packets at the 4 KiB path MTU
	var (
		mu    sync.Mutex
		stage int    // 0 before, 1 original (drop after its first packet), 2 tail (drop all), 3 pass
		base  uint32 // PSN of the first packet of the message of the stage
	)
	drop := func(port uint8, pkt []byte) bool {
		var p wire.Packet
		if wire.Decode(pkt, &p) != nil || p.Opcode != wire.OpAccumulate {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if p.Flags&wire.FlagFirst != 0 && (stage == 0 || p.PSN != base) && stage < 3 {
			stage++ // a new message: the original, its first tail, the re-issue after the second fault
			base = p.PSN
		}
		switch stage {
		case 1:
			return p.PSN != base
		case 2:
			return wire.PSNDiff(p.PSN, base) >= int32(tailApplied)
		}
		return false
	}
	a, b := newNode(t, o, 1, 1<<20), newNodeTCP(t, o, 1, 1<<20, drop)
	link(t, a, b, 1, ConnectOptions{})
	ones := a.buf[:accElems*8]
	for i := 0; i < accElems; i++ {
		binary.LittleEndian.PutUint64(ones[i*8:], 1)
	}
	cl := newCollector(a.ep)
	wr := ibv.SendWR{ID: 7, Opcode: ibv.OpAccumulate, LocalBuf: ones, RemoteAddr: b.mr.Addr + 4096,
		RKey: b.mr.RKey, AccType: ibv.AccInt64, Scale: 1}
	postRetry(t, a.conns[0], cl, &wr)
	cl.waitAll(t, 1)
	wc := cl.got[7]
	require.Equal(t, ibv.WCSuccess, wc.Status, "%v", CompletionError(&wc))
	mu.Lock()
	require.Equal(t, 3, stage, "the accumulate failed twice and was re-issued")
	mu.Unlock()
	for i := 0; i < accElems; i++ {
		require.Equal(t, uint64(1), binary.LittleEndian.Uint64(b.buf[4096+8*i:]), "element %d", i)
	}
	st := a.conns[0].Stats()
	require.GreaterOrEqual(t, st.Recoveries, int64(2), "%+v", st)
	require.Equal(t, int64(2), st.Reposted, "%+v", st)
}

// A QP_FATAL event reaches the manager after the failed completions of the same fault, which
// may have started a recovery that re-established the queue pair meanwhile: the stale event
// leaves the working connection alone (it made TestTailFailsAgainExactlyOnce recover a third
// time, about once in 40 runs); a fatal event of the queue pair as it is (in ERROR) fails it.
func TestStaleQPFatalIgnored(t *testing.T) {
	testutil.CheckGoroutines(t)
	o := testOptions()
	o.APM = false
	a, b := newNode(t, o, 1, 1<<12), newNode(t, o, 1, 1<<12)
	link(t, a, b, 1, ConnectOptions{})
	c := a.conns[0]
	state := func() connState {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.state
	}
	fatal := ibv.AsyncEvent{Type: ibv.EventQPFatal, QPNum: c.QP().Num()}
	a.m.handleEvent(a.ep.ft, fatal, time.Now())
	require.Equal(t, stNormal, state(), "a stale event: the queue pair is in RTS")
	require.Zero(t, c.Stats().Recoveries)

	require.NoError(t, c.QP().Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState))
	a.m.handleEvent(a.ep.ft, fatal, time.Now())
	require.Eventually(t, func() bool { return c.Stats().Recoveries == 1 && state() == stNormal }, 30*time.Second,
		time.Millisecond, "the fatal event of the queue pair in ERROR is recovered")
}
