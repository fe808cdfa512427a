package tcp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysRead is read(2) on the non-blocking fd into n bytes at p.
func sysRead(fd uintptr, p unsafe.Pointer, n int) (int, unix.Errno) {
	var r uintptr
	var e unix.Errno
	if n <= rawMax {
		r, _, e = unix.RawSyscall(unix.SYS_READ, fd, uintptr(p), uintptr(n))
	} else {
		r, _, e = unix.Syscall(unix.SYS_READ, fd, uintptr(p), uintptr(n))
	}
	return int(r), e
}

// sysIovec is readv(2) or writev(2) (trap) on the non-blocking fd with cnt iovecs holding
// total bytes.
func sysIovec(trap, fd uintptr, iov *unix.Iovec, cnt, total int) (int, unix.Errno) {
	var r uintptr
	var e unix.Errno
	if total <= rawMax {
		r, _, e = unix.RawSyscall(trap, fd, uintptr(unsafe.Pointer(iov)), uintptr(cnt))
	} else {
		r, _, e = unix.Syscall(trap, fd, uintptr(unsafe.Pointer(iov)), uintptr(cnt))
	}
	return int(r), e
}
