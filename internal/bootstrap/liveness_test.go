package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/goarmci/goarmci/internal/secret"
)

func TestDetectorCore(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := newDetector(4, 2*time.Second, 30*time.Second)
	for k := range 4 {
		d.join(k, t0)
		d.hostHeard(k, t0.Add(time.Hour)) // every host answers (a stopped process's kernel does)
	}
	// A close before goodbye is a failure, once.
	r, ok := d.closed(1)
	assert.True(t, ok)
	assert.Equal(t, FailExited, r)
	_, ok = d.closed(1)
	assert.False(t, ok, "declared once")
	assert.True(t, d.failed(1))
	// Goodbye, then close: clean; its silence is harmless too.
	d.bye(2)
	_, ok = d.closed(2)
	assert.False(t, ok, "a rank that said goodbye is not failed")
	assert.False(t, d.failed(2))
	// Silence: declared after the timeout less one heartbeat period (2 s - 250 ms: with a
	// check every period, within the timeout), not before; heard members are not.
	d.heard(0, t0.Add(1500*time.Millisecond))
	assert.Empty(t, d.tick(t0.Add(1749*time.Millisecond)))
	assert.Equal(t, []declared{{3, FailSilent, 2 * time.Second}}, d.tick(t0.Add(1750*time.Millisecond)))
	assert.Empty(t, d.tick(t0.Add(3*time.Second)), "each member declared at most once")
	assert.Equal(t, []declared{{0, FailSilent, 2 * time.Second}}, d.tick(t0.Add(3250*time.Millisecond)))
	_, ok = d.closed(3)
	assert.False(t, ok, "a silent member's later close is not a second failure")
	// Out of range and never-joined members are ignored; no timeout: silence never fails.
	_, ok = d.closed(9)
	assert.False(t, ok)
	// A silent member whose host does not answer either is cut off by the network: it is
	// declared only after the partition timeout plus the failure timeout, as unreachable.
	d = newDetector(2, 2*time.Second, 30*time.Second)
	d.join(0, t0)
	d.join(1, t0)
	d.hostHeard(0, t0.Add(500*time.Millisecond)) // then the network goes
	d.hostHeard(1, t0.Add(500*time.Millisecond))
	assert.Empty(t, d.tick(t0.Add(2*time.Second)), "hosts silent since 0.5 s: a partition so far")
	assert.Empty(t, d.tick(t0.Add(9*time.Second)))
	d.hostHeard(1, t0.Add(10800*time.Millisecond)) // host 1 answers again: a stopped process
	assert.Equal(t, []declared{{1, FailSilent, 2 * time.Second}}, d.tick(t0.Add(11*time.Second)))
	assert.Empty(t, d.tick(t0.Add(31999*time.Millisecond)))
	assert.Equal(t, []declared{{0, FailUnreachable, 32 * time.Second}}, d.tick(t0.Add(32*time.Second)))
	d = newDetector(1, 2*time.Second, 0)
	d.join(0, t0)
	assert.Empty(t, d.tick(t0.Add(time.Hour)), "partition timeout 0: an unreachable member waits")
	d = newDetector(2, 0, 30*time.Second)
	d.join(0, t0)
	assert.Empty(t, d.tick(t0.Add(time.Hour)))
	_, ok = d.closed(1)
	assert.False(t, ok, "never joined")
	assert.True(t, d.fail(0))
	assert.False(t, d.fail(0))
}

