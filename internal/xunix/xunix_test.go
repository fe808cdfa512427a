//go:build linux

package xunix

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMemfdTwoMappingsShareBytes(t *testing.T) {
	size := RoundPage(10000)
	require.Equal(t, 0, size%PageSize())
	fd, err := MemfdCreate("xunix-test", size)
	require.NoError(t, err)
	defer Close(fd)
	a, err := MapShared(fd, size)
	require.NoError(t, err)
	defer Unmap(a)

	// a second mapping through /proc, as a peer process opens it
	fd2, err := OpenFile(ProcFDPath(os.Getpid(), fd))
	require.NoError(t, err)
	st1, err := Fstat(fd)
	require.NoError(t, err)
	st2, err := Fstat(fd2)
	require.NoError(t, err)
	require.Equal(t, st1.Ino, st2.Ino)
	require.Equal(t, int64(size), st2.Size)
	b, err := MapShared(fd2, size)
	require.NoError(t, err)
	require.NoError(t, Close(fd2))
	defer Unmap(b)

	a[123] = 42
	a[size-1] = 7
	require.Equal(t, byte(42), b[123])
	require.Equal(t, byte(7), b[size-1])
	b[5] = 9
	require.Equal(t, byte(9), a[5])
}

func TestCreateFileExclusiveAndLink(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	fd, err := CreateFile(p, 4096)
	require.NoError(t, err)
	require.NoError(t, Close(fd))
	_, err = CreateFile(p, 4096)
	require.ErrorIs(t, err, os.ErrExist)

	q := filepath.Join(dir, "g")
	require.NoError(t, Link(p, q))
	require.ErrorIs(t, Link(p, q), os.ErrExist)
	require.NoError(t, Unlink(p))
	require.NoError(t, Unlink(q))
	require.ErrorIs(t, Unlink(q), os.ErrNotExist)
	_, err = OpenFile(q)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestMapSharedBadSize(t *testing.T) {
	_, err := MapShared(0, 0)
	require.Error(t, err)
}

func TestCrossMemoryAttachSelf(t *testing.T) {
	src := []byte("cross-memory attach")
	dst := make([]byte, len(src))
	err := WriteRemote(os.Getpid(), addr(dst), src)
	if err != nil && errors.Is(err, os.ErrPermission) {
		t.Skipf("process_vm_writev not permitted here: %v", err)
	}
	require.NoError(t, err)
	require.Equal(t, src, dst)
	back := make([]byte, len(src))
	require.NoError(t, ReadRemote(os.Getpid(), addr(dst), back))
	require.Equal(t, src, back)
	// an unmapped remote address fails with an error, not a crash
	require.Error(t, ReadRemote(os.Getpid(), 8, back))
}

func TestProcessAlive(t *testing.T) {
	require.True(t, ProcessAlive(os.Getpid()))
	require.False(t, ProcessAlive(0))
	require.False(t, ProcessAlive(-5))
}
