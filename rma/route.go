package rma

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/multirail"
)

// routeKind is how this rank reaches one peer, chosen once when the peer is connected (UCX's
// rule: decide at setup, not in the hot path).
type routeKind uint8

const (
	routeSelf routeKind = iota // this rank: in place (selfRoute)
	routeNode                  // a peer of this node over shared memory (nodeRoute)
	routeNet                   // a network peer's multirail channel (netRoute)
	routeDial                  // a network peer connected on demand: dialed first, then as routeNet
)

// route is one peer's route: a kind and the peer. Its methods get transfers and atomics that
// are fully validated (shape checks, and bounds against the target's part), so a route moves
// bytes and reports transport errors only. It is a small tagged value rather than an interface
// so that the compiler sees through the call: a shape's descriptor slices (often on the caller's
// stack) then do not escape to the heap.
type route struct {
	kind routeKind
	pe   *peer
	r    *Runtime
}

// xfer runs the transfer x of shape sh into or out of seg's part of the peer. A blocking one
// returns when its buffers may be reused; a non-blocking one returns a handle, or nil when it
// completed at issue.
func (rt route) xfer(ctx context.Context, x xfer, sh *shape, seg *Segment, block bool) (*Handle, error) {
	switch rt.kind {
	case routeSelf:
		return selfRoute{}.xfer(ctx, x, sh, seg, block)
	case routeNode:
		return nodeRoute{rt.pe}.xfer(ctx, x, sh, seg, block)
	case routeDial:
		if err := rt.r.dial(ctx, rt.pe); err != nil {
			return nil, err
		}
	}
	return netRoute{rt.r, rt.pe}.xfer(ctx, x, sh, seg, block)
}

// contig runs the contiguous transfer x of local at byte offset off of seg's part of the peer:
// xfer's contract, for the hot path, with no shape to build.
func (rt route) contig(ctx context.Context, x xfer, local []byte, seg *Segment, off int, block bool) (*Handle, error) {
	switch rt.kind {
	case routeSelf:
		return nil, x.self(seg.local[off:off+len(local)], local)
	case routeNode:
		return nodeRoute{rt.pe}.contig(x, local, seg, off)
	case routeDial:
		if err := rt.r.dial(ctx, rt.pe); err != nil {
			return nil, err
		}
	}
	return netRoute{rt.r, rt.pe}.contig(ctx, x, local, seg, off, block)
}

// atomic applies the word atomic op (ibv.ApplyAtomic's operands) to the word at byte offset off
// of seg's part of the peer and returns the word's previous value.
func (rt route) atomic(ctx context.Context, op ibv.Opcode, seg *Segment, off int, compareAdd, swap uint64) (uint64, error) {
	switch rt.kind {
	case routeSelf:
		return selfRoute{}.atomic(op, seg, off, compareAdd, swap)
	case routeNode:
		return nodeRoute{rt.pe}.atomic(op, seg, off, compareAdd, swap)
	case routeDial:
		if err := rt.r.dial(ctx, rt.pe); err != nil {
			return 0, err
		}
	}
	return netRoute{rt.r, rt.pe}.atomic(ctx, op, seg, off, compareAdd, swap)
}

// selfRoute reaches this rank's own memory: every operation is done in place at issue.
type selfRoute struct{}

func (selfRoute) xfer(_ context.Context, x xfer, sh *shape, seg *Segment, _ bool) (*Handle, error) {
	mem := seg.local[sh.off : sh.off+sh.extent]
	return nil, sh.each(func(local []byte, roff int) error {
		return x.self(mem[roff:roff+len(local)], local)
	})
}

func (selfRoute) atomic(op ibv.Opcode, seg *Segment, off int, compareAdd, swap uint64) (uint64, error) {
	return ibv.ApplyAtomic(op, seg.local[off:off+op.AtomicSize()], compareAdd, swap)
}

