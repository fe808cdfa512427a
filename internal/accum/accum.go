// Package accum holds the element-wise atomic kernels that every provider applies to target
// memory: typed accumulate (ARMCI_Acc: dst[i] += scale·src[i], atomic per element with respect to
// other accumulates) and the 32/64-bit read-modify-write atomics (fetch-and-add, swap,
// compare-and-swap) behind ARMCI_Rmw and the verbs atomics.
//
// All kernels work on byte slices of (possibly shared, mmap'd) memory. They use CPU atomics, so an
// origin in another process writing through a shared mapping and the local responder of a network
// provider can apply accumulates to the same memory at once and each element is still updated
// exactly once per accumulate. Complex types are updated component-wise (each float atomically):
// the sum is exact, and accumulate atomicity holds because addition of components commutes.
package accum

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Type is an accumulate element type. The numeric values are those of ibv.AccType, which
// converts to Type for free (ibv/types.go checks the two at compile time).
type Type uint8

const (
	Int32 Type = iota + 1
	Int64
	Float32
	Float64
	Complex64
	Complex128
)

// ErrType: unknown element type. ErrShape: lengths or alignment do not fit the type.
var (
	ErrType  = errors.New("accum: unknown element type")
	ErrShape = errors.New("accum: length or alignment does not fit the element type")
)

// Size is the element size in bytes, 0 for an unknown type.
func (t Type) Size() int {
	switch t {
	case Int32, Float32:
		return 4
	case Int64, Float64, Complex64:
		return 8
	case Complex128:
		return 16
	}
	return 0
}

// Align is the alignment the atomic updates need (the component size).
func (t Type) Align() int {
	switch t {
	case Complex64:
		return 4
	case Complex128:
		return 8
	}
	return t.Size()
}

// Little-endian loads (the wire and memory order of every supported machine is little-endian;
// the runtime does not support big-endian hosts).
func le32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(le32(b)) | uint64(le32(b[4:]))<<32
}

// FetchAdd64 atomically adds v to the 8-byte word at b[0:8] and returns the old value.
func FetchAdd64(b []byte, v uint64) (uint64, error) {
	p, err := word64(b)
	if err != nil {
		return 0, err
	}
	return atomic.AddUint64(p, v) - v, nil
}

// FetchAdd32 atomically adds v to the 4-byte word at b[0:4] and returns the old value.
func FetchAdd32(b []byte, v uint32) (uint32, error) {
	p, err := word32(b)
	if err != nil {
		return 0, err
	}
	return atomic.AddUint32(p, v) - v, nil
}

// Swap64 atomically stores v at b[0:8] and returns the old value.
func Swap64(b []byte, v uint64) (uint64, error) {
	p, err := word64(b)
	if err != nil {
		return 0, err
	}
	return atomic.SwapUint64(p, v), nil
}

// Swap32 atomically stores v at b[0:4] and returns the old value.
func Swap32(b []byte, v uint32) (uint32, error) {
	p, err := word32(b)
	if err != nil {
		return 0, err
	}
	return atomic.SwapUint32(p, v), nil
}

// CmpSwap64 atomically replaces the word at b[0:8] by swap if it equals cmp; it returns the old
// value either way (verbs IBV_WR_ATOMIC_CMP_AND_SWP semantics).
func CmpSwap64(b []byte, cmp, swap uint64) (uint64, error) {
	p, err := word64(b)
	if err != nil {
		return 0, err
	}
	for {
		old := atomic.LoadUint64(p)
		if old != cmp {
			return old, nil
		}
		if atomic.CompareAndSwapUint64(p, old, swap) {
			return old, nil
		}
	}
}

// CmpSwap32 is CmpSwap64 on a 4-byte word.
func CmpSwap32(b []byte, cmp, swap uint32) (uint32, error) {
	p, err := word32(b)
	if err != nil {
		return 0, err
	}
	for {
		old := atomic.LoadUint32(p)
		if old != cmp {
			return old, nil
		}
		if atomic.CompareAndSwapUint32(p, old, swap) {
			return old, nil
		}
	}
}

// Load64 atomically loads the 8-byte word at b[0:8] (for polled flags and counters).
func Load64(b []byte) (uint64, error) {
	p, err := word64(b)
	if err != nil {
		return 0, err
	}
	return atomic.LoadUint64(p), nil
}

// StoreRelease64 stores v at b[0:8] as a release store: single-copy atomic (a concurrent Load64
// sees the old or the new value, never a mix), visible to another CPU only after every store
// this thread made before it, and atomic with respect to the RMW operations on the word (they
// see it before or after). Cheaper than Store64 where the caller polls something else next: the
// thread does not wait for the cache line. For flags another process polls (MPI
// implementations' shared-memory flags are the same store). Errors wrap ErrShape for a
// misaligned or short word; nothing is stored then.
func StoreRelease64(b []byte, v uint64) error {
	p, err := word64(b)
	if err != nil {
		return err
	}
	storeRelease64(p, v)
	return nil
}

// Store64 atomically stores v at b[0:8].
func Store64(b []byte, v uint64) error {
	p, err := word64(b)
	if err != nil {
		return err
	}
	atomic.StoreUint64(p, v)
	return nil
}

func (t Type) String() string {
	switch t {
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	case Complex64:
		return "complex64"
	case Complex128:
		return "complex128"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Op is a read-modify-write atomic (the verbs atomics and their 32-bit/swap extensions).
type Op uint8

const (
	OpFetchAdd64 Op = iota + 1
	OpCmpSwap64
	OpSwap64
	OpFetchAdd32
	OpCmpSwap32
	OpSwap32
)

// RMW applies op to the word at b[0:size] and returns its previous value: fetch-and-add adds
// operand, swap stores operand, compare-and-swap stores operand if the word equals compare.
// 32-bit ops use the low 32 bits of operand and compare. Errors wrap ErrShape (size or
// alignment) or ErrType (unknown op).
func RMW(op Op, b []byte, operand, compare uint64) (uint64, error) {
	var v32 uint32
	var err error
	switch op {
	case OpFetchAdd64:
		return FetchAdd64(b, operand)
	case OpCmpSwap64:
		return CmpSwap64(b, compare, operand)
	case OpSwap64:
		return Swap64(b, operand)
	case OpFetchAdd32:
		v32, err = FetchAdd32(b, uint32(operand))
	case OpCmpSwap32:
		v32, err = CmpSwap32(b, uint32(compare), uint32(operand))
	case OpSwap32:
		v32, err = Swap32(b, uint32(operand))
	default:
		return 0, fmt.Errorf("%w: atomic op %d", ErrType, op)
	}
	return uint64(v32), err
}
