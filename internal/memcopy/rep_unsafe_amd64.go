//go:build amd64 && !race

package memcopy

import "unsafe"

// repMovsb copies n bytes from src to dst with REP MOVSB (rep_amd64.s); the ranges must not
// overlap.
//
//go:noescape
func repMovsb(dst, src unsafe.Pointer, n uintptr)