// nodeRoute reaches a peer of this node over shared memory (ARMCI's SMP path). Puts, gets and
// atomics are loads, stores and the CPU's atomic instructions on a view of the peer's part
// (direct.go); accumulates add through the view under the region's accumulate lock. Where no
// view can be had (memory outside a shared buffer, a queue pair out of RTS) each piece is a work
// request the shm provider executes inside the post. Either way an operation completes at issue:
// nothing is ever outstanding to a node peer, and a non-blocking one returns no handle.
type nodeRoute struct{ pe *peer }

func (n nodeRoute) contig(x xfer, local []byte, seg *Segment, off int) (*Handle, error) {
	if v := seg.view(n.pe); v != nil && (x.kind != kAcc || v.Acc != nil) {
		return nil, x.direct(v, v.Mem[off:off+len(local)], local)
	}
	raddr, rkey := seg.remoteAddr(n.pe, off)
	return nil, x.do(n.pe.qp, local, raddr, rkey)
}

func (n nodeRoute) xfer(_ context.Context, x xfer, sh *shape, seg *Segment, _ bool) (*Handle, error) {
	if v := seg.view(n.pe); v != nil && (x.kind != kAcc || v.Acc != nil) {
		mem := v.Mem[sh.off : sh.off+sh.extent]
		return nil, sh.each(func(local []byte, roff int) error {
			return x.direct(v, mem[roff:roff+len(local)], local)
		})
	}
	raddr, rkey := seg.remoteAddr(n.pe, sh.off)
	return nil, sh.each(func(local []byte, roff int) error {
		return x.do(n.pe.qp, local, raddr+uint64(roff), rkey)
	})
}

func (n nodeRoute) atomic(op ibv.Opcode, seg *Segment, off int, compareAdd, swap uint64) (uint64, error) {
	if v := seg.view(n.pe); v != nil {
		return v.Atomic(op, off, compareAdd, swap)
	}
	res := rmwResults.Get().(*[8]byte)
	defer rmwResults.Put(res)
	raddr, rkey := seg.remoteAddr(n.pe, off)
	wr := ibv.SendWR{Opcode: op, LocalBuf: res[:op.AtomicSize()], RemoteAddr: raddr, RKey: rkey, CompareAdd: compareAdd, Swap: swap}
	if err := postSync(n.pe.qp, wr); err != nil {
		return 0, err
	}
	return fetched(op, res), nil
}

// wrPool holds the work requests of postSync: a pointer handed to the provider's interface
// escapes, so a stack SendWR would cost an allocation per call.
var wrPool = sync.Pool{New: func() any { return new(ibv.SendWR) }}

// postSync executes wr on a node peer's queue pair inside the post (ibv.QP.PostSendSync) and
// returns when it is complete at the target. Errors wrap ErrTransport with the post's error or
// the completion status.
func postSync(qp *ibv.QP, wr ibv.SendWR) error {
	w := wrPool.Get().(*ibv.SendWR)
	*w = wr
	st, err := qp.PostSendSync(w)
	*w = ibv.SendWR{}
	wrPool.Put(w)
	if err != nil {
		return fmt.Errorf("%w: %v: %w", ErrTransport, wr.Opcode, err)
	}
	if st != ibv.WCSuccess {
		return fmt.Errorf("%w: %v completed with %v", ErrTransport, wr.Opcode, st)
	}
	return nil
}

// netRoute reaches a network peer through its multirail channel: each transfer is one multirail
// request of one work request per piece (striped over the rails by the channel's policy).
type netRoute struct {
	r  *Runtime
	pe *peer
}

// begin starts an operation of bytes to the peer (Runtime.begin), counted for the adaptive
// transport's evaluation when it runs.
func (n netRoute) begin(block bool, bytes int) (*multirail.Network, *multirail.Request) {
	nw, req := n.r.begin(n.pe, block)
	if n.r.ad != nil {
		n.pe.countNet(int64(bytes))
	}
	return nw, req
}

