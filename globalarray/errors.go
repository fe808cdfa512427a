package globalarray

import (
	"errors"

	"github.com/goarmci/goarmci/globalarray/dist"
)

// Sentinel errors; every error of this package wraps one of them, a context error, or an error
// of the rma layer (transport failures).
var (
	// ErrOutOfBounds: a subscript or patch outside the array, or lo > hi in some dimension.
	ErrOutOfBounds = dist.ErrOutOfBounds
	// ErrShape: wrong number of dimensions or subscripts, a buffer too small for the patch and
	// its leading dimensions, a leading dimension smaller than the patch, arrays of different
	// shapes in a collective, or bad extents or distribution options at Create.
	ErrShape = dist.ErrShape
	// ErrMap: a bad distribution request at Create (a malformed Irregular map, more blocks
	// than ranks, Chunk and Irregular together).
	ErrMap = dist.ErrMap
	// ErrType: an operation not defined for the element type (ReadInc on a floating-point
	// array, Max/Min of complex values).
	ErrType = errors.New("ga: operation not defined for the element type")
	// ErrDestroyed: use of an array after Destroy.
	ErrDestroyed = errors.New("ga: array destroyed")
	// ErrMismatch: the ranks called a collective (Create) with different arguments.
	ErrMismatch = errors.New("ga: ranks disagree on a collective call")
	// ErrDivideByZero: an integer element-wise division by 0 (ElemPatch with ElemDivide).
	ErrDivideByZero = errors.New("ga: integer division by zero")
	// ErrUnsupportedDistribution: an operation GA does not define on the array's distribution
	// (ghost cells on block-cyclic, tiled or restricted arrays; Access, whose one box a
	// block-cyclic or tiled array does not have; Symmetrize on those).
	ErrUnsupportedDistribution = errors.New("ga: operation not supported on this distribution")
)
