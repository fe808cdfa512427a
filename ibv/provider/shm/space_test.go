//go:build linux

package shm

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/internal/xunix"
)

var ctlBytes = xunix.RoundPage(segmentSize(DefaultMaxMR, DefaultMaxQP))

// requireNoSpaceErr checks Open's error for a control file that does not fit in dir.
func requireNoSpaceErr(t *testing.T, err error, dir string) {
	t.Helper()
	require.ErrorIs(t, err, ErrNoSpace)
	require.ErrorIs(t, err, unix.ENOSPC)
	msg := err.Error()
	require.Contains(t, msg, fmt.Sprintf("%d-byte control file", ctlBytes), "names the bytes needed")
	require.Contains(t, msg, dir, "names the directory")
	require.Contains(t, msg, "GOARMCI_SHM_DIR", "names the knob that moves it")
}

// A control file on a full tmpfs (issue 21): Open fails with ErrNoSpace instead of the SIGBUS a
// sparse mapping gives at its first store, and leaves nothing in the directory.
func TestOpenFullTmpfs(t *testing.T) {
	dir := testutil.SmallTmpfs(t, 256<<10) // less than one control file (580 KiB)
	job := testJob()
	_, err := Open(Config{Job: job, Name: "r0", Dir: dir})
	requireNoSpaceErr(t, err, dir)
	require.Empty(t, testutil.DirNames(t, dir), "no file left behind")
}

// A tmpfs with room for one control file: the first endpoint opens there and works, the second
// gets ErrNoSpace and leaves nothing; once the first closes (its file removed) the second fits.
func TestOpenTmpfsRoomForOne(t *testing.T) {
	dir := testutil.SmallTmpfs(t, 1<<20)
	job := testJob()
	a := openEndCfg(t, Config{Job: job, Name: "a", Dir: dir})
	require.Equal(t, []string{"goarmci." + job + ".a.ctl"}, testutil.DirNames(t, dir))

	_, err := Open(Config{Job: job, Name: "b", Dir: dir})
	requireNoSpaceErr(t, err, dir)
	require.Equal(t, []string{"goarmci." + job + ".a.ctl"}, testutil.DirNames(t, dir), "only a's file")

	// a still works: a loopback write through its own control file in dir
	src, smr := allocMR(t, a, 4096, ibv.AccessAll)
	dst, dmr := allocMR(t, a, 4096, ibv.AccessAll)
	copy(src, pattern(4096, 9))
	q := a.newQP(t)
	connectQPs(t, a, a.qp, a, q, ibv.AccessAll)
	wc := do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{smr.SGE(0, 4096)}, RemoteAddr: dmr.Addr, RKey: dmr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, src, dst)

	require.NoError(t, a.qp.Destroy())
	require.NoError(t, q.Destroy())
	require.NoError(t, a.ctx.Close())
	require.Empty(t, testutil.DirNames(t, dir), "Close removed a's file")
	b, err := Open(Config{Job: job, Name: "b", Dir: dir})
	require.NoError(t, err, "the space a freed is usable")
	require.NoError(t, b.Close())
	require.Empty(t, testutil.DirNames(t, dir))
}

