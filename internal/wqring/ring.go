// Package wqring is the storage of a work queue whose memory follows the work requests
// outstanding, not its capacity: a ring of entries addressed by absolute index (the queue's
// head ≤ i < tail, counters that only grow) which starts at First entries, doubles — up to the
// queue's capacity limit (MaxSendWR, MaxRecvWR) — when a post finds it full, and goes back to
// First entries when the queue has emptied. A queue with few requests outstanding, the common
// case of thousands of connections, holds First entries whatever its capacity ([Sridhar08]:
// memory proportional to the traffic, not to the number of connections).
//
// The verbs semantics stay those of a queue allocated at its capacity: Reserve refuses exactly
// when limit entries are outstanding, and the entries keep their absolute indexes (so their
// order and whatever the queue numbers by them, such as PSNs) across a resize. Memory is
// allocated only when the ring is full (at most log2(limit/First) times per busy period) and
// when it empties after having grown, never on a post that fits.
package wqring

// First is the number of entries of a new ring, and of one that has emptied.
const First = 4

// Ring holds the entries of a work queue. The zero Ring has no entries and a limit of 0.
type Ring[T any] struct {
	buf   []T
	limit int
}

// New returns a ring of up to limit entries (limit ≥ 0), holding min(First, limit).
func New[T any](limit int) Ring[T] {
	limit = max(limit, 0)
	return Ring[T]{buf: make([]T, min(First, limit)), limit: limit}
}

// At is the entry of absolute index i; i must lie between the queue's head and the tail
// reserved last.
func (r *Ring[T]) At(i uint64) *T { return &r.buf[i%uint64(len(r.buf))] }

// Limit is the most entries the queue holds outstanding (its verbs capacity).
func (r *Ring[T]) Limit() int { return r.limit }

// Len is the number of entries the ring holds now (First ≤ Len ≤ Limit, or Limit when smaller).
func (r *Ring[T]) Len() int { return len(r.buf) }

// Reserve makes room for entry tail of a queue whose outstanding entries run from head to tail
// (tail - head ≤ Limit): it doubles the ring, keeping every entry at its index, when it is full;
// false when Limit entries are outstanding.
func (r *Ring[T]) Reserve(head, tail uint64) bool {
	n := tail - head
	if n < uint64(len(r.buf)) {
		return true
	}
	if len(r.buf) >= r.limit {
		return false
	}
	r.resize(head, tail, min(max(2*len(r.buf), First), r.limit))
	return true
}

// Idle gives the memory of a grown ring back when its queue is empty (head == tail): the ring
// returns to First entries. The entries' contents are dropped (a queue keeps nothing in an
// entry that is not outstanding but reusable capacity).
func (r *Ring[T]) Idle(head, tail uint64) {
	if head != tail || len(r.buf) <= First {
		return
	}
	r.buf = make([]T, First)
}

func (r *Ring[T]) resize(head, tail uint64, n int) {
	buf := make([]T, n)
	for i := head; i != tail; i++ {
		buf[i%uint64(n)] = r.buf[i%uint64(len(r.buf))]
	}
	r.buf = buf
}
