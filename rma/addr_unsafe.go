package rma

import "unsafe"

// addrOf is the virtual address of a buffer's first byte (0 for an empty one).
func addrOf(b []byte) uint64 {
	if cap(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}
