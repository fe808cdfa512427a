package window

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/goarmci/goarmci/ibv"
	"gonum.org/v1/gonum/floats"
)

// Type is an element type of an accumulate-class operation (the MPI predefined datatypes
// MPI_INT32_T, MPI_INT64_T, MPI_FLOAT, MPI_DOUBLE, MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX),
// stored little-endian as in Go memory.
type Type = ibv.AccType

// Element types.
const (
	Int32      = ibv.AccInt32
	Int64      = ibv.AccInt64
	Float32    = ibv.AccFloat32
	Float64    = ibv.AccFloat64
	Complex64  = ibv.AccComplex64
	Complex128 = ibv.AccComplex128
)

// Op is a predefined accumulate operation (MPI_Op): the target element becomes
// target op origin.
type Op uint8

const (
	OpSum     Op = iota + 1 // MPI_SUM: every type
	OpProd                  // MPI_PROD: every type
	OpMax                   // MPI_MAX: integer and floating types (not complex)
	OpMin                   // MPI_MIN: integer and floating types (not complex)
	OpReplace               // MPI_REPLACE: the target element becomes the origin element
	OpNoOp                  // MPI_NO_OP: the target is unchanged (GetAccumulate/FetchAndOp: atomic read)
)

func (o Op) String() string {
	switch o {
	case OpSum:
		return "SUM"
	case OpProd:
		return "PROD"
	case OpMax:
		return "MAX"
	case OpMin:
		return "MIN"
	case OpReplace:
		return "REPLACE"
	case OpNoOp:
		return "NO_OP"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

func isComplex(t Type) bool { return t == Complex64 || t == Complex128 }
func isInteger(t Type) bool { return t == Int32 || t == Int64 }

// checkOp validates an (op, type) pair as MPI defines them: ErrType for an unknown type, ErrOp
// for an unknown op or MAX/MIN on complex types.
func checkOp(o Op, t Type) error {
	if t-Int32 <= Float64-Int32 && o-OpSum <= OpNoOp-OpSum { // a real type: every op (inlined)
		return nil
	}
	return checkOpSlow(o, t)
}

func checkOpSlow(o Op, t Type) error {
	if t.Size() == 0 {
		return fmt.Errorf("%w: element type %v", ErrType, t)
	}
	if o < OpSum || o > OpNoOp {
		return fmt.Errorf("%w: %v", ErrOp, o)
	}
	if (o == OpMax || o == OpMin) && isComplex(t) {
		return fmt.Errorf("%w: %v is not defined for %v", ErrOp, o, t)
	}
	return nil
}

// combine computes dst[i] = dst[i] op src[i] for the elements of type t in dst and src (equal
// lengths, whole elements; validated by the caller). It is the non-atomic kernel used under the
// accumulate lock and for self targets under that lock.
func combine(o Op, t Type, dst, src []byte) {
	switch o {
	case OpNoOp:
		return
	case OpReplace:
		copy(dst, src)
		return
	}
	le := binary.LittleEndian
	switch t {
	case Int32:
		for i := 0; i+4 <= len(dst); i += 4 {
			a, b := int32(le.Uint32(dst[i:])), int32(le.Uint32(src[i:]))
			le.PutUint32(dst[i:], uint32(applyOrdered(o, a, b)))
		}
	case Int64:
		for i := 0; i+8 <= len(dst); i += 8 {
			a, b := int64(le.Uint64(dst[i:])), int64(le.Uint64(src[i:]))
			le.PutUint64(dst[i:], uint64(applyOrdered(o, a, b)))
		}
	case Float32:
		for i := 0; i+4 <= len(dst); i += 4 {
			a, b := math.Float32frombits(le.Uint32(dst[i:])), math.Float32frombits(le.Uint32(src[i:]))
			le.PutUint32(dst[i:], math.Float32bits(applyOrdered(o, a, b)))
		}
	case Float64:
		for i := 0; i+8 <= len(dst); i += 8 {
			a, b := math.Float64frombits(le.Uint64(dst[i:])), math.Float64frombits(le.Uint64(src[i:]))
			le.PutUint64(dst[i:], math.Float64bits(applyOrdered(o, a, b)))
		}
	case Complex64:
		for i := 0; i+8 <= len(dst); i += 8 {
			a := complex(math.Float32frombits(le.Uint32(dst[i:])), math.Float32frombits(le.Uint32(dst[i+4:])))
			b := complex(math.Float32frombits(le.Uint32(src[i:])), math.Float32frombits(le.Uint32(src[i+4:])))
			v := applyComplex(o, a, b)
			le.PutUint32(dst[i:], math.Float32bits(real(v)))
			le.PutUint32(dst[i+4:], math.Float32bits(imag(v)))
		}
	case Complex128:
		for i := 0; i+16 <= len(dst); i += 16 {
			a := complex(math.Float64frombits(le.Uint64(dst[i:])), math.Float64frombits(le.Uint64(dst[i+8:])))
			b := complex(math.Float64frombits(le.Uint64(src[i:])), math.Float64frombits(le.Uint64(src[i+8:])))
			v := applyComplex(o, a, b)
			le.PutUint64(dst[i:], math.Float64bits(real(v)))
			le.PutUint64(dst[i+8:], math.Float64bits(imag(v)))
		}
	}
}

// combineInto computes out[i] = a[i] op b[i] (out, a, b of equal lengths, whole elements of t;
// out must not overlap a or b). It is combine without the copy of a into out: aligned buffers go
// through typed slices (the usual case: the result buffer and origin of a GetAccumulate), others
// through combine.
func combineInto(o Op, t Type, out, a, b []byte) {
	if len(out) == 0 {
		return
	}
	if al := uintptr(t.Align()); o != OpNoOp && o != OpReplace && aligned(al, out, a, b) {
		switch t {
		case Int32:
			ordered(o, typed[int32](out), typed[int32](a), typed[int32](b))
			return
		case Int64:
			ordered(o, typed[int64](out), typed[int64](a), typed[int64](b))
			return
		case Float32:
			ordered(o, typed[float32](out), typed[float32](a), typed[float32](b))
			return
		case Float64:
			if o == OpSum { // gonum's vector kernel
				floats.AddTo(typed[float64](out), typed[float64](a), typed[float64](b))
				return
			}
			ordered(o, typed[float64](out), typed[float64](a), typed[float64](b))
			return
		case Complex64:
			if o == OpSum { // component-wise
				ordered(o, typed[float32](out), typed[float32](a), typed[float32](b))
				return
			}
		case Complex128:
			if o == OpSum {
				floats.AddTo(typed[float64](out), typed[float64](a), typed[float64](b))
				return
			}
		}
	}
	copy(out, a)
	combine(o, t, out, b)
}

// ordered is out[i] = a[i] op b[i] for SUM, PROD, MAX, MIN.
func ordered[T int32 | int64 | float32 | float64](o Op, out, a, b []T) {
	out, b = out[:len(a)], b[:len(a)]
	switch o {
	case OpSum:
		for i := range a {
			out[i] = a[i] + b[i]
		}
	case OpProd:
		for i := range a {
			out[i] = a[i] * b[i]
		}
	case OpMax:
		for i := range a {
			out[i] = max(a[i], b[i])
		}
	case OpMin:
		for i := range a {
			out[i] = min(a[i], b[i])
		}
	}
}

func applyOrdered[T int32 | int64 | float32 | float64](o Op, a, b T) T {
	switch o {
	case OpSum:
		return a + b
	case OpProd:
		return a * b
	case OpMax:
		return max(a, b)
	case OpMin:
		return min(a, b)
	}
	return a
}

func applyComplex[T complex64 | complex128](o Op, a, b T) T {
	switch o {
	case OpSum:
		return a + b
	case OpProd:
		return a * b
	}
	return a
}
