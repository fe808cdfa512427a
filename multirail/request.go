package multirail

import (
	"sync"
	"sync/atomic"

	"github.com/goarmci/goarmci/ibv"
)

// Request is one operation in flight, possibly carried by several work requests. It completes
// when all of them have completed; its status is the first failure's.
type Request struct {
	net     *Network
	slot    uint64
	pending atomic.Int32
	status  atomic.Uint32 // ibv.WCStatus of the first failure, or WCSuccess
	// onDone, if set, runs once when the request completes (from the progress engine).
	onDone func(*Request)
	// Tag is free for the caller (e.g. the target rank).
	Tag int
}

// Done reports whether every work request of r has completed.
func (r *Request) Done() bool { return r.pending.Load() == 0 }

// Status is the first failure's completion status, or WCSuccess.
func (r *Request) Status() ibv.WCStatus { return ibv.WCStatus(r.status.Load()) }

func (r *Request) fail(s ibv.WCStatus) { r.status.CompareAndSwap(uint32(ibv.WCSuccess), uint32(s)) }

// slab maps work request IDs to requests without hiding pointers in integers.
type slab struct {
	mu   sync.Mutex
	reqs []*Request
	free []uint64
}

func (s *slab) add(r *Request) {
	s.mu.Lock()
	if n := len(s.free); n > 0 {
		r.slot = s.free[n-1]
		s.free = s.free[:n-1]
		s.reqs[r.slot] = r
	} else {
		r.slot = uint64(len(s.reqs))
		s.reqs = append(s.reqs, r)
	}
	s.mu.Unlock()
}

func (s *slab) get(id uint64) *Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id >= uint64(len(s.reqs)) {
		return nil
	}
	return s.reqs[id]
}

func (s *slab) remove(r *Request) {
	s.mu.Lock()
	if r.slot < uint64(len(s.reqs)) && s.reqs[r.slot] == r {
		s.reqs[r.slot] = nil
		s.free = append(s.free, r.slot)
	}
	s.mu.Unlock()
}

func (s *slab) live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs) - len(s.free)
}
