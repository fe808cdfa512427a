package multirail

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/ibv"
)

// ErrFailed wraps the completion status of a failed operation.
var ErrFailed = errors.New("multirail: operation failed")

// Network is one device's side of the job.
type Network struct {
	ep      *hybridft.Endpoint
	stripes stripeTable
	live    atomic.Int64 // requests not yet complete

	pollMu  sync.Mutex // held by the goroutine that polls the CQ
	waiters atomic.Int32
	genMu   sync.Mutex
	gen     chan struct{} // closed and replaced when progress was made
	wcs     [32]ibv.WC    // poll buffer, guarded by pollMu

	progress   func() bool   // the device's progress call (SetProgress), or nil
	progBudget time.Duration // how long Wait polls with progress before it parks
}

// NewNetwork wraps an endpoint.
func NewNetwork(ep *hybridft.Endpoint) *Network {
	return &Network{ep: ep, gen: make(chan struct{})}
}

// SetProgress makes Wait poll for up to budget before it parks, calling progress between polls
// (a provider's progress call, e.g. tcp.Progress, which wakes the provider's readers whose
// sockets hold frames): a waiter that polls gets its completion one round trip after it was
// sent, where a parked one waits for the Go netpoller and a thread wake-up. After the budget,
// or at once with budget 0, Wait parks (and so does the completion queue's Wait:
// ibv.CQ.SetWaitSpins). Call it before any operation.
func (n *Network) SetProgress(progress func() bool, budget time.Duration) {
	n.progress, n.progBudget = progress, budget
	n.ep.CQ.SetWaitSpins(0)
}

// Endpoint is the device side the network uses.
func (n *Network) Endpoint() *hybridft.Endpoint { return n.ep }

// NewRequest starts a request; the caller posts its work requests with the Channel methods and
// then calls Issued.
func (n *Network) NewRequest(onDone func(*Request)) *Request {
	r, _ := requestPool.Get().(*Request)
	if r == nil {
		r = &Request{}
	}
	*r = Request{net: n, onDone: onDone}
	r.pending.Store(1) // the issuer's hold, released by Issued
	n.live.Add(1)
	return r
}

// requestPool recycles requests the caller released (hot path: no allocation per operation).
var requestPool sync.Pool

// Release hands a completed request back for reuse; the caller must not touch r afterwards. A
// request that is not done is left alone.
func (n *Network) Release(r *Request) {
	if r.Done() {
		requestPool.Put(r)
	}
}

// Issued releases the issuer's hold on r: from now on r completes when its work requests do.
func (n *Network) Issued(r *Request) { n.complete(r, ibv.WCSuccess) }

func (n *Network) complete(r *Request, s ibv.WCStatus) {
	if s != ibv.WCSuccess {
		r.fail(s)
	}
	if r.pending.Add(-1) == 0 {
		if r.ch != nil {
			r.ch.untrack(r)
		}
		n.live.Add(-1)
		if r.onDone != nil {
			r.onDone(r)
		}
		r.finished.Store(true)
	}
}

// Progress polls the completion queue once and dispatches what it finds; it returns how many
// completions it handled. It never blocks (another goroutine polling counts as no progress).
func (n *Network) Progress() int {
	if !n.pollMu.TryLock() {
		return 0
	}
	k := n.pollLocked()
	n.pollMu.Unlock()
	return k
}

func (n *Network) pollLocked() int {
	total := 0
	var now time.Time // read once per poll, and only for policies that use delivery times
	for {
		k := n.ep.Poll(n.wcs[:])
		for i := 0; i < k; i++ {
			wc := &n.wcs[i]
			rec, ok := n.stripes.take(wc.WRID)
			if !ok {
				continue
			}
			if rec.pc != nil {
				if rec.ch.feedback && now.IsZero() {
					now = time.Now()
				}
				rec.ch.stripeDone(rec.pc, rec.sub, wc.Status, now)
			}
			rec.ch.outstanding[rec.sub].Add(-1)
			if wc.VendorErr == hybridft.VendorPartition {
				rec.req.partitioned.Store(true)
			}
			n.complete(rec.req, wc.Status)
		}
		total += k
		if k < len(n.wcs) {
			break
		}
	}
	if total > 0 {
		n.broadcast()
	}
	return total
}

func (n *Network) broadcast() {
	if n.waiters.Load() == 0 {
		return
	}
	n.genMu.Lock()
	close(n.gen)
	n.gen = make(chan struct{})
	n.genMu.Unlock()
}

func (n *Network) generation() <-chan struct{} {
	n.genMu.Lock()
	defer n.genMu.Unlock()
	return n.gen
}

// Wait drives progress until r completes or ctx ends, and returns the request's outcome: nil, or
// an error wrapping ErrFailed and the completion status as an *ibv.WCError (errors.Is matches
// ibv.ErrAccess, ibv.ErrRetryExceeded, ibv.ErrFlushed, ...).
func (n *Network) Wait(ctx context.Context, r *Request) error {
	polling := n.progress != nil && n.progBudget > 0 // the progress polls (SetProgress)
	var pollEnd time.Time
	for spins := 0; !r.Done(); spins++ {
		if n.pollMu.TryLock() {
			k := n.pollLocked()
			if k == 0 && !r.Done() {
				if polling && spins&15 == 0 {
					if now := time.Now(); pollEnd.IsZero() {
						pollEnd = now.Add(n.progBudget)
					} else if now.After(pollEnd) {
						polling = false // spent: park
					}
				}
				if polling {
					n.pollMu.Unlock()
					n.progress()
					runtime.Gosched()
					continue
				}
				if spins < 64 && n.progress == nil {
					n.pollMu.Unlock()
					runtime.Gosched()
					continue
				}
				err := n.ep.Wait(ctx)
				if err != nil {
					n.pollMu.Unlock()
					n.waiters.Add(1) // make sure someone else takes over polling
					n.broadcast()
					n.waiters.Add(-1)
					return fmt.Errorf("multirail: wait: %w", err)
				}
			}
			n.pollMu.Unlock()
			if n.waiters.Load() > 0 {
				n.broadcast() // hand the poller role over
			}
			continue
		}
		n.waiters.Add(1)
		ch := n.generation()
		if r.Done() {
			n.waiters.Add(-1)
			break
		}
		if n.pollMu.TryLock() { // the poller left: take its role over
			n.pollMu.Unlock()
			n.waiters.Add(-1)
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			n.waiters.Add(-1)
			return fmt.Errorf("multirail: wait: %w", ctx.Err())
		}
		n.waiters.Add(-1)
	}
	if s := r.Status(); s != ibv.WCSuccess {
		if r.partitioned.Load() {
			return fmt.Errorf("%w: %w: %w", ErrFailed, &ibv.WCError{Status: s}, hybridft.ErrPartition)
		}
		return fmt.Errorf("%w: %w", ErrFailed, &ibv.WCError{Status: s})
	}
	return nil
}

// InFlight is the number of requests not yet complete.
func (n *Network) InFlight() int { return int(n.live.Load()) }
