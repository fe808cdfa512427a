package globalarray

import (
	"reflect"

	"github.com/goarmci/goarmci/rma"
)

// Elem is the set of element types a global array may hold: GA's C_INT, C_LONG, C_FLOAT,
// C_DBL, C_SCPL and C_DCPL (MT_C_INT ... MT_C_DCPL), as 32/64-bit integers, 32/64-bit floats
// and 64/128-bit complex numbers.
type Elem interface {
	~int32 | ~int64 | ~float32 | ~float64 | ~complex64 | ~complex128
}

// accTypeOf is the rma accumulate/reduction type of T.
func accTypeOf[T Elem]() rma.AccType {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Int32:
		return rma.AccInt32
	case reflect.Int64:
		return rma.AccInt64
	case reflect.Float32:
		return rma.AccFloat32
	case reflect.Float64:
		return rma.AccFloat64
	case reflect.Complex64:
		return rma.AccComplex64
	default:
		return rma.AccComplex128
	}
}

func isComplex(t rma.AccType) bool { return t == rma.AccComplex64 || t == rma.AccComplex128 }
