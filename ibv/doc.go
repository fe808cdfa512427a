// Package ibv is goarmci's verbs layer: the InfiniBand verbs semantics (device, port, protection
// domain, memory region with lkey/rkey and access flags, completion queue and work completions
// with IB status codes, RC, UD and DC queue pairs with the QP communication and path-migration state
// machines, asynchronous events) over software providers.
//
// The shapes follow libibverbs (ibv_open_device, ibv_alloc_pd, ibv_reg_mr, ibv_create_cq,
// ibv_create_qp, ibv_modify_qp, ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_get_async_event)
// in Go form. The QP states RESET→INIT→RTR→RTS, SQD, SQE and ERROR and the APM states
// MIGRATED→REARM→ARMED are those of [Vishnu07 §2.2] (the InfiniBand architecture overview of the
// dissertation) and of the IBA specification, vol. 1, ch. 10–11.
//
// Generic code here owns everything a provider does not need to know: the state machines
// (qpstate.go), key allocation and the MR table (mr.go), completion queues (cq.go) and the async
// event queue (context.go). A provider (ibv/provider/shm, tcp, udp) implements Driver and
// QPDriver and only moves bytes; it reaches the objects' provider side (completions, events, its
// own QP state changes, the key tables' checks) through package ibv/provider, as a
// database/sql driver implements database/sql/driver. Network providers share one engine that
// owns RC/UD semantics.
//
// Addresses are virtual addresses as in verbs: an MR covers [MR.Addr, MR.Addr+MR.Length), work
// requests name local memory by (Addr, Length, LKey) and remote memory by (RemoteAddr, RKey).
package ibv
