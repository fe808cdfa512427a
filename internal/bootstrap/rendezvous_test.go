package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

func startServer(t *testing.T, size int) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := NewServer(ln, size, WithJobID("job-test"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func rankInfo(s *Server, r, size int) Info {
	return Info{Launcher: LauncherGoarmci, Rank: r, Size: size, LocalRank: -1, LocalSize: -1,
		Host: fmt.Sprintf("h%d", r%2), HostID: fmt.Sprintf("node%d", r%2), RDV: s.Addr().String()}
}

// runRanks runs fn on size ranks connected to one server, as goroutines.
func runRanks(t *testing.T, s *Server, size int, fn func(c *Client) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var g errgroup.Group
	for r := range size {
		g.Go(func() error {
			c, err := Connect(ctx, rankInfo(s, r, size))
			if err != nil {
				return fmt.Errorf("rank %d connect: %w", r, err)
			}
			ferr := fn(c)
			return errors.Join(ferr, c.Close())
		})
	}
	require.NoError(t, g.Wait())
}

func TestAllGatherBarrier(t *testing.T) {
	const size = 8
	s := startServer(t, size)
	runRanks(t, s, size, func(c *Client) error {
		ctx := context.Background()
		if c.JobID() != "job-test" {
			return fmt.Errorf("job id %q", c.JobID())
		}
		for round := range 5 {
			// Different lengths per rank, including empty.
			mine := []byte(strings.Repeat(fmt.Sprintf("%d.%d;", c.Rank(), round), c.Rank()))
			parts, err := c.AllGather(ctx, mine)
			if err != nil {
				return err
			}
			if len(parts) != size {
				return fmt.Errorf("%d parts", len(parts))
			}
			for r, p := range parts {
				want := strings.Repeat(fmt.Sprintf("%d.%d;", r, round), r)
				if string(p) != want {
					return fmt.Errorf("rank %d round %d: part %d = %q, want %q", c.Rank(), round, r, p, want)
				}
			}
			if err := c.Barrier(ctx); err != nil {
				return err
			}
		}
		// Node locality from the first exchange: even ranks on node0, odd on node1.
		peers := c.Peers()
		for r, p := range peers {
			if p.Rank != r || p.HostID != fmt.Sprintf("node%d", r%2) || p.Host != fmt.Sprintf("h%d", r%2) {
				return fmt.Errorf("peer %d = %+v", r, p)
			}
		}
		want := []int{0, 2, 4, 6}
		if c.Rank()%2 == 1 {
			want = []int{1, 3, 5, 7}
		}
		if fmt.Sprint(c.LocalRanks()) != fmt.Sprint(want) {
			return fmt.Errorf("local ranks %v, want %v", c.LocalRanks(), want)
		}
		if !c.SameNode((c.Rank()+2)%size) || c.SameNode((c.Rank()+1)%size) || c.SameNode(-1) {
			return fmt.Errorf("SameNode wrong")
		}
		return nil
	})
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("server not done after every rank closed")
	}
	assert.NoError(t, s.Err())
}

// TestBarrierSeparates: no rank leaves a barrier before every rank has entered it.
func TestBarrierSeparates(t *testing.T) {
	const size = 5
	s := startServer(t, size)
	var mu sync.Mutex
	entered := 0
	runRanks(t, s, size, func(c *Client) error {
		mu.Lock()
		entered++
		mu.Unlock()
		if err := c.Barrier(context.Background()); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if entered != size {
			return fmt.Errorf("rank %d left the barrier with %d entered", c.Rank(), entered)
		}
		return nil
	})
}

func TestKeyValue(t *testing.T) {
	const size = 3
	s := startServer(t, size)
	runRanks(t, s, size, func(c *Client) error {
		ctx := context.Background()
		if c.Rank() == 2 {
			// Put after the others are already waiting in Get.
			time.Sleep(20 * time.Millisecond)
			if err := c.Put(ctx, "answer", []byte("42")); err != nil {
				return err
			}
		}
		v, err := c.Get(ctx, "answer")
		if err != nil {
			return err
		}
		if string(v) != "42" {
			return fmt.Errorf("got %q", v)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err = c.Get(short, fmt.Sprintf("never-%d", c.Rank()))
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("get of a missing key: %v", err)
		}
		// The client still works after a Get timeout.
		return c.Barrier(ctx)
	})
}

func TestMissingRankTimeoutNamesIt(t *testing.T) {
	const size = 4
	s := startServer(t, size)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	errs := make([]error, size)
	var wg sync.WaitGroup
	for _, r := range []int{0, 2} { // ranks 1 and 3 never come
		wg.Go(func() {
			c, err := Connect(ctx, rankInfo(s, r, size))
			if c != nil {
				c.Close()
			}
			errs[r] = err
		})
	}
	wg.Wait()
	for _, r := range []int{0, 2} {
		err := errs[r]
		require.Error(t, err, "rank %d", r)
		assert.ErrorIs(t, err, ErrStartupTimeout)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "launcher goarmci")
		assert.Contains(t, err.Error(), "ranks that never arrived: 1,3:")
	}
	assert.Equal(t, []int{1, 3}, s.Missing(0))
}

