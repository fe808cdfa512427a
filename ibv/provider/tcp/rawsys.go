package tcp

// Socket system calls of the data path. The streams' sockets are non-blocking, so a read or
// writev never waits in the kernel: it copies what fits and returns. Such a call moving a
// bounded number of bytes is made with RawSyscall, without the runtime's entersyscall and
// exitsyscall: each entersyscall with the runtime otherwise idle wakes sysmon (a futex wake,
// then sysmon's futex sleep), which made up a third of the futex calls of an 8-byte tcp
// put_latency (perf record -e syscalls:sys_enter_futex: entersyscallWakeSysmon). Calls that may
// copy more than rawMax bytes keep Syscall, so a P is never held for long without the scheduler
// knowing.
const rawMax = 256 << 10 // bytes: about 10-20 µs of kernel copy at most
