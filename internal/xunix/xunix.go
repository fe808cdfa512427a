//go:build linux

// Package xunix holds the thin Linux system-call wrappers goarmci's node-local transport needs:
// shared files (/dev/shm and memfd), MAP_SHARED mappings, cross-memory attach
// (process_vm_readv/writev) and process liveness. Every error wraps the underlying errno
// (a syscall.Errno, so errors.Is(err, os.ErrNotExist) and friends work) and names the call.
package xunix

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrShortTransfer: a cross-memory-attach call moved fewer bytes than asked and could not go on
// (the remote range is partly unmapped).
var ErrShortTransfer = errors.New("xunix: short cross-memory transfer")

// PageSize is the system page size in bytes.
func PageSize() int { return os.Getpagesize() }

// RoundPage rounds n bytes up to a whole number of pages.
func RoundPage(n int) int {
	p := PageSize()
	return (n + p - 1) / p * p
}

// MemfdCreate creates an anonymous shared-memory file of size bytes (memfd_create with
// MFD_CLOEXEC, mode 0600, then ftruncate). Other processes of the same user can open it through
// /proc/<pid>/fd/<fd> while it is open; no other user can (the mode, and /proc/<pid>/fd is the
// owner's). The name is for /proc listings only.
func MemfdCreate(name string, size int) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("xunix: memfd_create %q: %w", name, err)
	}
	if err := unix.Fchmod(fd, 0o600); err != nil { // memfd_create makes it 0777
		_ = unix.Close(fd)
		return -1, fmt.Errorf("xunix: fchmod memfd %q: %w", name, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("xunix: ftruncate memfd %q to %d bytes: %w", name, size, err)
	}
	return fd, nil
}

// CreateFile creates the file path exclusively (O_EXCL, mode 0600) with size bytes and returns
// its descriptor. An existing file gives an error wrapping os.ErrExist.
func CreateFile(path string, size int) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, fmt.Errorf("xunix: create %s: %w", path, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		_ = unix.Close(fd)
		_ = unix.Unlink(path)
		return -1, fmt.Errorf("xunix: ftruncate %s to %d bytes: %w", path, size, err)
	}
	return fd, nil
}

// preallocChunk bounds one fallocate call (bytes): a signal interrupts shmem's fallocate with
// EINTR and undoes the call's range, so a huge file is allocated piecewise and each piece retried.
const preallocChunk = 64 << 20

// preallocRetries bounds the EINTR retries of one piece, so Preallocate cannot loop forever.
const preallocRetries = 100

// Preallocate allocates the first size bytes of the open file fd (fallocate(2), mode 0), so
// that touching a MAP_SHARED mapping of them cannot fault with SIGBUS because the filesystem
// (a tmpfs such as /dev/shm, or the memfd mount) is full. A filesystem without fallocate gets
// the same bytes written as zeros (the file must still be all zeros there: a new file). Errors
// wrap the errno: unix.ENOSPC (syscall.ENOSPC) when the space is not there, unix.EDQUOT, or
// unix.ENOMEM when memory or its cgroup limit refuses the pages.
func Preallocate(fd int, size int) error {
	if size < 0 {
		return fmt.Errorf("xunix: fallocate of %d bytes: %w", size, unix.EINVAL)
	}
	for off := int64(0); off < int64(size); {
		n := min(int64(size)-off, preallocChunk)
		err := fallocate(fd, off, n)
		for i := 0; errors.Is(err, unix.EINTR) && i < preallocRetries; i++ {
			err = fallocate(fd, off, n)
		}
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
			return writeZeros(fd, off, int64(size))
		}
		if err != nil {
			return fmt.Errorf("xunix: fallocate fd %d, bytes [%d, %d): %w", fd, off, off+n, err)
		}
		off += n
	}
	return nil
}

// fallocate is unix.Fallocate with mode 0 (a variable so tests can make it fail).
var fallocate = func(fd int, off, n int64) error { return unix.Fallocate(fd, 0, off, n) }

// writeZeros writes zeros to [off, end) of fd: Preallocate's fallback.
func writeZeros(fd int, off, end int64) error {
	zeros := make([]byte, min(end-off, 1<<20))
	for intr := 0; off < end; {
		n, err := unix.Pwrite(fd, zeros[:min(end-off, int64(len(zeros)))], off)
		if errors.Is(err, unix.EINTR) && intr < preallocRetries {
			intr++
			continue
		}
		if err != nil {
			return fmt.Errorf("xunix: writing zeros to fd %d at %d: %w", fd, off, err)
		}
		if n == 0 {
			return fmt.Errorf("xunix: writing zeros to fd %d at %d: %w", fd, off, unix.ENOSPC)
		}
		off += int64(n)
	}
	return nil
}