func TestTimeoutAfterStartupNamesRank(t *testing.T) {
	const size = 3
	s := startServer(t, size)
	ctx := context.Background()
	clients := make([]*Client, size)
	var g errgroup.Group
	for r := range size {
		g.Go(func() (err error) { clients[r], err = Connect(ctx, rankInfo(s, r, size)); return })
	}
	require.NoError(t, g.Wait())
	// Ranks 0 and 1 enter collective #1, rank 2 does not.
	for r := range 2 {
		g.Go(func() error {
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			_, err := clients[r].AllGather(short, []byte{byte(r)})
			return err
		})
	}
	err := g.Wait()
	require.ErrorIs(t, err, ErrTimeout)
	assert.NotErrorIs(t, err, ErrStartupTimeout)
	assert.Contains(t, err.Error(), "collective #1")
	assert.Contains(t, err.Error(), "never arrived: 2:")
	// A client whose collective failed refuses further collectives.
	_, err2 := clients[0].AllGather(ctx, nil)
	assert.ErrorIs(t, err2, ErrTimeout)
	for _, c := range clients {
		c.Close()
	}
}

func TestRankLostFailsOthers(t *testing.T) {
	const size = 3
	s := startServer(t, size)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clients := make([]*Client, size)
	var g errgroup.Group
	for r := range size {
		g.Go(func() (err error) { clients[r], err = Connect(ctx, rankInfo(s, r, size)); return })
	}
	require.NoError(t, g.Wait())
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() { _, errs[r] = clients[r].AllGather(ctx, []byte("x")) })
	}
	clients[2].conn.Close() // rank 2 dies without goodbye
	wg.Wait()
	for r, err := range errs {
		require.ErrorIs(t, err, ErrPeerLost, "rank %d", r)
		assert.Contains(t, err.Error(), "rank 2")
	}
	assert.ErrorIs(t, s.Err(), ErrPeerLost)
	for _, c := range clients {
		c.Close()
	}
	<-s.Done()
}

func TestRefused(t *testing.T) {
	s := startServer(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info := rankInfo(s, 0, 2)
	info.Size = 3
	_, err := Connect(ctx, info)
	require.ErrorIs(t, err, ErrRefused)
	assert.Contains(t, err.Error(), "3 ranks")

	// Duplicate rank: the first connection holds rank 1 (it waits in the first exchange).
	done := make(chan error, 1)
	go func() {
		c, err := Connect(ctx, rankInfo(s, 1, 2))
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return len(s.Missing(0)) == 1 }, 5*time.Second, time.Millisecond)
	_, err = Connect(ctx, rankInfo(s, 1, 2))
	require.ErrorIs(t, err, ErrRefused)
	assert.Contains(t, err.Error(), "joined twice")
	// Rank 0 arrives: rank 1's Connect completes.
	c0, err := Connect(ctx, rankInfo(s, 0, 2))
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.NoError(t, c0.Close())
}

