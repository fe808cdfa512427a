package window

import "unsafe"

// asWords views b as 8-byte words for sync/atomic, or returns nil when b does not start on an
// 8-byte boundary (then the caller keeps rma's checked atomics). A part of the synchronization
// segment is a whole number of words (syncBytes), so every word offset of it is in the view.
func asWords(b []byte) []uint64 {
	if len(b) < 8 || uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
}
