//go:build !amd64 || race

package memcopy

// Without REP MOVSB (other architectures), and in race builds: the race detector sees the
// bytes Go's copy moves, not those of an assembly loop.
const haveRep = false
