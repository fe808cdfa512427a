package rma

import (
	"fmt"
	"unsafe"

	"github.com/goarmci/goarmci/ibv"
)

// AccType is the element type of an accumulate or a reduction.
type AccType = ibv.AccType

// Element types (ARMCI_ACC_INT, ARMCI_ACC_LNG, ARMCI_ACC_FLT, ARMCI_ACC_DBL, ARMCI_ACC_CPL,
// ARMCI_ACC_DCP).
const (
	AccInt32      = ibv.AccInt32
	AccInt64      = ibv.AccInt64
	AccFloat32    = ibv.AccFloat32
	AccFloat64    = ibv.AccFloat64
	AccComplex64  = ibv.AccComplex64
	AccComplex128 = ibv.AccComplex128
)

// ReduceOp is a reduction operation of AllReduce (armci_msg_gop's "+", "max", "min").
type ReduceOp uint8

const (
	ReduceSum ReduceOp = iota + 1
	ReduceMax
	ReduceMin
)

func (o ReduceOp) String() string {
	switch o {
	case ReduceSum:
		return "sum"
	case ReduceMax:
		return "max"
	case ReduceMin:
		return "min"
	}
	return fmt.Sprintf("ReduceOp(%d)", uint8(o))
}

type number interface {
	~int32 | ~int64 | ~float32 | ~float64
}

func view[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

func reduceInto[T number](op ReduceOp, dst, src []T) {
	switch op {
	case ReduceSum:
		for i, v := range src {
			dst[i] += v
		}
	case ReduceMax:
		for i, v := range src {
			dst[i] = max(dst[i], v)
		}
	case ReduceMin:
		for i, v := range src {
			dst[i] = min(dst[i], v)
		}
	}
}

func sumInto[T complex64 | complex128](dst, src []T) {
	for i, v := range src {
		dst[i] += v
	}
}

// checkReduce validates an AllReduce request.
func checkReduce(typ AccType, op ReduceOp, n int) error {
	if typ.Size() == 0 {
		return fmt.Errorf("%w: %v", ErrType, typ)
	}
	if op < ReduceSum || op > ReduceMin {
		return fmt.Errorf("%w: reduction %v", ErrBadOp, op)
	}
	if (typ == AccComplex64 || typ == AccComplex128) && op != ReduceSum {
		return fmt.Errorf("%w: %v of complex values", ErrBadOp, op)
	}
	if n%typ.Size() != 0 {
		return fmt.Errorf("%w: %d bytes is not a whole number of %v", ErrType, n, typ)
	}
	return nil
}

// reduceBytes folds src into dst (equal lengths, validated by checkReduce).
func reduceBytes(typ AccType, op ReduceOp, dst, src []byte) {
	switch typ {
	case AccInt32:
		reduceInto(op, view[int32](dst), view[int32](src))
	case AccInt64:
		reduceInto(op, view[int64](dst), view[int64](src))
	case AccFloat32:
		reduceInto(op, view[float32](dst), view[float32](src))
	case AccFloat64:
		reduceInto(op, view[float64](dst), view[float64](src))
	case AccComplex64:
		sumInto(view[complex64](dst), view[complex64](src))
	case AccComplex128:
		sumInto(view[complex128](dst), view[complex128](src))
	}
}
