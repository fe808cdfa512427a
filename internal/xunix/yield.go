//go:build linux

package xunix

import "golang.org/x/sys/unix"

// SchedYield gives the calling thread's core to another runnable thread or process
// (sched_yield(2), made without the runtime's entersyscall: it never blocks). Pollers use it
// between polls instead of runtime.Gosched, which also wakes an idle thread of this process
// (wakep: a futex wake, then that thread's futex sleep) on every call.
func SchedYield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
