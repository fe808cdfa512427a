package multirail

import (
	"sync"
	"sync/atomic"

	"github.com/goarmci/goarmci/ibv"
)

// Request is one operation in flight, possibly carried by several work requests (stripes, and
// the pieces of a strided or vector transfer). It completes when all of them have completed; its
// status is the first failure's. A Request carries operations to one channel.
type Request struct {
	net     *Network
	pending atomic.Int32
	status  atomic.Uint32 // ibv.WCStatus of the first failure, or WCSuccess
	// partitioned: a work request was given up after a network partition (hybridft).
	partitioned atomic.Bool
	finished    atomic.Bool // set last, when every work request completed
	// onDone, if set, runs once when the request completes (from the progress engine).
	onDone func(*Request)
	// Tag is free for the caller (e.g. the target rank).
	Tag int
	// Blocking tells the scheduler the origin waits for this operation before issuing another
	// ([Vishnu07 §6.2.1], EPC's communication marker). Set it before posting.
	Blocking bool
	// Collective tells the scheduler the operation is a step of a collective (§6.2.2).
	Collective bool

	// Ordering state, guarded by ch.mu (multi-subchannel channels only): the remote byte range
	// the request touches, whether it writes and reads there, the subchannels it uses and its
	// index in ch.tracked.
	ch           *Channel
	lo, hi       uint64
	write, read  bool
	subs         uint64
	trackedIndex int
}

// Done reports whether every work request of r has completed.
// It turns true only after the completion's bookkeeping (untracking, onDone) has run, so a
// waiter that sees it may recycle the request (Network.Release).
func (r *Request) Done() bool { return r.finished.Load() }

// Status is the first failure's completion status, or WCSuccess.
func (r *Request) Status() ibv.WCStatus { return ibv.WCStatus(r.status.Load()) }

func (r *Request) fail(s ibv.WCStatus) { r.status.CompareAndSwap(uint32(ibv.WCSuccess), uint32(s)) }

// stripeRec is one work request in flight: the work request ID is its index in the network's
// stripe table.
type stripeRec struct {
	req *Request
	ch  *Channel
	pc  *piece // nil on a single-subchannel channel
	sub int
}

// stripeTable maps work request IDs to stripes without hiding pointers in integers.
type stripeTable struct {
	mu   sync.Mutex
	recs []stripeRec
	free []uint64
}

func (s *stripeTable) add(rec stripeRec) uint64 {
	s.mu.Lock()
	var id uint64
	if n := len(s.free); n > 0 {
		id = s.free[n-1]
		s.free = s.free[:n-1]
		s.recs[id] = rec
	} else {
		id = uint64(len(s.recs))
		s.recs = append(s.recs, rec)
	}
	s.mu.Unlock()
	return id
}

// take removes and returns the stripe with ID id.
func (s *stripeTable) take(id uint64) (stripeRec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id >= uint64(len(s.recs)) || s.recs[id].req == nil {
		return stripeRec{}, false
	}
	rec := s.recs[id]
	s.recs[id] = stripeRec{}
	s.free = append(s.free, id)
	return rec, true
}
