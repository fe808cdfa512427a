package rma

import (
	"fmt"
	"math"
)

// MaxStrideLevels is ARMCI's limit on stride levels (ARMCI_MAX_STRIDE_LEVEL).
const MaxStrideLevels = 8

// strided is a validated ARMCI strided descriptor: count[0] contiguous bytes, repeated count[i]
// times at stride stride[i-1] on each side (ARMCI_PutS's src_stride_arr/dst_stride_arr/count).
// It holds a copy of the caller's descriptor (at most MaxStrideLevels levels), so a transfer
// never keeps the caller's slices: they may live on its stack.
type strided struct {
	levels    int
	count     [MaxStrideLevels + 1]int
	srcStride [MaxStrideLevels]int
	dstStride [MaxStrideLevels]int
	srcExtent int // one past the last byte touched on each side (0 when empty)
	dstExtent int
}

// checkStrided validates a descriptor and computes the extent of each side. Errors: ErrStride
// (stride levels, negative counts or strides), ErrOutOfRange (an extent that overflows int: no
// buffer or segment part can hold it).
func checkStrided(count, srcStride, dstStride []int) (strided, error) {
	levels := len(count) - 1
	if levels < 0 || levels > MaxStrideLevels {
		return strided{}, fmt.Errorf("%w: %d stride levels (count has %d entries, at most %d levels)", ErrStride, levels, len(count), MaxStrideLevels)
	}
	if len(srcStride) < levels || len(dstStride) < levels {
		return strided{}, fmt.Errorf("%w: %d levels need %d strides (got %d and %d)", ErrStride, levels, levels, len(srcStride), len(dstStride))
	}
	st := strided{levels: levels}
	for i, c := range count {
		if c < 0 {
			return strided{}, fmt.Errorf("%w: count[%d] = %d", ErrStride, i, c)
		}
		st.count[i] = c
	}
	for i := 0; i < levels; i++ {
		if srcStride[i] < 0 || dstStride[i] < 0 {
			return strided{}, fmt.Errorf("%w: negative stride at level %d", ErrStride, i+1)
		}
		st.srcStride[i], st.dstStride[i] = srcStride[i], dstStride[i]
	}
	var ok1, ok2 bool
	st.srcExtent, ok1 = st.extent(&st.srcStride)
	st.dstExtent, ok2 = st.extent(&st.dstStride)
	if !ok1 || !ok2 {
		return strided{}, fmt.Errorf("%w: strided extent of %d levels overflows int", ErrOutOfRange, levels)
	}
	return st, nil
}

// empty reports whether the descriptor moves no bytes.
func (s *strided) empty() bool {
	for _, c := range s.count[:s.levels+1] {
		if c == 0 {
			return true
		}
	}
	return false
}

// extent is one past the last byte the descriptor touches on the side with the given strides,
// and false when that overflows int. Every offset each visits on that side is below it.
func (s *strided) extent(stride *[MaxStrideLevels]int) (int, bool) {
	if s.empty() {
		return 0, true
	}
	e := s.count[0]
	for i, st := range stride[:s.levels] {
		n := s.count[i+1] - 1
		if n > 0 && st > 0 {
			if st > (math.MaxInt-e)/n {
				return 0, false
			}
			e += n * st
		}
	}
	return e, true
}

// each calls fn for every contiguous chunk with its source and destination byte offsets, in
// ARMCI order (level 1 fastest).
func (s *strided) each(fn func(srcOff, dstOff int) error) error {
	if s.empty() {
		return nil
	}
	levels := s.levels
	var idx [MaxStrideLevels]int
	so, do := 0, 0
	for {
		if err := fn(so, do); err != nil {
			return err
		}
		l := 0
		for ; l < levels; l++ {
			idx[l]++
			so += s.srcStride[l]
			do += s.dstStride[l]
			if idx[l] < s.count[l+1] {
				break
			}
			so -= idx[l] * s.srcStride[l]
			do -= idx[l] * s.dstStride[l]
			idx[l] = 0
		}
		if l == levels {
			return nil
		}
	}
}
