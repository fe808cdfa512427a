package rma_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv/provider/shm"
	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// With the shared-memory directory full (issue 21: /dev/shm full killed every rank with
// SIGBUS), Init fails on every rank with an error wrapping ErrNoSpace, returns, and leaves no
// file in the directory.
func TestInitShmDirFull(t *testing.T) {
	testutil.CheckGoroutines(t)
	dir := testutil.SmallTmpfs(t, 256<<10) // less than one rank's control file
	const n = 2
	// a bound for a broken build, not a timing assertion: Init must return on its own
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := rmatest.NewGroup(n)
	job := fmt.Sprintf("full%d", time.Now().UnixNano()%1e9)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rt, err := rma.Init(ctx, &rma.Config{Bootstrap: g.Member(i), Transport: rma.TransportShm,
				HostID: "rmatest", Job: job, ShmDir: dir})
			if err == nil {
				_ = rt.Finalize(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	t.Logf("rank 0: %v", errs[0])
	for i, err := range errs {
		require.ErrorIs(t, err, rma.ErrNoSpace, "rank %d", i)
		require.False(t, errors.Is(err, context.DeadlineExceeded), "rank %d returned by itself", i)
		require.Contains(t, err.Error(), dir, "rank %d: the error names the directory", i)
		require.Contains(t, err.Error(), "GOARMCI_SHM_DIR", "rank %d: and the knob", i)
	}
	require.Empty(t, testutil.DirNames(t, dir), "no file left behind")
}

// Config.ShmDir moves the control files: ranks find each other there, and Finalize removes them.
func TestShmDirCustom(t *testing.T) {
	dir := t.TempDir()
	rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		// every control file was published there and removed once Init had connected every peer
		// (each rank removes its own before Init returns): nothing in the directory can outlive
		// the job, however it ends
		require.NoError(t, rt.Barrier(ctx))
		require.Empty(t, testutil.DirNames(t, dir), "control files after Init")
		seg, err := rt.Malloc(ctx, 4096)
		require.NoError(t, err)
		me, peer := rt.Rank(), 1-rt.Rank()
		src := []byte(fmt.Sprintf("from rank %d", me))
		require.NoError(t, rt.Put(ctx, src, seg, peer, 0))
		require.NoError(t, rt.Barrier(ctx))
		require.Equal(t, fmt.Sprintf("from rank %d", peer), string(seg.Local()[:len(src)]))
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, seg.Free(ctx))
	}, rmatest.Configure(func(_ int, c *rma.Config) { c.ShmDir = dir }))
	require.Empty(t, testutil.DirNames(t, dir), "Finalize removed the files")
}

// A rank whose part of a segment cannot be allocated does not leave the others waiting in
// Malloc's exchange: every rank fails (ErrNoSpace when that rank had no room, else
// ErrPeerAlloc), and the next Malloc works on every rank.
func TestMallocPartFails(t *testing.T) {
	for _, c := range []struct {
		name  string
		err   error
		other error
	}{
		{"no space", fmt.Errorf("shm: AllocBuffer: 8192 bytes (injected): %w", shm.ErrNoSpace), rma.ErrNoSpace},
		{"other", errors.New("injected allocation failure"), rma.ErrPeerAlloc},
	} {
		t.Run(c.name, func(t *testing.T) {
			rmatest.Run(t, 3, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				if rt.Rank() == 1 {
					rt.FailAlloc(c.err)
				}
				_, err := rt.Malloc(ctx, 4096)
				if rt.Rank() == 1 {
					require.ErrorIs(t, err, c.err)
				} else {
					require.ErrorIs(t, err, c.other)
					require.Contains(t, err.Error(), "rank 1")
				}
				require.NotErrorIs(t, err, context.DeadlineExceeded)
				rt.FailAlloc(nil)
				seg, err := rt.Malloc(ctx, 4096)
				require.NoError(t, err, "the collective sequence is intact")
				require.NoError(t, rt.Put(ctx, []byte{byte(rt.Rank() + 1)}, seg, (rt.Rank()+1)%3, 0))
				require.NoError(t, rt.Barrier(ctx))
				require.Equal(t, byte((rt.Rank()+2)%3+1), seg.Local()[0])
				require.NoError(t, rt.Barrier(ctx))
				require.NoError(t, seg.Free(ctx))
			})
		})
	}
}
