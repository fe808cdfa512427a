// Package transport holds the decision core that chooses, per network peer, between a dedicated
// Reliable Connection (RC) queue pair and the shared datagram path (one DC queue pair per process,
// ibv.DC), after [Takagi15]: per-peer communication statistics over a sliding time window
// (Stats), the cost model and FIND_MAP over them (FindMap, [Takagi15 §3.2, Fig. 6, App. A]), the
// periodic evaluation with the threshold γ that keeps a peer from flapping, a bound h on RC
// connections and a pool of RC connections that are reused and evicted when idle (Selector,
// [Takagi15 §3.4]), and the channel switch protocol that keeps ARMCI ordering across a change
// of path (Switch, [Takagi15 §3.3]). The bound exists because an RC queue pair and its buffers
// cost memory per peer while the shared path keeps only a small reliability record per peer
// [Sridhar08].
//
// Everything here is a pure core: no goroutine, no clock read, no I/O. Events come in with the
// time passed by the caller, decisions and actions come out; rma's adaptive transport
// (GOARMCI_NET_TRANSPORT=adaptive) is the driver: it counts operations, calls Selector.Evaluate
// about once a second, dials and closes RC connections and feeds each peer's Switch. Bad input returns an error wrapping a sentinel of this package
// and changes nothing.
package transport
