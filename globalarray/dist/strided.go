package dist

import (
	"fmt"
	"math"
)

// BufStrides validates a user buffer of bufLen elements holding the patch [lo, hi] with leading
// dimensions ld, as NGA_Put/NGA_Get/NGA_Acc take it, and writes the buffer's row-major element
// strides into stride (at least len(lo) long; stride[n-1] = 1, stride[d] = stride[d+1]·ld[d]).
// ld has len(lo)-1 entries, ld[d] being the extent of the buffer along dimension d+1; a nil or
// empty ld means the patch is packed (ld[d] = hi[d+1]-lo[d+1]+1). It returns the number of
// elements the patch spans in the buffer. The patch itself must be valid (CheckPatch).
//
// Errors: ErrShape if ld has the wrong length, some ld[d] is smaller than the patch's extent
// along d+1, or bufLen is smaller than the span.
func BufStrides(lo, hi, ld []int, bufLen int, stride []int) (span int, err error) {
	n := len(lo)
	if len(ld) != 0 && len(ld) != n-1 {
		return 0, fmt.Errorf("%w: ld has %d entries for %d dimensions (want %d)", ErrShape, len(ld), n, n-1)
	}
	s := 1
	span = 1
	for d := n - 1; d >= 0; d-- {
		stride[d] = s
		e := hi[d] - lo[d] + 1
		if e > 1 && span > math.MaxInt-(e-1)*s {
			return 0, fmt.Errorf("%w: buffer span overflows", ErrShape)
		}
		span += (e - 1) * s
		if d > 0 {
			l := e
			if len(ld) != 0 {
				l = ld[d-1]
				if l < e {
					return 0, fmt.Errorf("%w: ld[%d] = %d smaller than the patch extent %d", ErrShape, d-1, l, e)
				}
			}
			if s > math.MaxInt/32/l {
				return 0, fmt.Errorf("%w: leading dimensions overflow", ErrShape)
			}
			s *= l
		}
	}
	if bufLen < span {
		return 0, fmt.Errorf("%w: buffer of %d elements, patch needs %d", ErrShape, bufLen, span)
	}
	return span, nil
}

// Strided is one ARMCI strided transfer between an owner's row-major block and a user buffer,
// in the form ARMCI_PutS/ARMCI_GetS/ARMCI_AccS take it: Count[0] contiguous bytes, repeated
// Count[l] times at stride RemoteStride[l-1] (in the block) and BufStride[l-1] (in the buffer),
// for levels l = 1..Levels, level 1 varying fastest. Dimensions of extent 1 are dropped and
// dimensions contiguous on both sides are merged into the level below, so a transfer of whole
// rows is a single contiguous chunk (Levels 0).
type Strided struct {
	RemoteOff    int // byte offset of the first element in the owner's block
	BufOff       int // byte offset of the first element in the user buffer
	Levels       int // stride levels, 0..MaxDims-1
	Count        [MaxDims]int
	RemoteStride [MaxDims - 1]int // bytes
	BufStride    [MaxDims - 1]int // bytes
}

// Counts is the count array (Levels+1 entries, Count[0] in bytes).
func (s *Strided) Counts() []int { return s.Count[:s.Levels+1] }

// RemoteStrides is the owner-side stride array (Levels entries, bytes).
func (s *Strided) RemoteStrides() []int { return s.RemoteStride[:s.Levels] }

// BufStrides is the buffer-side stride array (Levels entries, bytes).
func (s *Strided) BufStrides() []int { return s.BufStride[:s.Levels] }

// Bytes is the number of bytes moved.
func (s *Strided) Bytes() int {
	b := 1
	for _, c := range s.Counts() {
		b *= c
	}
	return b
}

// RemoteExtent is one past the last byte touched in the owner's block, relative to RemoteOff.
func (s *Strided) RemoteExtent() int { return s.extent(s.RemoteStride[:]) }

// BufExtent is one past the last byte touched in the buffer, relative to BufOff.
func (s *Strided) BufExtent() int { return s.extent(s.BufStride[:]) }

func (s *Strided) extent(stride []int) int {
	e := s.Count[0]
	for l := 1; l <= s.Levels; l++ {
		e += (s.Count[l] - 1) * stride[l-1]
	}
	return e
}

// Describe fills s with the strided transfer of the sub-patch [lo, hi] (which must lie inside
// the owner's block [blockLo, blockHi]) between that row-major block and a user buffer that
// holds the patch starting at bufLo with element strides bufStride (from BufStrides), for
// elements of elemSize bytes. All slices have the array's number of dimensions; the inputs must
// already be valid (Region and BufStrides check them). It allocates nothing.
func Describe(blockLo, blockHi, lo, hi, bufLo, bufStride []int, elemSize int, s *Strided) {
	n := len(lo)
	var rs [MaxDims]int
	r := 1
	for d := n - 1; d >= 0; d-- {
		rs[d] = r
		r *= blockHi[d] - blockLo[d] + 1
	}
	roff, boff := 0, 0
	for d := 0; d < n; d++ {
		roff += (lo[d] - blockLo[d]) * rs[d]
		boff += (lo[d] - bufLo[d]) * bufStride[d]
	}
	s.RemoteOff, s.BufOff = roff*elemSize, boff*elemSize
	s.Levels = 0
	s.Count[0] = (hi[n-1] - lo[n-1] + 1) * elemSize
	for d := n - 2; d >= 0; d-- {
		e := hi[d] - lo[d] + 1
		if e == 1 {
			continue
		}
		rst, bst := rs[d]*elemSize, bufStride[d]*elemSize
		l := s.Levels
		// The chunk (or row of chunks) below is contiguous on both sides: extend it.
		var below, belowR, belowB int
		if l == 0 {
			below, belowR, belowB = s.Count[0], 1, 1
		} else {
			below, belowR, belowB = s.Count[l], s.RemoteStride[l-1], s.BufStride[l-1]
		}
		if below*belowR == rst && below*belowB == bst {
			s.Count[l] *= e
			continue
		}
		s.Levels++
		s.Count[l+1] = e
		s.RemoteStride[l] = rst
		s.BufStride[l] = bst
	}
}
