// Package shm is goarmci's intra-node verbs provider: queue pairs between OS processes (ranks)
// on one node, whose one-sided operations — RDMA write and read, the verbs atomics and their
// extensions, and accumulate — are executed by the origin alone, with one copy, no system call
// and no work by the target process (a system call per operation costs more than a whole small
// Put/Get over shared memory is allowed to: [ARMCI]).
//
// How it works. Every device (Open) publishes a control segment, a small shared file named
// goarmci.<job>.<name>.ctl in /dev/shm (Config.Dir), holding its MR table (rkey, virtual address, length,
// access flags and the shared buffer behind each region) and its QP table (state, access flags
// and the peer each QP is connected to). Memory from AllocBuffer lives in anonymous shared files
// (memfd). Both kinds of file are allocated (fallocate) before they are mapped, so a full tmpfs
// or a memory limit is an error wrapping ErrNoSpace, not a SIGBUS. An origin QP connected to a target QP (INIT→RTR with AHAttr.Addr = the target's
// PortAttr.Addr and DestQPN) maps the target's control segment once; for each request it does
// what the responder's memory access validation would do (IBA §9.7.4.1.5: the responder QP is in
// RTR/RTS/SQD, connected to this QP and allows the access; the rkey names a live region whose
// access flags allow it and which contains the range) and then copies into or out of its own
// mapping of the target's buffer, or applies the atomic kernel (internal/accum) there. The checks
// are cached and revalidated by one load of a seqlock word per descriptor, so a request costs a
// few loads of shared memory plus the copy. Requests complete on the send CQ before PostSend
// returns, in program order.
//
// Memory that is not from AllocBuffer (ordinary Go memory) can be registered too: a peer in
// another process then reaches it by cross-memory attach (process_vm_writev/readv: correct, one
// copy, but a system call per request and write/read only — atomics and accumulate on such a
// region complete with REM_INV_REQ_ERR); a peer in the same process reaches it directly.
//
// Errors follow verbs: a local key/bounds/access error completes with LOC_PROT_ERR; a remote
// one with REM_ACCESS_ERR and nothing is written; a responder QP that is absent, not connected to
// this QP or closed (waited for up to the ACK timeout × (retry count + 1)) gives RETRY_EXC_ERR.
// Each error completion moves the QP to ERROR with an IBV_EVENT_QP_FATAL async event; later
// requests complete with WR_FLUSH_ERR. WC.VendorErr says which check failed (Vendor* constants).
//
// Not provided: UD queue pairs, two-sided operations (Send, Send with immediate, RDMA write
// with immediate: PostSend returns ibv.ErrUnsupported; receives may be posted and are flushed
// when the QP enters ERROR), shared receive queues. Paths cannot fail inside a node, so an
// alternate path is armed as soon as its endpoint is reachable and never migrated to
// automatically. A peer process that crashes without closing is not noticed by requesters (its
// memory stays mapped; writes land there harmlessly); Cleanup removes its files.
package shm
