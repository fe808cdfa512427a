package rma

import "syscall"

// schedYield gives the OS thread's core to another runnable thread or process.
func schedYield() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
