// Package multirail maps one-sided operations onto RDMA write, read and atomics over a virtual
// channel of subchannels ([Vishnu07 ch. 4]: "virtual channel" of "virtual subchannels", one RC QP
// each) and owns the completion filter: one completion per operation, however many work requests
// carried it [Vishnu07 §4.3].
//
// A Network is one device's side of the job: its connections (hybridft.Conn), the table of
// in-flight requests and the progress engine that polls the completion queue. A Channel is the
// path set to one peer: one subchannel (RC queue pair) per rail — per (rail, path bits) with
// several paths per rail (LMC, [Vishnu07 ch. 7]) — with a scheduling policy of
// package sched [Vishnu07 ch. 4–8] that stripes or multiplexes each operation over them, feeds
// stripe delivery times back to the adaptive policies and keeps overlapping operations in order
// (see Channel).
//
// Progress is driven by the waiting goroutine (no goroutine on the data path): whoever waits
// becomes the poller; others sleep until the poller reports progress.
package multirail
