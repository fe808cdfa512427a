//go:build linux

package xunix

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// blocks is the bytes fd has allocated on its file system.
func blocks(t *testing.T, fd int) int64 {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	return st.Blocks * 512
}

// withFallocate replaces the fallocate call for the rest of the test (not parallel).
func withFallocate(t *testing.T, f func(fd int, off, n int64) error) {
	saved := fallocate
	fallocate = f
	t.Cleanup(func() { fallocate = saved })
}

func TestPreallocateMemfd(t *testing.T) {
	const size = 3 << 20
	fd, err := MemfdCreate("xunix-prealloc", size)
	require.NoError(t, err)
	defer Close(fd)
	require.Zero(t, blocks(t, fd), "ftruncate leaves the file sparse")
	require.NoError(t, Preallocate(fd, size))
	require.GreaterOrEqual(t, blocks(t, fd), int64(size))
	st, err := Fstat(fd)
	require.NoError(t, err)
	require.Equal(t, int64(size), st.Size, "size unchanged")
	require.ErrorIs(t, Preallocate(fd, -1), unix.EINVAL)
}

// Large files are allocated in pieces; an interrupted piece is retried, a bounded number of times.
func TestPreallocatePiecesAndEINTR(t *testing.T) {
	fd, err := MemfdCreate("xunix-prealloc", 4096)
	require.NoError(t, err)
	defer Close(fd)
	var calls [][2]int64
	intr := 3
	withFallocate(t, func(_ int, off, n int64) error {
		calls = append(calls, [2]int64{off, n})
		if intr > 0 {
			intr--
			return unix.EINTR
		}
		return nil
	})
	size := 2*preallocChunk + 4096
	require.NoError(t, Preallocate(fd, size))
	require.Equal(t, [][2]int64{{0, preallocChunk}, {0, preallocChunk}, {0, preallocChunk}, {0, preallocChunk},
		{preallocChunk, preallocChunk}, {2 * preallocChunk, 4096}}, calls)

	calls = nil
	withFallocate(t, func(_ int, off, n int64) error { calls = append(calls, [2]int64{off, n}); return unix.EINTR })
	err = Preallocate(fd, 4096)
	require.ErrorIs(t, err, unix.EINTR, "gives up after bounded retries")
	require.Len(t, calls, preallocRetries+1)
}

// A file system without fallocate gets zeros written instead; ENOSPC is reported as such.
func TestPreallocateFallbackAndNoSpace(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "prealloc")
	require.NoError(t, err)
	defer f.Close()
	fd := int(f.Fd())
	withFallocate(t, func(int, int64, int64) error { return unix.EOPNOTSUPP })
	require.NoError(t, Preallocate(fd, 3*4096+100))
	st, err := Fstat(fd)
	require.NoError(t, err)
	require.Equal(t, int64(3*4096+100), st.Size, "zeros written up to the size")
	require.GreaterOrEqual(t, blocks(t, fd), int64(3*4096+100))

	withFallocate(t, func(int, int64, int64) error { return unix.ENOSPC })
	err = Preallocate(fd, 4096)
	require.ErrorIs(t, err, unix.ENOSPC)
	require.True(t, NoSpace(err))
	require.True(t, NoSpace(fmt.Errorf("x: %w", unix.ENOMEM)))
	require.True(t, NoSpace(unix.EDQUOT))
	require.False(t, NoSpace(unix.EIO))
	require.False(t, NoSpace(errors.New("no space")))
}
