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
	"github.com/goarmci/goarmci/multirail/sched"
)

// ErrPolicy wraps a bad scheduling policy configuration.
var ErrPolicy = errors.New("multirail: bad scheduling policy")

// ChannelConfig configures a channel's communication scheduler [Vishnu07 §4.1].
type ChannelConfig struct {
	// Policy is a policy spec as sched.Parse accepts it ("auto", "bss:2", ...; GOARMCI_STRIPE_POLICY);
	// "" means "auto", adaptive striping over every subchannel (sched.New).
	Policy string
	// Threshold is the switchover threshold in bytes (0: sched.DefaultThreshold;
	// GOARMCI_STRIPE_THRESHOLD): smaller operations are not striped [Vishnu07 §5.2.3].
	Threshold int
	// Sched holds the policies' other parameters (α, n_batch, W, weights); its Subchannels and
	// Threshold are set from the channel.
	Sched sched.Config
}

// Channel is the virtual channel to one peer [Vishnu07 §4.1.1]: its subchannels, one RC
// connection (queue pair) each, one per rail or per (rail, path bits) [Vishnu07 ch. 7], and the
// communication scheduler that maps
// operations onto them.
//
// Each operation (Write, Read, Accumulate, Atomic) is handed to the channel's scheduling policy
// (package sched), which returns its stripes; every stripe becomes one work request on its
// subchannel's queue pair, all counted in the caller's Request, so the completion filter reports
// one completion per operation [Vishnu07 §4.2.3]. The delivery time of each stripe — from the
// operation's hand-over to the discovery of the stripe's completion — is fed back to the policy
// when the operation's last stripe completes (§7.1.2).
//
// Ordering. ARMCI applies overlapping operations from one origin to one target in program order
// ([ARMCI]), and an RC queue pair delivers in order — but stripes on different subchannels
// do not. The channel therefore tracks, per request in flight, the remote byte range it touches,
// whether it writes (put, accumulate, atomic) or reads (get, atomic) there, and the subchannels
// it uses. Before an operation is scheduled, the requests in flight that conflict with it
// (overlapping range, at least one of the two writes) are found: if all of them use one and the
// same single subchannel, the operation is pinned whole to that subchannel, behind them in the
// queue pair's order; otherwise the issuer drives progress until they have completed (a write's
// completion means its data is placed at the target). Non-overlapping operations, and reads
// after reads, are never held back. Accumulates are striped on element boundaries, so each
// element is updated by one work request and stays atomic; atomics are never striped. A channel
// of one subchannel needs none of this: its queue pair orders everything.
type Channel struct {
	net         *Network
	subs        []*hybridft.Conn
	outstanding []atomic.Int64 // stripes posted and not completed, per subchannel
	posted      []atomic.Int64 // stripes posted, per subchannel (statistics)

	mu       sync.Mutex
	pol      sched.Policy // nil for a single subchannel
	feedback bool
	tracked  []*Request // requests in flight with their ranges (ordering)
	free     []*piece
}

// piece is one operation on a multi-subchannel channel: its stripes and their completions.
type piece struct {
	op      sched.Op
	stripes []sched.Stripe
	done    []sched.Done
	start   time.Time
	left    int
}

// NewChannel builds a channel of the given subchannels (at least one) with the default policy
// ("auto", the switchover threshold sched.DefaultThreshold).
func (n *Network) NewChannel(subs ...*hybridft.Conn) (*Channel, error) {
	return n.NewChannelConfig(ChannelConfig{}, subs...)
}