func TestPeerFailedFrame(t *testing.T) {
	pf := &PeerFailure{Rank: 3, Reason: FailSilent, After: 1500 * time.Millisecond}
	var buf bytes.Buffer
	require.NoError(t, writeFrame(&buf, mPeerFailed, encodePeerFailed(pf)))
	f, err := readFrame(&buf)
	require.NoError(t, err)
	got, err := decodePeerFailed(f.payload, 4)
	require.NoError(t, err)
	assert.Equal(t, pf, got)
	assert.ErrorIs(t, got, ErrPeerLost)
	assert.Equal(t, "rank 3 silent for the failure timeout (1.5s): stopped or hung before Finalize", got.Error())
	assert.Equal(t, "rank 2 unreachable for 32s (network partition or host down) before Finalize",
		(&PeerFailure{Rank: 2, Reason: FailUnreachable, After: 32 * time.Second}).Error())
	assert.Equal(t, "rank 1 exited before Finalize (its rendezvous connection closed)", (&PeerFailure{Rank: 1, Reason: FailExited}).Error())
	assert.Equal(t, "rank 1 exited (status 3) before Finalize", (&PeerFailure{Rank: 1, Reason: FailExited, Exit: Exited(3)}).Error())
	assert.Equal(t, "rank 1 was killed by signal 9 (SIGKILL) before Finalize",
		(&PeerFailure{Rank: 1, Reason: FailExited, Exit: Killed(syscall.SIGKILL)}).Error())
	for _, st := range []ExitStatus{Exited(0), Exited(255), Killed(syscall.SIGSEGV)} {
		want := &PeerFailure{Rank: 2, Reason: FailExited, Exit: st}
		got, err := decodePeerFailed(encodePeerFailed(want), 4)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	for _, st := range []ExitStatus{{Known: true, Code: 256}, {Known: true, Signal: 65}, {Code: 1}} {
		_, err = decodePeerFailed(encodePeerFailed(&PeerFailure{Rank: 2, Reason: FailExited, Exit: st}), 4)
		assert.ErrorIs(t, err, ErrProtocol, "bad status %+v", st)
	}
	_, err = decodePeerFailed(f.payload, 3)
	assert.ErrorIs(t, err, ErrProtocol, "rank outside the job")
	bad := encodePeerFailed(&PeerFailure{Rank: 0, Reason: 4})
	_, err = decodePeerFailed(bad, 4)
	assert.ErrorIs(t, err, ErrProtocol, "unknown reason")
	_, err = decodePeerFailed(f.payload[:10], 4)
	assert.ErrorIs(t, err, ErrProtocol, "truncated")
}

// failureLog collects a client's OnPeerFailure reports.
type failureLog struct {
	mu  sync.Mutex
	got map[int]error
	ch  chan int
}

func watch(c *Client) *failureLog {
	l := &failureLog{got: map[int]error{}, ch: make(chan int, 16)}
	c.OnPeerFailure(func(rank int, cause error) {
		l.mu.Lock()
		l.got[rank] = cause
		l.mu.Unlock()
		l.ch <- rank
	})
	return l
}

func (l *failureLog) wait(t *testing.T, ctx context.Context) (int, error) {
	t.Helper()
	select {
	case r := <-l.ch:
		l.mu.Lock()
		defer l.mu.Unlock()
		return r, l.got[r]
	case <-ctx.Done():
		t.Fatalf("no failure reported: %v", ctx.Err())
	}
	return -1, nil
}

func connectRanks(t *testing.T, ctx context.Context, s *Server, size int) []*Client {
	t.Helper()
	clients := make([]*Client, size)
	var g errgroup.Group
	for r := range size {
		g.Go(func() (err error) { clients[r], err = Connect(ctx, rankInfo(s, r, size)); return })
	}
	require.NoError(t, g.Wait())
	return clients
}

// TestPeerFailureDeclared: a rank whose connection closes without goodbye is reported to every
// other rank's OnPeerFailure as "rank 2 exited before Finalize"; ranks that said goodbye are
// never reported, and the others' goodbyes after the failure are clean.
func TestPeerFailureDeclared(t *testing.T) {
	const size = 4
	s := startServer(t, size)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clients := connectRanks(t, ctx, s, size)
	logs := make([]*failureLog, size)
	for r, c := range clients {
		logs[r] = watch(c)
	}
	require.NoError(t, clients[3].Close()) // a clean end first: never reported
	clients[2].conn.Close()                // rank 2 dies without goodbye
	for r := range 2 {
		rank, cause := logs[r].wait(t, ctx)
		require.Equal(t, 2, rank, "rank %d", r)
		require.ErrorIs(t, cause, ErrPeerLost)
		require.Equal(t, "rank 2 exited before Finalize (its rendezvous connection closed)", cause.Error())
		_, err := clients[r].AllGather(ctx, nil)
		require.ErrorIs(t, err, ErrPeerLost, "collectives fail after a failure")
	}
	assert.Equal(t, []int{2}, s.Failed())
	// A late subscriber learns the failures known so far at once.
	late := watch(clients[0])
	rank, _ := late.wait(t, ctx)
	assert.Equal(t, 2, rank)
	// The survivors leave cleanly: no further failure.
	require.NoError(t, clients[0].Close())
	require.NoError(t, clients[1].Close())
	clients[2].Close()
	<-s.Done()
	assert.Equal(t, []int{2}, s.Failed())
	for r := range 2 {
		select {
		case x := <-logs[r].ch:
			t.Fatalf("rank %d: failure of rank %d reported after clean ends", r, x)
		default:
		}
	}
}

// TestPeerFailureSilent: a rank that joined and then says nothing (a stopped process: its
// connection stays open) is declared failed once the failure timeout passes without a
// heartbeat, and told so itself; live ranks' heartbeats keep them alive meanwhile.
func TestPeerFailureSilent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := NewServer(ln, 2, WithServerFailureTimeout(300*time.Millisecond))
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var c0 *Client
	done := make(chan error, 1)
	go func() {
		var err error
		c0, err = Connect(ctx, rankInfo(s, 0, 2))
		done <- err
	}()
	// Rank 1 by hand: hello, its part of the first exchange, then silence.
	raw := rawConn(t, s)
	f := rawJoin(t, raw, 1, 2, secret.Key{})
	require.Equal(t, mWelcome, f.typ)
	var pe enc
	pe.str("h")
	pe.str("n")
	var g enc
	g.u64(1)
	g.u64(0)
	g.bytes(pe.b)
	require.NoError(t, writeFrame(raw, mGather, g.b))
	require.NoError(t, <-done)
	defer c0.Close()
	log := watch(c0)
	rank, cause := log.wait(t, ctx)
	require.Equal(t, 1, rank)
	var pf *PeerFailure
	require.True(t, errors.As(cause, &pf))
	assert.Equal(t, FailSilent, pf.Reason)
	assert.Equal(t, 300*time.Millisecond, pf.After)
	// The silent rank, reading at last, finds its own declaration, then the end.
	told := false
	for {
		f, err := readFrame(raw)
		if err != nil {
			break
		}
		if f.typ == mPeerFailed {
			got, err := decodePeerFailed(f.payload, 2)
			require.NoError(t, err)
			told = told || got.Rank == 1
		}
	}
	assert.True(t, told, "the silent rank is told it was declared failed")
	assert.Equal(t, []int{1}, s.Failed(), "rank 0's heartbeats kept it alive")
}

