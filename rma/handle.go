package rma

import (
	"context"
	"fmt"
	"time"

	"github.com/goarmci/goarmci/multirail"
)

// Handle is a non-blocking operation in flight (armci_hdl_t).
type Handle struct {
	net *multirail.Network
	req *multirail.Request
	err error    // an error found at issue time, or nil; a self operation completes at issue
	r   *Runtime // for the target's failure (req.Tag is the target rank)
}

// Wait blocks until the operation completes (ARMCI_Wait): for a Put or Acc the source buffer may
// then be reused and the data is at the target; for a Get the destination holds the data. When
// ctx ends first it returns ctx's error (errors.Is(err, context.Canceled)) with the operation
// still in flight: its buffer is in use until a later Wait returns.
func (h *Handle) Wait(ctx context.Context) error {
	if h == nil || h.req == nil {
		if h == nil {
			return nil
		}
		return h.err
	}
	var t0 time.Time
	if h.r != nil && h.r.stats {
		t0 = time.Now()
	}
	err := h.net.Wait(ctx, h.req)
	if h.r != nil && h.r.stats {
		h.r.peers[h.req.Tag].ctr.waitNS.Add(int64(time.Since(t0)))
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !h.req.Done() {
			return fmt.Errorf("rma: wait: %w", cerr) // still in flight: Wait again before reusing its buffer
		}
		if h.r != nil {
			if ferr := h.r.opFailedErr(h.req.Tag); ferr != nil {
				return ferr // the target failed: its requests were flushed (abortPeer)
			}
		}
		return fmt.Errorf("%w: %w", ErrTransport, err)
	}
	return nil
}

// Test reports whether the operation has completed (ARMCI_Test), making progress once.
func (h *Handle) Test() bool {
	if h == nil || h.req == nil {
		return true
	}
	if !h.req.Done() {
		h.net.Progress()
	}
	return h.req.Done()
}

// begin starts a request towards peer pe on its network; it is counted in the peer's
// outstanding operations until it completes (pe.done, built once per peer). block marks it for
// the scheduler (EPC's communication marker, [Vishnu07 §6.2.3]).
func (r *Runtime) begin(pe *peer, block bool) (*multirail.Network, *multirail.Request) {
	n := r.nets[pe.net].net
	pe.outstanding.Add(1)
	if pe.gate.Load() {
		r.waitGate(pe)
	}
	req := n.NewRequest(pe.done)
	req.Blocking = block
	req.Tag = pe.rank
	return n, req
}

// finish releases the issuer's hold and either waits (blocking; the request is then recycled)
// or returns a handle.
func (r *Runtime) finish(ctx context.Context, n *multirail.Network, req *multirail.Request, issueErr error, block bool) (*Handle, error) {
	n.Issued(req)
	if issueErr != nil {
		// Work requests already posted still complete; wait for them so no buffer stays in use.
		_ = n.Wait(context.WithoutCancel(ctx), req)
		if ferr := r.opFailedErr(req.Tag); ferr != nil {
			return nil, ferr
		}
		return nil, issueErr
	}
	if block {
		var t0 time.Time
		if r.stats {
			t0 = time.Now()
		}
		err := n.Wait(ctx, req)
		if r.stats {
			r.peers[req.Tag].ctr.waitNS.Add(int64(time.Since(t0)))
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil && !req.Done() {
				// Cancelled mid-flight: the caller's buffer may be reused once the call returns,
				// so wait for the work requests to finish with it (they complete or fail: a dead
				// target's are flushed, a partition ends them at GOARMCI_PARTITION_TIMEOUT), then
				// report the context's error.
				_ = n.Wait(context.WithoutCancel(ctx), req)
				n.Release(req)
				return nil, fmt.Errorf("rma: operation to rank %d: %w", req.Tag, cerr)
			}
			if ferr := r.opFailedErr(req.Tag); ferr != nil {
				return nil, ferr // the target failed: its requests were flushed (abortPeer)
			}
			return nil, fmt.Errorf("%w: %w", ErrTransport, err)
		}
		n.Release(req)
		return nil, nil
	}
	return &Handle{net: n, req: req, r: r}, nil
}
