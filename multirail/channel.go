package multirail

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/ibv"
)

// Channel is the virtual channel to one peer: its subchannels, one RC connection each.
type Channel struct {
	net  *Network
	subs []*hybridft.Conn
	next int
}

// NewChannel builds a channel of the given subchannels (at least one).
func (n *Network) NewChannel(subs ...*hybridft.Conn) (*Channel, error) {
	if len(subs) == 0 {
		return nil, fmt.Errorf("multirail: channel without subchannels: %w", ibv.ErrInvalidArgument)
	}
	return &Channel{net: n, subs: subs}, nil
}

// Network is the channel's network.
func (c *Channel) Network() *Network { return c.net }

// Subchannels returns the channel's connections.
func (c *Channel) Subchannels() []*hybridft.Conn { return c.subs }

// post adds one work request to r on a subchannel. A full send queue is a transient condition:
// progress is made and the post retried.
func (c *Channel) post(ctx context.Context, r *Request, wr *ibv.SendWR) error {
	wr.ID = r.slot
	wr.Flags |= ibv.SendSignaled
	sub := c.subs[0]
	r.pending.Add(1)
	for {
		err := sub.Post(wr)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ibv.ErrQueueFull) {
			r.pending.Add(-1)
			return fmt.Errorf("multirail: post %v: %w", wr.Opcode, err)
		}
		if c.net.Progress() == 0 {
			if ctx.Err() != nil {
				r.pending.Add(-1)
				return fmt.Errorf("multirail: post %v: %w", wr.Opcode, ctx.Err())
			}
			runtime.Gosched()
		}
	}
}

// Write adds an RDMA write of local to (raddr, rkey) to r.
func (c *Channel) Write(ctx context.Context, r *Request, local []byte, raddr uint64, rkey uint32) error {
	if len(local) == 0 {
		return nil
	}
	return c.post(ctx, r, &ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: local, RemoteAddr: raddr, RKey: rkey})
}

// Read adds an RDMA read of len(local) bytes at (raddr, rkey) into local to r.
func (c *Channel) Read(ctx context.Context, r *Request, local []byte, raddr uint64, rkey uint32) error {
	if len(local) == 0 {
		return nil
	}
	return c.post(ctx, r, &ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: local, RemoteAddr: raddr, RKey: rkey})
}

// Accumulate adds remote[i] += scale·local[i] (typ elements, atomic per element) to r.
func (c *Channel) Accumulate(ctx context.Context, r *Request, typ ibv.AccType, scale complex128, local []byte, raddr uint64, rkey uint32) error {
	if len(local) == 0 {
		return nil
	}
	return c.post(ctx, r, &ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: typ, Scale: scale, LocalBuf: local, RemoteAddr: raddr, RKey: rkey})
}

// Atomic adds an atomic operation to r; result (4 or 8 bytes) receives the old value.
func (c *Channel) Atomic(ctx context.Context, r *Request, op ibv.Opcode, result []byte, raddr uint64, rkey uint32, compareAdd, swap uint64) error {
	return c.post(ctx, r, &ibv.SendWR{Opcode: op, LocalBuf: result, RemoteAddr: raddr, RKey: rkey, CompareAdd: compareAdd, Swap: swap})
}

// Close destroys the channel's connections.
func (c *Channel) Close() error {
	var first error
	for _, s := range c.subs {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
