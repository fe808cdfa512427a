package globalarray

import (
	"unsafe"

	"github.com/goarmci/goarmci/rma"
)

// toScale converts v to the complex128 scale ARMCI_Acc takes (integers beyond 2^53 lose
// precision, as with any float scale).
func toScale[T Elem](typ rma.AccType, v T) complex128 {
	p := unsafe.Pointer(&v)
	switch typ {
	case rma.AccInt32:
		return complex(float64(*(*int32)(p)), 0)
	case rma.AccInt64:
		return complex(float64(*(*int64)(p)), 0)
	case rma.AccFloat32:
		return complex(float64(*(*float32)(p)), 0)
	case rma.AccFloat64:
		return complex(*(*float64)(p), 0)
	case rma.AccComplex64:
		return complex128(*(*complex64)(p))
	default:
		return *(*complex128)(p)
	}
}

// asBytes views a typed slice as its bytes, without copying.
func asBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// fromBytes views bytes (aligned for T, as segments are) as a typed slice, without copying.
func fromBytes[T Elem](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
