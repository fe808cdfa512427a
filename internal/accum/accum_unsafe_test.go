package accum

import "unsafe"

// aligned returns n zero bytes aligned to 16.
func aligned(n int) []byte {
	w := make([]complex128, (n+15)/16+1)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*16)[:n:n]
}
