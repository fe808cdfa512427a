package engine

// Hooks for connection recovery above the verbs layer (hybridft, [Vishnu09 §IV.C]): after a queue
// pair moved to ERROR, the requester tells which PSNs each flushed request had, and the
// responder tells how far it executed the peer's requests (its expected PSN) and the results of
// the atomics it executed. Together they let the recovering layer re-issue every failed request
// exactly once on a recycled queue pair. hybridft reaches them by asserting provider.QPDriver(qp) to an
// interface of these methods.

type failedWQE struct {
	id              uint64
	firstPSN, npkts uint32
	pkt             int // payload bytes per packet
}

// FailedRequests calls fn for every send request that the last move to ERROR flushed and that
// had been given PSNs (requests posted in ERROR, or with a local error, had none and were never
// transmitted), oldest first: its work request ID, first PSN, number of PSNs, and the packet
// size in bytes that segmented it (the path MTU or the segment size, see swqe.pkt). The record is kept until the next move to ERROR.
func (q *QP) FailedRequests(fn func(id uint64, firstPSN, npkts uint32, mtu int)) {
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	for _, f := range q.failed {
		fn(f.id, f.firstPSN, f.npkts, f.pkt)
	}
}

// ResponderState returns the responder's expected PSN — every request PSN before it was executed
// (a multi-packet write or accumulate packet by packet) — and calls fn with each atomic result
// it remembers (request PSN, original value). Meaningful while the QP is in ERROR (no request is
// executed any more) and before it is reset.
func (q *QP) ResponderState(fn func(psn uint32, value uint64)) uint32 {
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	if fn != nil {
		for _, a := range q.rsp.atomics {
			if a.valid {
				fn(a.psn, a.value)
			}
		}
	}
	return q.rsp.ePSN
}
