// Package wqring is the storage of a work queue whose memory follows the work requests
// outstanding, not its capacity: a ring of entries addressed by absolute index (the queue's
// head ≤ i < tail, counters that only grow) which starts at First entries, doubles — up to the
// queue's capacity limit (MaxSendWR, MaxRecvWR) — when a post finds it full, and shrinks when the
// queue has emptied. A queue with few requests outstanding, the common case of thousands of
// connections, holds First entries whatever its capacity ([Sridhar08]: memory proportional to
// the traffic, not to the number of connections).
//
// Shrinking follows the pattern of use. A ring that empties shrinks to its floor, First at
// first, so a single burst leaves nothing behind. A ring that has to grow again after having
// shrunk raises its floor to the size it grows to, so a queue that keeps going through busy
// periods of the same depth keeps its ring and allocates nothing; the floor halves again after
// floorDecay busy periods in a row that used at most a quarter of it.
//
// The verbs semantics stay those of a queue allocated at its capacity: Reserve refuses exactly
// when limit entries are outstanding, and the entries keep their absolute indexes (so their
// order and whatever the queue numbers by them, such as PSNs) across a resize. Memory is
// allocated only when the ring is full or when it empties above its floor, never on a post that
// fits.
package wqring

// First is the number of entries of a new ring, and its first floor.
const First = 4

// floorDecay is the number of busy periods in a row using at most a quarter of the floor after
// which the floor halves.
const floorDecay = 8

// Ring holds the entries of a work queue. The zero Ring has no entries and a limit of 0.
type Ring[T any] struct {
	buf    []T
	limit  int
	floor  int    // the size an emptied ring shrinks to
	shrunk bool   // the ring has shrunk: growing again raises the floor
	peak   uint64 // the most entries outstanding in the current busy period (0: none reserved since the last Idle)
	low    int    // busy periods in a row whose peak was at most floor/4
}

// New returns a ring of up to limit entries (limit ≥ 0), holding min(First, limit).
func New[T any](limit int) Ring[T] {
	limit = max(limit, 0)
	return Ring[T]{buf: make([]T, min(First, limit)), limit: limit, floor: First}
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
	if n >= uint64(len(r.buf)) {
		if len(r.buf) >= r.limit {
			return false
		}
		r.resize(head, tail, min(max(2*len(r.buf), First), r.limit))
		if r.shrunk {
			r.floor = len(r.buf)
		}
	}
	r.peak = max(r.peak, n+1)
	return true
}

// Idle ends a busy period when the queue is empty (head == tail), and is a no-op otherwise or
// when nothing was reserved since the last one: a ring above its floor shrinks to it (see the
// package comment). The entries' contents are dropped (a queue keeps nothing in an entry that is
// not outstanding but reusable capacity).
func (r *Ring[T]) Idle(head, tail uint64) {
	if head != tail || r.peak == 0 {
		return
	}
	if r.floor > First && r.peak <= uint64(r.floor/4) {
		if r.low++; r.low >= floorDecay {
			r.floor, r.low = max(r.floor/2, First), 0
		}
	} else {
		r.low = 0
	}
	r.peak = 0
	if len(r.buf) > r.floor {
		r.buf = make([]T, r.floor)
		r.shrunk = true
	}
}

func (r *Ring[T]) resize(head, tail uint64, n int) {
	buf := make([]T, n)
	for i := head; i != tail; i++ {
		buf[i%uint64(n)] = r.buf[i%uint64(len(r.buf))]
	}
	r.buf = buf
}
