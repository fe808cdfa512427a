//go:build !amd64 || race

package memcopy

import "unsafe"

// Without REP MOVSB (other architectures), and in race builds: the race detector sees the
// bytes Go's copy moves, not those of an assembly loop.
const haveRep = false

func repMovsb(dst, src unsafe.Pointer, n uintptr) {
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}
