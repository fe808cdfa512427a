package rma

import "fmt"

// MaxStrideLevels is ARMCI's limit on stride levels (ARMCI_MAX_STRIDE_LEVEL).
const MaxStrideLevels = 8

// strided is a validated ARMCI strided descriptor: count[0] contiguous bytes, repeated count[i]
// times at stride stride[i-1] on each side (ARMCI_PutS's src_stride_arr/dst_stride_arr/count).
type strided struct {
	count     []int
	srcStride []int
	dstStride []int
}

// checkStrided validates a descriptor against a local buffer of localLen bytes (on the src side)
// and a remote window of remoteLen bytes (on the dst side) and returns the extents used.
func checkStrided(count, srcStride, dstStride []int) (strided, error) {
	levels := len(count) - 1
	if levels < 0 || levels > MaxStrideLevels {
		return strided{}, fmt.Errorf("%w: %d stride levels (count has %d entries, at most %d levels)", ErrStride, levels, len(count), MaxStrideLevels)
	}
	if len(srcStride) < levels || len(dstStride) < levels {
		return strided{}, fmt.Errorf("%w: %d levels need %d strides (got %d and %d)", ErrStride, levels, levels, len(srcStride), len(dstStride))
	}
	for i, c := range count {
		if c < 0 {
			return strided{}, fmt.Errorf("%w: count[%d] = %d", ErrStride, i, c)
		}
	}
	for i := 0; i < levels; i++ {
		if srcStride[i] < 0 || dstStride[i] < 0 {
			return strided{}, fmt.Errorf("%w: negative stride at level %d", ErrStride, i+1)
		}
	}
	return strided{count: count, srcStride: srcStride[:levels], dstStride: dstStride[:levels]}, nil
}

// empty reports whether the descriptor moves no bytes.
func (s strided) empty() bool {
	for _, c := range s.count {
		if c == 0 {
			return true
		}
	}
	return false
}

// extent is one past the last byte the descriptor touches on the side with the given strides.
func (s strided) extent(stride []int) int {
	if s.empty() {
		return 0
	}
	e := s.count[0]
	for i, st := range stride {
		e += (s.count[i+1] - 1) * st
	}
	return e
}

// each calls fn for every contiguous chunk with its source and destination byte offsets, in
// ARMCI order (level 1 fastest).
func (s strided) each(fn func(srcOff, dstOff int) error) error {
	if s.empty() {
		return nil
	}
	levels := len(s.count) - 1
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
