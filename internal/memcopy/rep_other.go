//go:build !amd64

package memcopy

import "unsafe"

const haveRep = false

func repMovsb(dst, src unsafe.Pointer, n uintptr) {
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}
