//go:build race

package engine

import "sync"

// RaceRelease gives the race detector a happens-before edge from everything the caller did so
// far to the next Deliver in the process. Transports call it after they copied a packet's bytes
// and before handing them to the network.
//
// With both ends of a connection in one process (tests), the race detector cannot see that a
// packet sent through a kernel socket orders the sender's memory accesses before the receiver's.
// In race builds every send releases and every delivery acquires one process-wide mutex, which
// gives the detector that happens-before edge. Normal builds compile these to nothing.
var raceMu sync.Mutex

func RaceRelease() {
	raceMu.Lock()
	raceMu.Unlock() //nolint:staticcheck // an empty critical section is the point
}

func raceAcquire() {
	raceMu.Lock()
	raceMu.Unlock() //nolint:staticcheck
}

// raceMemMu serializes, in race builds only, the responder's own accesses to registered memory
// (placing RDMA writes, reading RDMA read responses, atomics and accumulates). An RDMA read may
// also legally read a word that an atomic from another peer is updating. RDMA lets a retransmitted (duplicate) read
// re-read memory that a later write on another path is placing: harmless for the protocol (the
// duplicate response is discarded) and for hardware, but a data race to the detector. Normal
// builds compile this to nothing.
var raceMemMu sync.Mutex

func raceMemLock()   { raceMemMu.Lock() }
func raceMemUnlock() { raceMemMu.Unlock() }
