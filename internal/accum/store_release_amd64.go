//go:build amd64 && !race

package accum

// storeRelease64 stores v at *p with one MOV: on amd64 an aligned 8-byte store is single-copy
// atomic and ordered after every earlier store of the thread (x86-TSO), a release store; unlike
// sync/atomic's sequentially consistent store (XCHG) it does not wait for the cache line, so
// the thread goes on while the line travels. In assembly, so the compiler neither moves nor
// drops it and the race detector does not see it.
//
//go:noescape
func storeRelease64(p *uint64, v uint64)
