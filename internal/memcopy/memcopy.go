// Package memcopy is the runtime's bulk copy for one-copy transfers within a node: the direct
// load/store path of rma (a put or get through a mapped view of a same-node peer's part) and the
// shm provider's execution of RDMA write and read work requests.
//
// Go's copy (runtime.memmove) switches to non-temporal stores from 1 MiB on amd64: the
// destination lines go to memory, not to the cache. For the repeated puts into the same window of
// a one-sided benchmark or application (a halo, a patch updated every iteration, the target that
// reads the data next) that is the wrong choice, and it caps a 1-4 MiB put at the memory's write
// bandwidth, well below glibc's memcpy of the same bytes with regular stores. On CPUs with ERMS
// (enhanced REP MOVSB), Copy uses REP MOVSB from 2 KiB up, which keeps regular stores at every
// size and is also faster than the runtime's AVX loop below 1 MiB (bench/README.md, "Design
// measurements"); elsewhere, and in race builds (where the race detector must see the bytes
// moved), it is copy.
package memcopy

// minRep is the size from which Copy uses REP MOVSB (where available): below it the start-up of
// the string instruction costs more than the runtime's vector loop.
const minRep = 2048