func (n netRoute) contig(ctx context.Context, x xfer, local []byte, seg *Segment, off int, block bool) (*Handle, error) {
	raddr, rkey := seg.remoteAddr(n.pe, off)
	nw, req := n.begin(block, len(local))
	ierr := x.post(ctx, n.pe.ch.Load(), req, local, raddr, rkey)
	return n.r.finish(ctx, nw, req, ierr, block)
}

// putNotify is Runtime.putNotify's network part: the put of msg at off and the accumulate of
// note (int64s) at noff as one request on the peer's channel (multirail.Channel.WriteNotify),
// never blocking. The channel is loaded after begin, which waits out a switch of the peer's
// channel (the adaptive transport's gate); one of several subchannels refuses with
// ibv.ErrUnsupported, posting nothing.
func (n netRoute) putNotify(ctx context.Context, msg []byte, seg *Segment, off int, note []byte, noff int) (*Handle, error) {
	raddr, rkey := seg.remoteAddr(n.pe, off)
	naddr, nkey := seg.remoteAddr(n.pe, noff)
	nw, req := n.begin(false, len(msg)+len(note))
	ierr := n.pe.ch.Load().WriteNotify(ctx, req, msg, raddr, rkey, AccInt64, note, naddr, nkey)
	if ierr != nil {
		ierr = fmt.Errorf("%w: %w", ErrTransport, ierr)
	}
	return n.r.finish(ctx, nw, req, ierr, false)
}

func (n netRoute) xfer(ctx context.Context, x xfer, sh *shape, seg *Segment, block bool) (*Handle, error) {
	if sh.empty() {
		return nil, nil
	}
	raddr, rkey := seg.remoteAddr(n.pe, sh.off)
	nw, req := n.begin(block, sh.bytes())
	ch := n.pe.ch.Load()
	ierr := sh.each(func(local []byte, roff int) error {
		return x.post(ctx, ch, req, local, raddr+uint64(roff), rkey)
	})
	return n.r.finish(ctx, nw, req, ierr, block)
}

func (n netRoute) atomic(ctx context.Context, op ibv.Opcode, seg *Segment, off int, compareAdd, swap uint64) (uint64, error) {
	res := rmwResults.Get().(*[8]byte)
	defer rmwResults.Put(res)
	raddr, rkey := seg.remoteAddr(n.pe, off)
	nw, req := n.begin(true, op.AtomicSize())
	err := n.pe.ch.Load().Atomic(ctx, req, op, res[:op.AtomicSize()], raddr, rkey, compareAdd, swap)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrTransport, err)
	}
	if _, err = n.r.finish(ctx, nw, req, err, true); err != nil {
		return 0, err
	}
	return fetched(op, res), nil
}

// routeFor chooses the route of peer pe once its channel (or, on demand, its dial address) is
// known. A peer connected on demand (routeDial) is dialed through the UD connection manager by
// its first operation (ondemand.go), then every operation runs as on a netRoute.
func (r *Runtime) routeFor(pe *peer) route {
	rt := route{kind: routeNet, pe: pe, r: r}
	switch {
	case pe.rank == r.rank:
		rt.kind = routeSelf
	case pe.lazy:
		rt.kind = routeDial
	case pe.qp != nil:
		rt.kind = routeNode
	}
	return rt
}

// rmwResults holds the fetched words of atomic work requests: the buffer goes into a work
// request (an implicit-ODP local buffer), so a stack array would escape and cost a heap
// allocation per call.
var rmwResults = sync.Pool{New: func() any { return new([8]byte) }}

// fetched is the previous value an atomic work request of op wrote into res (zero-extended).
func fetched(op ibv.Opcode, res *[8]byte) uint64 {
	if op.AtomicSize() == 4 {
		return uint64(binary.LittleEndian.Uint32(res[:]))
	}
	return binary.LittleEndian.Uint64(res[:])
}
