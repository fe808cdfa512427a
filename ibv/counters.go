package ibv

// QPCounters are a queue pair's transport counters since it was created, named after the
// per-QP hardware counters `rdma statistic qp` shows for RDMA devices (rdma-core): how often the
// requester went back to retransmit and why, and what its responder received out of order or
// twice. A provider without a transport protocol (shm executes every request inside the post)
// reports zeros.
type QPCounters struct {
	// LocalAckTimeoutErr: ACK timeouts after which the requester retransmitted from the oldest
	// unacknowledged packet (go-back-N; local_ack_timeout_err).
	LocalAckTimeoutErr uint64
	// PacketSeqErr: sequence-error NAKs received, each a go-back-N at the responder's request
	// (packet_seq_err).
	PacketSeqErr uint64
	// ImpliedNakSeqErr: acknowledgements that passed a read or atomic whose response never
	// came, each a go-back-N to it (implied_nak_seq_err).
	ImpliedNakSeqErr uint64
	// RNRNakReceived: receiver-not-ready NAKs received (a send found no posted receive); the
	// request is retried after the RNR timer (rnr_nak_retry_err counts those that exhausted it).
	RNRNakReceived uint64
	// OutOfSequence: requests the responder received ahead of the expected PSN (a packet before
	// them was lost; answered with a sequence NAK; out_of_sequence).
	OutOfSequence uint64
	// DuplicateRequest: requests received again after they were executed (a retransmission after
	// a lost ACK): answered without executing them twice (duplicate_request).
	DuplicateRequest uint64
	// MessagesReceived: request messages the responder executed (each once: duplicates are not
	// counted), so a consumer can tell that its peer uses the connection.
	MessagesReceived uint64
}

// Retransmissions is the number of times the requester went back to retransmit: ACK timeouts,
// sequence-error NAKs and implied NAKs.
func (c QPCounters) Retransmissions() uint64 {
	return c.LocalAckTimeoutErr + c.PacketSeqErr + c.ImpliedNakSeqErr
}

// CounterReader is implemented by the QPDriver of a provider with a transport protocol.
type CounterReader interface {
	Counters() QPCounters
}

// Counters returns the queue pair's transport counters (a goarmci extension in the spirit of
// `rdma statistic qp`); zeros when the provider keeps none.
func (qp *QP) Counters() QPCounters {
	if cr, ok := qp.drv.(CounterReader); ok {
		return cr.Counters()
	}
	return QPCounters{}
}
