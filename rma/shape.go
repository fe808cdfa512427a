package rma

import (
	"fmt"
	"math"
)

// shapeKind is the layout of a transfer's pieces.
type shapeKind uint8

const (
	shapeStrided shapeKind = iota // count[0] bytes at each point of a stride grid (ARMCI_PutS)
	shapeVector                   // a list of (local bytes, remote offset) pieces (ARMCI_PutV)
)

// shape is one validated strided or vector transfer: which local bytes meet which remote byte
// offsets (a contiguous transfer needs none: Runtime.contiguous checks it in place). Every
// check that can fail is made when the shape is built (shapeOf*), so a route that runs it moves
// no byte of an invalid transfer. Remote offsets of pieces are relative to off; every piece lies
// inside [off, off+extent).
type shape struct {
	kind   shapeKind
	local  []byte // strided: the local buffer
	off    int    // remote byte offset of the lowest byte the shape touches
	extent int    // remote bytes from off that the pieces may touch
	st     strided
	vecs   []Vec
}

// stridedShape is a strided transfer: lstride are the local side's byte strides, rstride the
// remote side's (ARMCI's src/dst strides ordered by direction by the caller). Errors: ErrStride
// (levels, negative counts or strides), ErrOutOfRange (a local buffer too short, or an extent that
// overflows int), ErrType (an accumulate whose pieces are not whole aligned elements).
func stridedShape(x xfer, local []byte, lstride []int, off int, rstride []int, count []int) (shape, error) {
	st, err := checkStrided(count, lstride, rstride)
	if err != nil {
		return shape{}, err
	}
	if st.srcExtent > len(local) {
		return shape{}, fmt.Errorf("%w: strided %v needs %d local bytes, buffer has %d", ErrOutOfRange, x, st.srcExtent, len(local))
	}
	if x.kind == kAcc && !st.empty() {
		if err := x.checkPiece(off, st.count[0]); err != nil {
			return shape{}, err
		}
		for i, s := range st.dstStride[:st.levels] {
			if s%x.typ.Align() != 0 {
				return shape{}, fmt.Errorf("%w: %v accumulate with stride %d at level %d (needs %d-byte alignment)", ErrType, x.typ, s, i+1, x.typ.Align())
			}
		}
	}
	return shape{kind: shapeStrided, local: local, off: off, extent: st.dstExtent, st: st}, nil
}

// vectorShape is a vector transfer (ARMCI_PutV's armci_giov_t list). Errors: ErrOutOfRange (a
// negative offset, or one whose end overflows int), ErrType (an accumulate element that is not
// whole aligned elements of its type).
func vectorShape(x xfer, vecs []Vec) (shape, error) {
	if len(vecs) == 0 {
		return shape{kind: shapeVector}, nil
	}
	lo, hi := vecs[0].Off, vecs[0].Off
	for i, v := range vecs {
		if v.Off < 0 || v.Off > math.MaxInt-len(v.Local) {
			return shape{}, fmt.Errorf("%w: vector element %d of %d bytes at offset %d", ErrOutOfRange, i, len(v.Local), v.Off)
		}
		if err := x.checkPiece(v.Off, len(v.Local)); err != nil {
			return shape{}, fmt.Errorf("vector element %d: %w", i, err)
		}
		lo = min(lo, v.Off)
		hi = max(hi, v.Off+len(v.Local))
	}
	return shape{kind: shapeVector, vecs: vecs, off: lo, extent: hi - lo}, nil
}

// checkPiece validates one piece of n bytes at remote byte offset off for x: an accumulate's type
// must be known, off aligned for it and n a whole number of its elements.
func (x xfer) checkPiece(off, n int) error {
	if x.kind != kAcc {
		return nil
	}
	if x.typ.Size() == 0 {
		return fmt.Errorf("%w: accumulate of type %v", ErrType, x.typ)
	}
	if off%x.typ.Align() != 0 {
		return fmt.Errorf("%w: %v accumulate at byte offset %d (needs %d-byte alignment)", ErrType, x.typ, off, x.typ.Align())
	}
	if n%x.typ.Size() != 0 {
		return fmt.Errorf("%w: %d bytes is not a whole number of %v", ErrType, n, x.typ)
	}
	return nil
}

// empty reports whether the shape moves no bytes.
func (s *shape) empty() bool {
	if s.kind == shapeStrided {
		return s.st.empty()
	}
	for _, v := range s.vecs {
		if len(v.Local) > 0 {
			return false
		}
	}
	return true
}

// each calls fn for every non-empty piece with its local bytes and its remote byte offset
// relative to s.off, in ARMCI order (strided: level 1 fastest; vector: list order).
func (s *shape) each(fn func(local []byte, roff int) error) error {
	if s.kind == shapeStrided {
		c0 := s.st.count[0]
		return s.st.each(func(lo, ro int) error { return fn(s.local[lo:lo+c0], ro) })
	}
	for _, v := range s.vecs {
		if len(v.Local) > 0 {
			if err := fn(v.Local, v.Off-s.off); err != nil {
				return err
			}
		}
	}
	return nil
}