func TestSingleProcessHostsItself(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, Info{Launcher: LauncherSingle, Rank: 0, Size: 1, Host: "h", HostID: "h/1"})
	require.NoError(t, err)
	parts, err := c.AllGather(ctx, []byte("solo"))
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("solo")}, parts)
	assert.Equal(t, []int{0}, c.LocalRanks())
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "idempotent")
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// connectAll connects size ranks from infos and runs one AllGather of each rank's number.
func connectAll(t *testing.T, infos []Info) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var g errgroup.Group
	for _, info := range infos {
		g.Go(func() error {
			c, err := Connect(ctx, info)
			if err != nil {
				return fmt.Errorf("rank %d: %w", info.Rank, err)
			}
			parts, err := c.AllGather(ctx, []byte{byte(info.Rank)})
			if err == nil {
				for r, p := range parts {
					if len(p) != 1 || int(p[0]) != r {
						err = fmt.Errorf("rank %d: part %d = %v", info.Rank, r, p)
					}
				}
			}
			if err == nil && c.JobID() == "" {
				err = fmt.Errorf("empty job id")
			}
			return errors.Join(err, c.Close())
		})
	}
	require.NoError(t, g.Wait())
}

func TestRank0HostsAtGivenRDV(t *testing.T) {
	addr := net.JoinHostPort("127.0.0.1", freePort(t))
	var infos []Info
	for r := range 3 {
		infos = append(infos, Info{Launcher: LauncherOpenMPI, Rank: r, Size: 3, RDV: addr, Host: "h", HostID: "h"})
	}
	connectAll(t, infos)
}

func TestSlurmDerivedPort(t *testing.T) {
	job := fmt.Sprintf("%d.0", time.Now().UnixNano()%1000000)
	port := slurmPort(job)
	assert.Equal(t, port, slurmPort(job), "same on every rank")
	assert.True(t, port >= 20000 && port < 32000)
	if ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port)); err != nil {
		t.Skipf("derived port %d busy: %v", port, err)
	} else {
		ln.Close()
	}
	var infos []Info
	for r := range 3 {
		infos = append(infos, Info{Launcher: LauncherSlurm, Rank: r, Size: 3, JobID: job,
			Nodelist: "localhost,node[2-3]", Host: "h", HostID: "h"})
	}
	connectAll(t, infos)
}

// TestOpenMPIWithoutRDVOrFile: an Info built by hand without GOARMCI_RDV nor a rendezvous file
// (Detect always sets one) is a bad environment, not a wait.
func TestOpenMPIWithoutRDVOrFile(t *testing.T) {
	_, err := Connect(context.Background(), Info{Launcher: LauncherOpenMPI, Rank: 1, Size: 2})
	require.ErrorIs(t, err, ErrBadEnv)
	assert.Contains(t, err.Error(), "GOARMCI_RDV")
}

func TestUnreachableRendezvous(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", freePort(t))
	_, err := Connect(ctx, Info{Launcher: LauncherSlurm, Rank: 1, Size: 2, RDV: addr})
	require.ErrorIs(t, err, ErrStartupTimeout)
	assert.Contains(t, err.Error(), "launcher slurm")
	assert.Contains(t, err.Error(), "rank 0")
	assert.Contains(t, err.Error(), addr)
}

// TestNoGoroutineLeak: clients and a server, closed, leave no goroutine behind.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := NewServer(ln, 3)
	require.NoError(t, err)
	runRanks(t, s, 3, func(c *Client) error { return c.Barrier(context.Background()) })
	// A rank-0-hosted service too.
	c, err := Connect(context.Background(), Info{Launcher: LauncherSingle, Rank: 0, Size: 1})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())
	// Poll in this goroutine (assert.Eventually would add goroutines of its own).
	for i := 0; i < 2000 && runtime.NumGoroutine() > before; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if runtime.NumGoroutine() > before {
		t.Errorf("goroutine leak")
		buf := make([]byte, 1<<20)
		t.Logf("goroutines: before %d, now %d\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}