// Two endpoints whose control files live in a directory other than /dev/shm find each other
// there, move data, and remove their files at Close.
func TestCustomDir(t *testing.T) {
	dir := t.TempDir()
	job := testJob()
	a := openEndCfg(t, Config{Job: job, Name: "a", Dir: dir})
	b := openEndCfg(t, Config{Job: job, Name: "b", Dir: dir})
	require.ElementsMatch(t, []string{"goarmci." + job + ".a.ctl", "goarmci." + job + ".b.ctl"}, testutil.DirNames(t, dir))
	_, err := os.Stat(ctlPath(DefaultDir, job, "a"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing in /dev/shm")
	connectQPs(t, a, a.qp, b, b.qp, ibv.AccessAll)
	src, smr := allocMR(t, a, 8192, ibv.AccessAll)
	dst, dmr := allocMR(t, b, 8192, ibv.AccessAll)
	copy(src, pattern(8192, 3))
	wc := do(t, a, a.qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{smr.SGE(0, 8192)}, RemoteAddr: dmr.Addr, RKey: dmr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, src, dst)
	for _, e := range []*end{a, b} {
		require.NoError(t, e.qp.Destroy())
		require.NoError(t, e.ctx.Close())
	}
	require.Empty(t, testutil.DirNames(t, dir), "Close removed both files")
}

// failPreallocate makes the provider's preallocation fail with err for the rest of the test.
// Tests using it must not run in parallel.
func failPreallocate(t *testing.T, err error) {
	saved := preallocate
	preallocate = func(int, int) error { return fmt.Errorf("xunix: fallocate (injected): %w", err) }
	t.Cleanup(func() { preallocate = saved })
}

// A failed preallocation of a control file (injected, so it runs without root): ENOSPC is
// ErrNoSpace, another error is not; either way no file is left and a retry afterwards works.
func TestOpenPreallocateFails(t *testing.T) {
	dir := t.TempDir()
	job := testJob()
	t.Run("enospc", func(t *testing.T) {
		failPreallocate(t, unix.ENOSPC)
		_, err := Open(Config{Job: job, Name: "r0", Dir: dir})
		requireNoSpaceErr(t, err, dir)
		require.Empty(t, testutil.DirNames(t, dir))
	})
	t.Run("eio", func(t *testing.T) {
		failPreallocate(t, unix.EIO)
		_, err := Open(Config{Job: job, Name: "r0", Dir: dir})
		require.ErrorIs(t, err, unix.EIO)
		require.False(t, errors.Is(err, ErrNoSpace))
		require.Contains(t, err.Error(), dir)
		require.Empty(t, testutil.DirNames(t, dir))
	})
	ctx, err := Open(Config{Job: job, Name: "r0", Dir: dir})
	require.NoError(t, err)
	require.NoError(t, ctx.Close())
	require.Empty(t, testutil.DirNames(t, dir))
}

// A shared buffer whose pages cannot be allocated (injected: a memfd lives on the kernel's
// internal tmpfs, which no test can fill): AllocBuffer fails with ErrNoSpace naming the bytes,
// and keeps no buffer.
func TestAllocBufferPreallocateFails(t *testing.T) {
	live := func() int {
		buffers.mu.Lock()
		defer buffers.mu.Unlock()
		return len(buffers.live)
	}
	before := live()
	for _, c := range []struct {
		errno   error
		noSpace bool
	}{{unix.ENOSPC, true}, {unix.ENOMEM, true}, {unix.EIO, false}} {
		t.Run(c.errno.Error(), func(t *testing.T) {
			failPreallocate(t, c.errno)
			b, err := AllocBuffer(5000)
			require.Nil(t, b)
			require.ErrorIs(t, err, c.errno)
			require.Equal(t, c.noSpace, errors.Is(err, ErrNoSpace))
			require.Contains(t, err.Error(), "8192 bytes")
			require.Equal(t, before, live(), "no buffer kept")
		})
	}
	b, err := AllocBuffer(5000)
	require.NoError(t, err, "works again")
	require.NoError(t, FreeBuffer(b))
}

// AllocBuffer's memory is allocated up front: the memfd's blocks cover the whole mapping before
// anything touches it.
func TestAllocBufferPreallocated(t *testing.T) {
	const n = 1 << 20
	b, err := AllocBuffer(n)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, FreeBuffer(b)) })
	buffers.mu.Lock()
	buf := buffers.live[addrOf(b)]
	buffers.mu.Unlock()
	require.NotNil(t, buf)
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(buf.fd, &st))
	require.GreaterOrEqual(t, st.Blocks*512, int64(n), "blocks allocated before the first touch")
}
