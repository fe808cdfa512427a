package ibv

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/goarmci/goarmci/internal/wqring"
)

// CQ is a completion queue (struct ibv_cq). Providers add completions (ibv/provider.Push);
// consumers take them with Poll (ibv_poll_cq) or block in Wait (the completion-channel idiom).
//
// Its entries follow the completions waiting, not its capacity (internal/wqring, as the work
// queues): a CQ starts with a few entries, doubles when a completion finds it full, up to the cqe
// it was created with, and shrinks when it has been polled empty [Sridhar08]. It still overruns
// exactly when cqe completions are waiting.
type CQ struct {
	ctx     *Context
	mu      sync.Mutex
	q       wqring.Ring[WC]
	head    uint64       // absolute index of the oldest completion waiting
	tail    uint64       // absolute index of the next completion
	count   atomic.Int32 // == n, readable without the lock
	signal  chan struct{}
	overrun atomic.Bool
	refs    atomic.Int32
	dead    atomic.Bool
	spins   int // polls of Wait before it parks (SetWaitSpins)
}

// CreateCQ creates a completion queue with room for cqe completions (ibv_create_cq).
func (c *Context) CreateCQ(cqe int) (*CQ, error) {
	if cqe <= 0 || cqe > 1<<22 {
		return nil, fmt.Errorf("%w: CQ of %d entries", ErrInvalidArgument, cqe)
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	return &CQ{ctx: c, q: wqring.New[WC](cqe), signal: make(chan struct{}, 1), spins: spinPolls}, nil
}

// Cap is the number of completions the CQ holds (cqe of CreateCQ).
func (cq *CQ) Cap() int { return cq.q.Limit() }

// entries is the number of entries the CQ's ring holds now (Cap at most).
func (cq *CQ) entries() int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.q.Len()
}

// Len is the number of completions waiting.
func (cq *CQ) Len() int { return int(cq.count.Load()) }

// push adds a completion (ibv/provider.Push). When the CQ is full the completion is dropped, the
// CQ is marked overrun and an EventCQErr is posted, as hardware does; push then returns false.
func (cq *CQ) push(wc WC) bool {
	cq.mu.Lock()
	if !cq.q.Reserve(cq.head, cq.tail) {
		cq.mu.Unlock()
		if cq.overrun.CompareAndSwap(false, true) {
			cq.ctx.postEvent(AsyncEvent{Type: EventCQErr, CQ: cq, Detail: "CQ overrun"})
		}
		return false
	}
	*cq.q.At(cq.tail) = wc
	cq.tail++
	cq.count.Store(int32(cq.tail - cq.head))
	cq.mu.Unlock()
	select {
	case cq.signal <- struct{}{}:
	default:
	}
	return true
}

// Poll moves up to len(wc) completions into wc and returns how many (ibv_poll_cq).
func (cq *CQ) Poll(wc []WC) int {
	if cq.count.Load() == 0 {
		return 0
	}
	cq.mu.Lock()
	k := 0
	for k < len(wc) && cq.head != cq.tail {
		wc[k] = *cq.q.At(cq.head)
		cq.head++
		k++
	}
	cq.q.Idle(cq.head, cq.tail)
	cq.count.Store(int32(cq.tail - cq.head))
	cq.mu.Unlock()
	return k
}

// spinPolls is how many times Wait polls, yielding the processor in between, before it parks:
// waking a parked waiter on another core costs tens of µs on this class of machine, more than
// most remote operations take.
const spinPolls = 200

// SetWaitSpins sets how many times Wait polls, yielding to other goroutines in between, before
// it parks (default 200; 0: park at once). A consumer that has polled already before it calls
// Wait (and driven the provider's progress while it did: multirail.Network.SetProgress) parks
// at once. Call it before the first Wait.
func (cq *CQ) SetWaitSpins(n int) { cq.spins = max(0, n) }

// Wait blocks until the CQ holds at least one completion, ctx ends, or the device is closed.
func (cq *CQ) Wait(ctx context.Context) error {
	for i := 0; i < cq.spins; i++ {
		if cq.count.Load() > 0 {
			return nil
		}
		runtime.Gosched()
	}
	for {
		if cq.count.Load() > 0 {
			return nil
		}
		select {
		case <-cq.signal:
		case <-ctx.Done():
			return ctx.Err()
		case <-cq.ctx.done:
			return ErrClosed
		}
	}
}

// Overrun reports whether a completion was ever dropped because the CQ was full.
func (cq *CQ) Overrun() bool { return cq.overrun.Load() }

// Destroy destroys the CQ (ibv_destroy_cq); ErrBusy while a QP uses it.
func (cq *CQ) Destroy() error {
	if cq.refs.Load() != 0 {
		return fmt.Errorf("%w: CQ used by %d QPs", ErrBusy, cq.refs.Load())
	}
	cq.dead.Store(true)
	return nil
}
