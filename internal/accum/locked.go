package accum

import (
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Locked accumulation. Element-wise compare-and-swap costs a locked instruction per element
// (~0.5 GB/s for float64 here); taking one lock per accumulate and adding with plain loads and
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

// RegisterLock makes every Apply into mem take lock. It returns the function that undoes it.
func RegisterLock(mem []byte, lock *Lock) (unregister func()) {
	if len(mem) == 0 || lock == nil {
		return func() {}
	}
	r := lockedRegion{lo: uintptr(unsafe.Pointer(&mem[0])), lock: lock}
	r.hi = r.lo + uintptr(len(mem))
	regMu.Lock()
	var cur []lockedRegion
	if p := regions.Load(); p != nil {
		cur = *p
	}
	next := append(append([]lockedRegion(nil), cur...), r)
	sort.Slice(next, func(i, j int) bool { return next[i].lo < next[j].lo })
	regions.Store(&next)
	regMu.Unlock()
	return func() {
		regMu.Lock()
		defer regMu.Unlock()
		p := regions.Load()
		if p == nil {
			return
		}
		out := make([]lockedRegion, 0, len(*p))
		removed := false
		for _, x := range *p {
			if !removed && x == r {
				removed = true
				continue
			}
			out = append(out, x)
		}
		regions.Store(&out)
	}
}

// lockFor returns the lock registered for the region containing all of b, or nil.
func lockFor(b []byte) *Lock {
	p := regions.Load()
	if p == nil || len(b) == 0 {
		return nil
	}
	rs := *p
	a := uintptr(unsafe.Pointer(&b[0]))
	i := sort.Search(len(rs), func(i int) bool { return rs[i].lo > a }) - 1
	if i >= 0 && a+uintptr(len(b)) <= rs[i].hi {
		return rs[i].lock
	}
	return nil
}

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

// applyPlain is the element-wise accumulate without atomics (the caller holds the lock).
func applyPlain(t Type, dst, src []byte, scale complex128) {
	n := len(dst)
	switch t {
	case Int32:
		s := int32(real(scale))
		d := unsafe.Slice((*int32)(unsafe.Pointer(&dst[0])), n/4)
		for i := range d {
			d[i] += s * int32(le32(src[4*i:]))
		}
	case Int64:
		s := int64(real(scale))
		d := unsafe.Slice((*int64)(unsafe.Pointer(&dst[0])), n/8)
		for i := range d {
			d[i] += s * int64(le64(src[8*i:]))
		}
	case Float32:
		s := float32(real(scale))
		d := unsafe.Slice((*float32)(unsafe.Pointer(&dst[0])), n/4)
		for i := range d {
			d[i] += s * math.Float32frombits(le32(src[4*i:]))
		}
	case Float64:
		s := real(scale)
		d := unsafe.Slice((*float64)(unsafe.Pointer(&dst[0])), n/8)
		if uintptr(unsafe.Pointer(&src[0]))%8 == 0 { // the usual case: typed loads
			v := unsafe.Slice((*float64)(unsafe.Pointer(&src[0])), n/8)
			v = v[:len(d)]
			for i := range d {
				d[i] += s * v[i]
			}
			return
		}
		for i := range d {
			d[i] += s * math.Float64frombits(le64(src[8*i:]))
		}
	case Complex64:
		s := complex64(scale)
		d := unsafe.Slice((*float32)(unsafe.Pointer(&dst[0])), n/4)
		for i := 0; i < len(d); i += 2 {
			v := s * complex(math.Float32frombits(le32(src[4*i:])), math.Float32frombits(le32(src[4*i+4:])))
			d[i] += real(v)
			d[i+1] += imag(v)
		}
	case Complex128:
		d := unsafe.Slice((*float64)(unsafe.Pointer(&dst[0])), n/8)
		for i := 0; i < len(d); i += 2 {
			v := scale * complex(math.Float64frombits(le64(src[8*i:])), math.Float64frombits(le64(src[8*i+8:])))
			d[i] += real(v)
			d[i+1] += imag(v)
		}
	}
}
