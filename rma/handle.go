package rma

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/multirail"
)

// Handle is a non-blocking operation in flight (armci_hdl_t).
type Handle struct {
	net *multirail.Network
	req *multirail.Request
	err error // an error found at issue time, or nil; a self operation completes at issue
}

// Wait blocks until the operation completes (ARMCI_Wait): for a Put or Acc the source buffer may
// then be reused and the data is at the target; for a Get the destination holds the data.
func (h *Handle) Wait(ctx context.Context) error {
	if h == nil || h.req == nil {
		if h == nil {
			return nil
		}
		return h.err
	}
	if err := h.net.Wait(ctx, h.req); err != nil {
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

// op starts a request towards peer pe on its network; done() is counted in the peer's
// outstanding operations until it completes.
func (r *Runtime) begin(pe *peer) (*multirail.Network, *multirail.Request) {
	n := r.nets[pe.net].net
	pe.outstanding.Add(1)
	req := n.NewRequest(func(*multirail.Request) { pe.outstanding.Add(-1) })
	return n, req
}

// finish releases the issuer's hold and either waits (blocking) or returns a handle.
func (r *Runtime) finish(ctx context.Context, n *multirail.Network, req *multirail.Request, issueErr error, block bool) (*Handle, error) {
	n.Issued(req)
	if issueErr != nil {
		// Work requests already posted still complete; wait for them so no buffer stays in use.
		_ = n.Wait(context.WithoutCancel(ctx), req)
		return nil, issueErr
	}
	h := &Handle{net: n, req: req}
	if block {
		return nil, h.Wait(ctx)
	}
	return h, nil
}