// TestRendezvousHostFailure: when the connection to a rendezvous hosted by rank 0 (srun,
// mpiexec, a given GOARMCI_RDV) drops, the client declares rank 0 failed; when a rendezvous
// stops answering, the same after the failure timeout.
func TestRendezvousHostFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name   string
		reason FailReason
	}{{"closed", FailExited}, {"silent", FailSilent}} {
		t.Run(tc.name, func(t *testing.T) {
			// A fake rendezvous of rank 0: welcome (timeout 300 ms), answer the first exchange,
			// then hang up or go silent.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer ln.Close()
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				if fakeAdmit(c) != nil {
					return
				}
				var w enc
				w.str("job")
				w.u64(uint64(300 * time.Millisecond))
				w.u64(uint64(30 * time.Second))
				w.bytes(make([]byte, secret.Size))
				_ = writeFrame(c, mWelcome, w.b)
				f, err := readFrame(c)
				if err != nil {
					return
				}
				d := dec{b: f.payload}
				id, seq, mine := d.u64(), d.u64(), d.bytes()
				var pe enc
				pe.str("h0")
				pe.str("n0")
				var r enc
				r.u64(id)
				r.u64(seq)
				r.list([][]byte{pe.b, mine})
				_ = writeFrame(c, mGatherResult, r.b)
				if tc.reason == FailSilent {
					<-stop // read nothing, send nothing
				}
			}()
			c, err := Connect(ctx, Info{Launcher: LauncherSlurm, Rank: 1, Size: 2, RDV: ln.Addr().String(), Host: "h1", HostID: "n1"})
			require.NoError(t, err)
			defer c.Close()
			rank, cause := watch(c).wait(t, ctx)
			require.Equal(t, 0, rank)
			var pf *PeerFailure
			require.True(t, errors.As(cause, &pf), "%v", cause)
			assert.Equal(t, tc.reason, pf.Reason)
			_, err = c.AllGather(ctx, nil)
			assert.ErrorIs(t, err, ErrPeerLost)
		})
	}
}

// TestCleanEndsNotDeclared: a whole job that ends with goodbyes (Close) reports no failure,
// with heartbeats on.
func TestCleanEndsNotDeclared(t *testing.T) {
	const size = 3
	s := startServer(t, size)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clients := connectRanks(t, ctx, s, size)
	var logs []*failureLog
	var g errgroup.Group
	for _, c := range clients {
		logs = append(logs, watch(c))
		g.Go(func() error { return c.Barrier(ctx) })
	}
	require.NoError(t, g.Wait())
	for r, c := range clients {
		require.NoError(t, c.Close(), fmt.Sprintf("rank %d", r))
	}
	<-s.Done()
	require.NoError(t, s.Err())
	assert.Empty(t, s.Failed())
	for _, l := range logs {
		assert.Empty(t, l.ch)
	}
}

