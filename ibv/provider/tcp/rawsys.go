package tcp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket system calls of the data path. The streams' sockets are non-blocking, so a read or
// writev never waits in the kernel: it copies what fits and returns. Such a call moving a
// bounded number of bytes is made with RawSyscall, without the runtime's entersyscall and
// exitsyscall: each entersyscall with the runtime otherwise idle wakes sysmon (a futex wake,
// then sysmon's futex sleep), which made up a third of the futex calls of an 8-byte tcp
// put_latency (perf record -e syscalls:sys_enter_futex: entersyscallWakeSysmon). Calls that may
// copy more than rawMax bytes keep Syscall, so a P is never held for long without the scheduler
// knowing.
const rawMax = 256 << 10 // bytes: about 10-20 µs of kernel copy at most

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
