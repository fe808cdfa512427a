package rma

import (
	"fmt"

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

// ReduceOp is a reduction operation of AllReduce (armci_msg_gop's "+", "max", "min", "*",
// "absmax", "absmin").
type ReduceOp uint8

const (
	ReduceSum    ReduceOp = iota + 1 // "+": every type
	ReduceMax                        // "max": integer and real types
	ReduceMin                        // "min": integer and real types
	ReduceProd                       // "*": every type
	ReduceAbsMax                     // "absmax": the largest magnitude, as a magnitude (|x|)
	ReduceAbsMin                     // "absmin": the smallest magnitude, as a magnitude (|x|)
)

func (o ReduceOp) String() string {
	switch o {
	case ReduceSum:
		return "sum"
	case ReduceMax:
		return "max"
	case ReduceMin:
		return "min"
	case ReduceProd:
		return "prod"
	case ReduceAbsMax:
		return "absmax"
	case ReduceAbsMin:
		return "absmin"
	}
	return fmt.Sprintf("ReduceOp(%d)", uint8(o))
}

type number interface {
	~int32 | ~int64 | ~float32 | ~float64
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
	case ReduceProd:
		for i, v := range src {
			dst[i] *= v
		}
	case ReduceAbsMax:
		for i, v := range src {
			dst[i] = max(abs(dst[i]), abs(v))
		}
	case ReduceAbsMin:
		for i, v := range src {
			dst[i] = min(abs(dst[i]), abs(v))
		}
	}
}

// absAll replaces every element by its magnitude: the result of an absmax or absmin reduction
// of one rank (folding makes every other result a magnitude already).
func absAll[T number](dst []T) {
	for i, v := range dst {
		dst[i] = abs(v)
	}
}

func abs[T number](v T) T {
	if v < 0 {
		return -v
	}
	return v
}

func complexInto[T complex64 | complex128](op ReduceOp, dst, src []T) {
	for i, v := range src {
		if op == ReduceProd {
			dst[i] *= v
		} else {
			dst[i] += v
		}
	}
}

// checkReduce validates an AllReduce request.
func checkReduce(typ AccType, op ReduceOp, n int) error {
	if typ.Size() == 0 {
		return fmt.Errorf("%w: %v", ErrType, typ)
	}
	if op < ReduceSum || op > ReduceAbsMin {
		return fmt.Errorf("%w: reduction %v", ErrBadOp, op)
	}
	if (typ == AccComplex64 || typ == AccComplex128) && op != ReduceSum && op != ReduceProd {
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
		complexInto(op, view[complex64](dst), view[complex64](src))
	case AccComplex128:
		complexInto(op, view[complex128](dst), view[complex128](src))
	}
}

// finishReduce makes the result of an absmax or absmin reduction a magnitude on every element
// (validated by checkReduce; complex types take neither).
func finishReduce(typ AccType, op ReduceOp, dst []byte) {
	if op != ReduceAbsMax && op != ReduceAbsMin {
		return
	}
	switch typ {
	case AccInt32:
		absAll(view[int32](dst))
	case AccInt64:
		absAll(view[int64](dst))
	case AccFloat32:
		absAll(view[float32](dst))
	case AccFloat64:
		absAll(view[float64](dst))
	}
}
