// Package hybridft is the fault-tolerant RC connection layer that multirail builds on: the
// Hybrid-IBNFT design of [Vishnu09] (§IV) and [Vishnu07 ch. 9–10]. A Conn is one reliable connection
// to a peer over one path (one RC queue pair).
//
// Endpoints made by NewEndpoint are pass-through: faults surface as failed completions. Endpoints
// made by a Manager (NewManager at initialization, Manager.NewEndpoint per device, WithPort per
// rail) keep their connections alive across network faults:
//
//   - Hardware-IBNFT (package apm, [Vishnu07 ch. 9]): after Connect every queue pair gets an
//     alternate path (another rail, else other path bits) loaded with a path loading request
//     (REARM→ARMED); the provider migrates by itself when the primary path's retries run out;
//     the device's asynchronous event goroutine re-arms a new alternate after each migration,
//     gives a recovered home path back by manual migration, and runs GOARMCI_APM_TEST.
//   - Software-IBNFT [Vishnu09 §IV.B–C, Fig. 8]: failed completions and async events (QP fatal,
//     port error) start the re-establishment protocol over the UD connection manager (package
//     udcm): the queue pair is moved to ERROR and recycled (RESET→INIT→RTR→RTS with fresh PSNs
//     exchanged by REQ/REP/ACK, resent on timers, duplicates ignored, per-pair sequence IDs) on
//     a healthy path of the path repository (package recovery).
//   - Exactly once: each Conn logs its posted, not yet completed work requests. Failed ones are
//     re-issued once the queue pair is back, in order, before newer ones. The responder's record
//     of the failed incarnation (its expected PSN and executed atomic results, carried in the
//     REP/ACK) tells which were executed though their acknowledgement was lost: those are
//     completed, not repeated (an accumulate is never applied twice, a fetch-and-add returns the
//     value it got); partly executed writes and accumulates re-issue only their tail.
//   - Partitions: while no path works the requests wait and paths are probed; past
//     Options.PartitionTimeout (DefaultPartitionTimeout, 30 s, unless set; negative: only the
//     consumer's context bounds the wait) they complete with a failure that CompletionError
//     maps to ErrPartition.
//
// Connections are made from ConnInfo exchanged by the consumer (Conn.Connect), or on demand:
// Manager.OnDemand dials a peer through the same UD connection manager the first time it is
// used (CONN_REQ/REP/RTU, [Vishnu09 §IV.B.2]; [Sridhar08]: no per-peer queue pair before that).
//
// The completion filter is Endpoint.Poll: it absorbs the failed completions of requests that
// will be re-issued, so every work request completes exactly once.
package hybridft
