package window

import "unsafe"

func aligned(al uintptr, bufs ...[]byte) bool {
	for _, b := range bufs {
		if uintptr(unsafe.Pointer(&b[0]))%al != 0 {
			return false
		}
	}
	return true
}

// typed views b (aligned for T, little-endian like the machine) as a slice of T.
func typed[T int32 | int64 | float32 | float64](b []byte) []T {
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(z)))
}