// NoSpace reports whether err says the system refused the space a file or mapping needed:
// ENOSPC (file system full, or out of inodes), EDQUOT (quota) or ENOMEM (memory, or the
// memory cgroup's limit, for memfd and tmpfs pages).
func NoSpace(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) || errors.Is(err, unix.ENOMEM)
}

// OpenFile opens an existing file read-write (also /proc/<pid>/fd/<n> links).
func OpenFile(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("xunix: open %s: %w", path, err)
	}
	return fd, nil
}

// Stat is what Fstat reports: size in bytes and inode number.
type Stat struct {
	Size int64
	Ino  uint64
	Dev  uint64
}

// Fstat describes an open file.
func Fstat(fd int) (Stat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Stat{}, fmt.Errorf("xunix: fstat fd %d: %w", fd, err)
	}
	return Stat{Size: st.Size, Ino: st.Ino, Dev: uint64(st.Dev)}, nil
}

// Close closes a file descriptor.
func Close(fd int) error {
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("xunix: close fd %d: %w", fd, err)
	}
	return nil
}

// Link makes newpath a hard link to oldpath; it fails (wrapping os.ErrExist) if newpath exists,
// which makes it an atomic "publish if absent".
func Link(oldpath, newpath string) error {
	if err := unix.Link(oldpath, newpath); err != nil {
		return fmt.Errorf("xunix: link %s → %s: %w", oldpath, newpath, err)
	}
	return nil
}

// Unlink removes a file name.
func Unlink(path string) error {
	if err := unix.Unlink(path); err != nil {
		return fmt.Errorf("xunix: unlink %s: %w", path, err)
	}
	return nil
}

// MapShared maps size bytes of fd from offset 0, readable and writable, MAP_SHARED. The mapping is
// page-aligned; stores through it are seen by every process mapping the same file.
func MapShared(fd int, size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("xunix: mmap of %d bytes: %w", size, unix.EINVAL)
	}
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("xunix: mmap fd %d, %d bytes: %w", fd, size, err)
	}
	return b, nil
}

// Unmap releases a mapping made by MapShared; b must be the slice MapShared returned.
func Unmap(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("xunix: munmap %d bytes: %w", len(b), err)
	}
	return nil
}

// WriteRemote copies local into process pid's memory at virtual address remote
// (process_vm_writev, cross-memory attach: one copy, one system call). It needs the right to
// ptrace pid (same user, no ptrace restriction). Partial transfers are continued.
func WriteRemote(pid int, remote uint64, local []byte) error {
	for len(local) > 0 {
		liov := [1]unix.Iovec{{Base: &local[0]}}
		liov[0].SetLen(len(local))
		riov := [1]unix.RemoteIovec{{Base: uintptr(remote), Len: len(local)}}
		n, err := unix.ProcessVMWritev(pid, liov[:], riov[:], 0)
		if err != nil {
			return fmt.Errorf("xunix: process_vm_writev pid %d, %d bytes at %#x: %w", pid, len(local), remote, err)
		}
		if n <= 0 {
			return fmt.Errorf("%w: pid %d, %d bytes at %#x", ErrShortTransfer, pid, len(local), remote)
		}
		local = local[n:]
		remote += uint64(n)
	}
	return nil
}

// ReadRemote copies process pid's memory at virtual address remote into local
// (process_vm_readv, cross-memory attach).
func ReadRemote(pid int, remote uint64, local []byte) error {
	for len(local) > 0 {
		liov := [1]unix.Iovec{{Base: &local[0]}}
		liov[0].SetLen(len(local))
		riov := [1]unix.RemoteIovec{{Base: uintptr(remote), Len: len(local)}}
		n, err := unix.ProcessVMReadv(pid, liov[:], riov[:], 0)
		if err != nil {
			return fmt.Errorf("xunix: process_vm_readv pid %d, %d bytes at %#x: %w", pid, len(local), remote, err)
		}
		if n <= 0 {
			return fmt.Errorf("%w: pid %d, %d bytes at %#x", ErrShortTransfer, pid, len(local), remote)
		}
		local = local[n:]
		remote += uint64(n)
	}
	return nil
}

// ProcessAlive reports whether process pid exists (kill(pid, 0); a process of another user
// counts as alive).
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// ProcFDPath is the path under which another process of the same user opens descriptor fd of
// process pid.
func ProcFDPath(pid, fd int) string { return fmt.Sprintf("/proc/%d/fd/%d", pid, fd) }
