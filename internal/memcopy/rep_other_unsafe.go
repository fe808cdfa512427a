//go:build !amd64 || race

package memcopy

import "unsafe"

func repMovsb(dst, src unsafe.Pointer, n uintptr) {
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}