// NewChannelConfig builds a channel of the given subchannels (1..sched.MaxSubchannels) with the
// scheduling policy of cfg. Errors wrap ibv.ErrInvalidArgument (no subchannels) or ErrPolicy.
func (n *Network) NewChannelConfig(cfg ChannelConfig, subs ...*hybridft.Conn) (*Channel, error) {
	if len(subs) == 0 || len(subs) > sched.MaxSubchannels {
		return nil, fmt.Errorf("multirail: channel of %d subchannels: %w", len(subs), ibv.ErrInvalidArgument)
	}
	c := &Channel{net: n, subs: subs, outstanding: make([]atomic.Int64, len(subs)), posted: make([]atomic.Int64, len(subs))}
	spec := cfg.Policy
	if spec == "" {
		spec = "auto"
	}
	sc := cfg.Sched
	sc.Subchannels, sc.Threshold = len(subs), cfg.Threshold
	pol, err := sched.New(spec, sc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	if len(subs) > 1 {
		c.pol, c.feedback = pol, pol.Feedback()
	}
	return c, nil
}

// Network is the channel's network.
func (c *Channel) Network() *Network { return c.net }

// Subchannels returns the channel's connections.
func (c *Channel) Subchannels() []*hybridft.Conn { return c.subs }

// Policy names the channel's scheduling policy ("" for a single subchannel, which needs none).
func (c *Channel) Policy() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pol == nil {
		return ""
	}
	return c.pol.Name()
}

// Outstanding is the number of work requests posted on subchannel sub and not yet completed.
func (c *Channel) Outstanding(sub int) int64 {
	if sub < 0 || sub >= len(c.outstanding) {
		return 0
	}
	return c.outstanding[sub].Load()
}

// Posted is the number of work requests (stripes) ever posted on subchannel sub.
func (c *Channel) Posted(sub int) int64 {
	if sub < 0 || sub >= len(c.posted) {
		return 0
	}
	return c.posted[sub].Load()
}

// Flush drives progress until every work request posted on every subchannel of the channel has
// completed (the multi-rail flush of [Vishnu07 §5.2.1]: completion on each subchannel used), or
// ctx ends.
func (c *Channel) Flush(ctx context.Context) error {
	for i := range c.outstanding {
		for spins := 0; c.outstanding[i].Load() > 0; spins++ {
			if c.net.Progress() == 0 {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("multirail: flush: %w", err)
				}
				if spins > 64 {
					time.Sleep(time.Microsecond)
				} else {
					runtime.Gosched()
				}
			}
		}
	}
	return nil
}

// Write adds an RDMA write of local to (raddr, rkey) to r (a put).
func (c *Channel) Write(ctx context.Context, r *Request, local []byte, raddr uint64, rkey uint32) error {
	if len(local) == 0 {
		return nil
	}
	return c.issue(ctx, r, sched.Put, 1, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: local, RemoteAddr: raddr, RKey: rkey})
}

// Read adds an RDMA read of len(local) bytes at (raddr, rkey) into local to r (a get).
func (c *Channel) Read(ctx context.Context, r *Request, local []byte, raddr uint64, rkey uint32) error {
	if len(local) == 0 {
		return nil
	}
	return c.issue(ctx, r, sched.Get, 1, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: local, RemoteAddr: raddr, RKey: rkey})
}

// Accumulate adds remote[i] += scale·local[i] (typ elements, atomic per element) to r. Stripes
// split only between elements.
func (c *Channel) Accumulate(ctx context.Context, r *Request, typ ibv.AccType, scale complex128, local []byte, raddr uint64, rkey uint32) error {
	if len(local) == 0 {
		return nil
	}
	return c.issue(ctx, r, sched.Acc, max(typ.Size(), 1), ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: typ, Scale: scale, LocalBuf: local, RemoteAddr: raddr, RKey: rkey})
}

// WriteNotify adds to r an RDMA write of local to (raddr, rkey) followed by the accumulate of
// note (typ elements, scale 1) to (naddr, nkey): a put with its notification, as GASPI's
// gaspi_write_notify, or a put followed by a flag update in ARMCI's collectives. Both go as one
// list of work requests on the channel's queue pair (ibv.SendMore on the write): the provider
// sends them in one burst, the target acknowledges them together, and the queue pair's order
// applies the notification after the data. Only a channel of one subchannel has one queue
// pair for both; on others it returns ibv.ErrUnsupported and posts nothing (issue the two as
// separate requests there: the channel orders overlapping requests, not the parts of one).
func (c *Channel) WriteNotify(ctx context.Context, r *Request, local []byte, raddr uint64, rkey uint32, typ ibv.AccType, note []byte, naddr uint64, nkey uint32) error {
	if c.pol != nil {
		return fmt.Errorf("multirail: write with notification on %d subchannels: %w", len(c.subs), ibv.ErrUnsupported)
	}
	if len(local) == 0 || len(note) == 0 {
		if err := c.Write(ctx, r, local, raddr, rkey); err != nil {
			return err
		}
		return c.Accumulate(ctx, r, typ, 1, note, naddr, nkey)
	}
	w := wrPool.Get().(*ibv.SendWR)
	*w = ibv.SendWR{Opcode: ibv.OpRDMAWrite, Flags: ibv.SendMore, LocalBuf: local, RemoteAddr: raddr, RKey: rkey}
	err := c.post(ctx, r, nil, 0, w)
	if err == nil { // a refused write held nothing
		*w = ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: typ, Scale: 1, LocalBuf: note, RemoteAddr: naddr, RKey: nkey}
		err = c.post(ctx, r, nil, 0, w)
	}
	*w = ibv.SendWR{}
	wrPool.Put(w)
	return err
}

