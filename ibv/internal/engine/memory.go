package engine

import (
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/wqring"
)

// dcRecordOverhead is the bytes a DC peer record costs in the table's map besides the record:
// the key, the pointer and the map's share of a bucket.
var dcRecordOverhead = ibv.SizeOf[dcKey]() + 8 + 16

// MemoryFootprint is the bytes the engine side of the queue pair holds now (ibv.QPMemory): its
// record, the entries its send and receive queues hold (they grow with the requests
// outstanding), and for a DC queue pair its peer records.
func (q *QP) MemoryFootprint() int64 {
	n := ibv.SizeOf[QP]() + q.queueBytes()
	if q.isDC() {
		d := q.dc
		d.mu.RLock()
		for _, p := range d.peers {
			n += ibv.SizeOf[QP]() + dcRecordOverhead + p.queueBytes()
		}
		d.mu.RUnlock()
	}
	return n
}

// DCPeers is the number of peer records of a DC queue pair (0 for other queue pairs).
func (q *QP) DCPeers() int {
	if !q.isDC() {
		return 0
	}
	q.dc.mu.RLock()
	defer q.dc.mu.RUnlock()
	return len(q.dc.peers)
}

// queueBytes is the bytes of the entries q's send and receive queues hold now.
func (q *QP) queueBytes() int64 {
	q.sqMu.Lock()
	n := int64(q.sq.wq.Len())*ibv.SizeOf[swqe]() + int64(cap(q.failed))*ibv.SizeOf[failedWQE]()
	q.sqMu.Unlock()
	q.rqMu.Lock()
	n += int64(q.rq.q.Len()) * ibv.SizeOf[rwqe]()
	q.rqMu.Unlock()
	return n
}

// MemoryFootprint is the bytes the engine side of the SRQ holds now (ibv.SRQMemory).
func (s *SRQ) MemoryFootprint() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ibv.SizeOf[SRQ]() + int64(s.q.q.Len())*ibv.SizeOf[rwqe]()
}

// DCPeerBytes is the bytes of a new peer record of a DC queue pair (ibv.DCMemory): the record,
// its place in the table, its first send-queue entries.
func (q *QP) DCPeerBytes() int64 {
	if !q.isDC() {
		return 0
	}
	return ibv.SizeOf[QP]() + dcRecordOverhead + int64(min(wqring.First, q.dc.maxWR))*ibv.SizeOf[swqe]()
}
