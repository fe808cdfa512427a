package memcopy

import "unsafe"

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns that number, like copy.
// Overlapping slices are allowed (they take copy's memmove path).
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < minRep || !haveRep {
		return copy(dst, src)
	}
	dp, sp := unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src))
	if d, s := uintptr(dp), uintptr(sp); d < s+uintptr(n) && s < d+uintptr(n) {
		return copy(dst, src) // overlap: memmove's direction handling
	}
	repMovsb(dp, sp, uintptr(n))
	return n
}