// Atomic adds an atomic operation to r; result (4 or 8 bytes) receives the old value. Atomics
// are never striped.
func (c *Channel) Atomic(ctx context.Context, r *Request, op ibv.Opcode, result []byte, raddr uint64, rkey uint32, compareAdd, swap uint64) error {
	return c.issue(ctx, r, sched.Atomic, 1, ibv.SendWR{Opcode: op, LocalBuf: result, RemoteAddr: raddr, RKey: rkey, CompareAdd: compareAdd, Swap: swap})
}

// wrPool recycles work requests: a provider copies what it needs at post time (ibv_post_send
// semantics), so the struct is free again when Post returns.
var wrPool = sync.Pool{New: func() any { return new(ibv.SendWR) }}

// issue schedules one operation and posts its stripes.
func (c *Channel) issue(ctx context.Context, r *Request, kind sched.Kind, align int, wr ibv.SendWR) error {
	if c.pol == nil {
		w := wrPool.Get().(*ibv.SendWR)
		*w = wr
		err := c.post(ctx, r, nil, 0, w)
		*w = ibv.SendWR{} // drop the buffer references before pooling
		wrPool.Put(w)
		return err
	}
	size := len(wr.LocalBuf)
	op := sched.Op{Kind: kind, Size: max(size, 1), Align: align, Blocking: r.Blocking, Collective: r.Collective}
	lo, hi := wr.RemoteAddr, wr.RemoteAddr+uint64(max(size, 1))
	write, read := kind != sched.Get, kind == sched.Get || kind == sched.Atomic
	pc, err := c.schedule(ctx, r, op, lo, hi, write, read)
	if err != nil {
		return err
	}
	for k, s := range pc.stripes {
		sw := wr
		if kind != sched.Atomic {
			sw.LocalBuf = wr.LocalBuf[s.Off : s.Off+s.Len]
			sw.RemoteAddr = wr.RemoteAddr + uint64(s.Off)
		}
		if err := c.post(ctx, r, pc, s.Sub, &sw); err != nil {
			// The stripes not posted complete here, failed, so the piece still finishes.
			for _, rest := range pc.stripes[k:] {
				c.stripeDone(pc, rest.Sub, ibv.WCGeneralErr, time.Time{})
			}
			return err
		}
	}
	return nil
}

// schedule waits until op may be issued under the ordering rule, then asks the policy for its
// stripes and records r's range.
func (c *Channel) schedule(ctx context.Context, r *Request, op sched.Op, lo, hi uint64, write, read bool) (*piece, error) {
	for spins := 0; ; spins++ {
		c.mu.Lock()
		if r.ch != nil && r.ch != c {
			c.mu.Unlock()
			return nil, fmt.Errorf("multirail: request of another channel: %w", ibv.ErrInvalidArgument)
		}
		var mask uint64
		conflict, single := false, true
		for _, q := range c.tracked {
			if q == r || q.hi <= lo || hi <= q.lo || !(write || q.write) {
				continue
			}
			conflict = true
			mask |= q.subs
			if q.subs&(q.subs-1) != 0 {
				single = false
			}
		}
		if conflict && single && mask&(mask-1) == 0 && mask != 0 {
			op.Pinned, op.Sub = true, trailingZeros(mask)
			conflict = false
		}
		if !conflict {
			pc := c.newPiece()
			pc.op = op
			pc.stripes = c.pol.Schedule(op, pc.stripes[:0])
			pc.left = len(pc.stripes)
			if c.feedback {
				pc.start = time.Now()
			}
			c.track(r, lo, hi, write, read, pc.stripes)
			c.mu.Unlock()
			return pc, nil
		}
		c.mu.Unlock()
		// A conflicting operation is in flight on other subchannels: let it complete first.
		if c.net.Progress() == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("multirail: waiting for an overlapping operation: %w", err)
			}
			if spins > 64 {
				time.Sleep(time.Microsecond)
			} else {
				runtime.Gosched()
			}
		}
	}
}

