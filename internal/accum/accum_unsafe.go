package accum

import (
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"
)

// Check validates that dst and src fit type t: equal lengths, a multiple of the element size, and
// dst aligned for atomic updates.
func Check(t Type, dst, src []byte) error {
	es := t.Size()
	if es == 0 {
		return fmt.Errorf("%w: %d", ErrType, t)
	}
	if len(dst) != len(src) || len(dst)%es != 0 {
		return fmt.Errorf("%w: dst %d bytes, src %d bytes, element %d bytes", ErrShape, len(dst), len(src), es)
	}
	if len(dst) > 0 && uintptr(unsafe.Pointer(&dst[0]))%uintptr(t.Align()) != 0 {
		return fmt.Errorf("%w: target not %d-byte aligned", ErrShape, t.Align())
	}
	return nil
}

// Apply performs dst[i] += scale·src[i] for every element of type t, each element atomically
// with respect to other accumulates: under the region's lock when one is registered
// (RegisterLock, see locked.go), else with a compare-and-swap per element. The
// scale is converted to t (integers take the real part, truncated; floats the real part; complex
// types the whole value). src need not be aligned. Errors wrap ErrType or ErrShape and change
// nothing.
func Apply(t Type, dst, src []byte, scale complex128) error {
	if err := Check(t, dst, src); err != nil {
		return err
	}
	if l := lockFor(dst); l != nil {
		acquire(l)
		applyPlain(t, dst, src, scale)
		l.Store(0)
		return nil
	}
	n := len(dst)
	switch t {
	case Int32:
		s := int32(real(scale))
		for i := 0; i < n; i += 4 {
			v := int32(le32(src[i:]))
			atomic.AddInt32((*int32)(unsafe.Pointer(&dst[i])), s*v)
		}
	case Int64:
		s := int64(real(scale))
		for i := 0; i < n; i += 8 {
			v := int64(le64(src[i:]))
			atomic.AddInt64((*int64)(unsafe.Pointer(&dst[i])), s*v)
		}
	case Float32:
		s := float32(real(scale))
		for i := 0; i < n; i += 4 {
			addF32(&dst[i], s*math.Float32frombits(le32(src[i:])))
		}
	case Float64:
		s := real(scale)
		for i := 0; i < n; i += 8 {
			addF64(&dst[i], s*math.Float64frombits(le64(src[i:])))
		}
	case Complex64:
		s := complex64(scale)
		for i := 0; i < n; i += 8 {
			v := s * complex(math.Float32frombits(le32(src[i:])), math.Float32frombits(le32(src[i+4:])))
			addF32(&dst[i], real(v))
			addF32(&dst[i+4], imag(v))
		}
	case Complex128:
		for i := 0; i < n; i += 16 {
			v := scale * complex(math.Float64frombits(le64(src[i:])), math.Float64frombits(le64(src[i+8:])))
			addF64(&dst[i], real(v))
			addF64(&dst[i+8], imag(v))
		}
	}
	return nil
}

func addF32(p *byte, v float32) {
	a := (*uint32)(unsafe.Pointer(p))
	for {
		old := atomic.LoadUint32(a)
		if atomic.CompareAndSwapUint32(a, old, math.Float32bits(math.Float32frombits(old)+v)) {
			return
		}
	}
}

func addF64(p *byte, v float64) {
	a := (*uint64)(unsafe.Pointer(p))
	for {
		old := atomic.LoadUint64(a)
		if atomic.CompareAndSwapUint64(a, old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func word32(b []byte) (*uint32, error) {
	if len(b) < 4 || uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil, fmt.Errorf("%w: 4-byte atomic on %d bytes or misaligned", ErrShape, len(b))
	}
	return (*uint32)(unsafe.Pointer(&b[0])), nil
}

func word64(b []byte) (*uint64, error) {
	if len(b) < 8 || uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
		return nil, fmt.Errorf("%w: 8-byte atomic on %d bytes or misaligned", ErrShape, len(b))
	}
	return (*uint64)(unsafe.Pointer(&b[0])), nil
}