func TestExitWaitCore(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newExitWait(4, 100*time.Millisecond)
	// Close first: held until the status arrives.
	assert.False(t, w.closed(1, t0))
	assert.Empty(t, w.due(t0.Add(99*time.Millisecond)))
	assert.True(t, w.exited(1, Killed(syscall.SIGKILL)), "the held notice goes out with the status")
	assert.Empty(t, w.due(t0.Add(time.Hour)), "no longer held")
	// Status first: the close is declared at once.
	assert.False(t, w.exited(2, Exited(3)), "not closed yet: nothing to declare")
	assert.True(t, w.closed(2, t0))
	// No status within the bound: declared without.
	assert.False(t, w.closed(3, t0))
	assert.Empty(t, w.due(t0.Add(99*time.Millisecond)))
	assert.Equal(t, []int{3}, w.due(t0.Add(100*time.Millisecond)))
	assert.False(t, w.exited(3, Exited(1)), "a status after the notice changes nothing")
	// Outside the job: ignored.
	assert.False(t, w.closed(4, t0))
	assert.False(t, w.exited(-1, Exited(1)))
}

// TestExitStatusInNotice: with a launcher that reports exit statuses (goarmci run), a rank whose
// connection closes before its goodbye is declared with its status, whether the status comes
// after the close or before; without a status within the bound the notice says the connection
// closed.
func TestExitStatusInNotice(t *testing.T) {
	const size = 4
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := NewServer(ln, size, WithExitStatuses())
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clients := connectRanks(t, ctx, s, size)
	log := watch(clients[0])
	clients[1].conn.Close() // status after the close
	time.Sleep(10 * time.Millisecond)
	s.RankExited(1, Killed(syscall.SIGKILL))
	s.RankExited(2, Exited(3)) // status before the close
	clients[2].conn.Close()
	clients[3].conn.Close() // no status at all
	got := map[int]string{}
	for range 3 {
		r, cause := log.wait(t, ctx)
		got[r] = cause.Error()
	}
	assert.Equal(t, map[int]string{
		1: "rank 1 was killed by signal 9 (SIGKILL) before Finalize",
		2: "rank 2 exited (status 3) before Finalize",
		3: "rank 3 exited before Finalize (its rendezvous connection closed)",
	}, got)
	require.NoError(t, clients[0].Close())
}

// TestLateFrameOfFailedRankIgnored: a frame from an incarnation declared failed (a stopped rank
// resuming) changes nothing and ends its connection.
func TestLateFrameOfFailedRankIgnored(t *testing.T) {
	s := startServer(t, 2)
	sc := &sconn{rank: 1, inc: 1}
	s.mu.Lock()
	s.incarnations, s.failedInc[1] = 1, 1
	s.mu.Unlock()
	var e enc
	e.u64(7)
	e.str("late")
	e.bytes([]byte("x"))
	s.mu.Lock()
	msgs, stop := s.handleLocked(sc, frame{typ: mPut, payload: e.b})
	s.mu.Unlock()
	assert.Empty(t, msgs)
	assert.True(t, stop)
	s.mu.Lock()
	_, stored := s.kv["late"]
	s.mu.Unlock()
	assert.False(t, stored)
}

// TestMemberExpelled: a rank whose heartbeats stop (a stopped process, as its rendezvous sees
// it) is declared failed; Member then returns its own failure, while it returns nil on a live
// rank.
func TestMemberExpelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := NewServer(ln, 2, WithServerFailureTimeout(300*time.Millisecond))
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clients := connectRanks(t, ctx, s, 2)
	require.NoError(t, clients[0].Member(ctx))
	log := watch(clients[1])
	clients[1].stopHeartbeat() // silent from now on
	r, _ := log.wait(t, ctx)
	require.Equal(t, 1, r)
	err = clients[1].Member(ctx)
	var pf *PeerFailure
	require.True(t, errors.As(err, &pf), "%v", err)
	assert.Equal(t, 1, pf.Rank)
	assert.Equal(t, FailSilent, pf.Reason)
	require.NoError(t, clients[0].Member(ctx), "the live rank is still a member")
	clients[1].Close()
	clients[0].Close()
}
