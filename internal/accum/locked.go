package accum

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Locked accumulation. Element-wise compare-and-swap costs a locked instruction per element
// (far below memory speed for float64); taking one lock per accumulate and adding with plain loads and
// stores runs at memory speed. Atomicity per element with respect to other accumulates then
// holds as long as every accumulate to that memory takes the same lock: a provider that lets
// other processes accumulate into a region directly (shm) registers the region's lock word —
// a word in memory those processes map too — with RegisterLock, and every accumulate into the
// region, from any provider of this process or from another process holding the same word,
// goes through it. Memory without a registered lock keeps the lock-free element-wise kernel.

// Lock is an accumulate lock word (a spin lock; 0 free, 1 held). It may live in shared memory.
type Lock = atomic.Uint32

type lockedRegion struct {
	lo, hi uintptr
	lock   *Lock
}

var (
	regMu   sync.Mutex
	regions atomic.Pointer[[]lockedRegion] // sorted by lo; replaced on change
)

func acquire(l *Lock) {
	for i := 0; !l.CompareAndSwap(0, 1); i++ {
		if i > 64 {
			runtime.Gosched()
		}
	}
}

// ApplyLocked is Apply under lock l (taken by every accumulate into dst's region).
func ApplyLocked(l *Lock, t Type, dst, src []byte, scale complex128) error {
	if err := Check(t, dst, src); err != nil {
		return err
	}
	acquire(l)
	applyPlain(t, dst, src, scale)
	l.Store(0)
	return nil
}