func trailingZeros(m uint64) int {
	n := 0
	for m&1 == 0 {
		m >>= 1
		n++
	}
	return n
}

// track records (under c.mu) that r touches [lo, hi) on the stripes' subchannels.
func (c *Channel) track(r *Request, lo, hi uint64, write, read bool, st []sched.Stripe) {
	if r.ch == nil {
		r.ch, r.lo, r.hi, r.write, r.read, r.subs = c, lo, hi, write, read, 0
		r.trackedIndex = len(c.tracked)
		c.tracked = append(c.tracked, r)
	} else {
		r.lo, r.hi = min(r.lo, lo), max(r.hi, hi)
		r.write, r.read = r.write || write, r.read || read
	}
	for _, s := range st {
		r.subs |= 1 << uint(s.Sub)
	}
}

// untrack forgets a completed request.
func (c *Channel) untrack(r *Request) {
	c.mu.Lock()
	i := r.trackedIndex
	if i < len(c.tracked) && c.tracked[i] == r {
		last := len(c.tracked) - 1
		c.tracked[i] = c.tracked[last]
		c.tracked[i].trackedIndex = i
		c.tracked[last] = nil
		c.tracked = c.tracked[:last]
	}
	r.ch = nil
	c.mu.Unlock()
}

func (c *Channel) newPiece() *piece {
	if n := len(c.free); n > 0 {
		pc := c.free[n-1]
		c.free = c.free[:n-1]
		return pc
	}
	return &piece{}
}

// stripeDone records the completion of one stripe of pc on subchannel sub at time now; the last
// one feeds the piece back to the policy (the completion filter's time stamps, §7.1.2).
func (c *Channel) stripeDone(pc *piece, sub int, status ibv.WCStatus, now time.Time) {
	c.mu.Lock()
	var bytes int
	for _, s := range pc.stripes {
		if s.Sub == sub {
			bytes = s.Len
			break
		}
	}
	d := sched.Done{Sub: sub, Bytes: bytes}
	if c.feedback && status == ibv.WCSuccess && !now.IsZero() {
		d.Delivery = max(now.Sub(pc.start), time.Nanosecond)
	}
	pc.done = append(pc.done, d)
	pc.left--
	if pc.left == 0 {
		c.pol.Complete(pc.op, pc.done)
		pc.done, pc.stripes = pc.done[:0], pc.stripes[:0]
		c.free = append(c.free, pc)
	}
	c.mu.Unlock()
}

// post adds one work request to r on subchannel sub (of piece pc, or nil). A full send queue is
// a transient condition: progress is made and the post retried.
func (c *Channel) post(ctx context.Context, r *Request, pc *piece, sub int, wr *ibv.SendWR) error {
	wr.Flags |= ibv.SendSignaled
	conn := c.subs[sub]
	id := c.net.stripes.add(stripeRec{req: r, ch: c, pc: pc, sub: sub})
	wr.ID = id
	r.pending.Add(1)
	c.outstanding[sub].Add(1)
	for {
		err := conn.Post(wr)
		if err == nil {
			c.posted[sub].Add(1)
			return nil
		}
		if !errors.Is(err, ibv.ErrQueueFull) {
			err = fmt.Errorf("multirail: post %v on subchannel %d: %w", wr.Opcode, sub, err)
		} else if c.net.Progress() == 0 && ctx.Err() != nil {
			err = fmt.Errorf("multirail: post %v: %w", wr.Opcode, ctx.Err())
		} else {
			runtime.Gosched()
			continue
		}
		c.net.stripes.take(id)
		c.outstanding[sub].Add(-1)
		r.pending.Add(-1)
		return err
	}
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
