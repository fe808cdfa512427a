package ibv

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Context is an opened device (struct ibv_context). A provider's Open creates it from its Driver
// (ibv/provider.NewContext).
type Context struct {
	drv      Driver
	mu       sync.Mutex
	keyIndex uint32
	nextQPN  uint32
	mrs      mrTable
	qps      sync.Map // uint32 → *QP
	closed   atomic.Bool

	evMu     sync.Mutex
	events   []AsyncEvent
	evSignal chan struct{}
	done     chan struct{}
}

// newContext wraps a provider's driver into a device context (ibv/provider.NewContext).
func newContext(drv Driver) *Context {
	return &Context{drv: drv, nextQPN: 1, evSignal: make(chan struct{}, 1), done: make(chan struct{})}
}

// QueryDevice describes the device (ibv_query_device).
func (c *Context) QueryDevice() DeviceAttr { return c.drv.Attr() }

// QueryPort describes port num, 1-based (ibv_query_port).
func (c *Context) QueryPort(num uint8) (PortAttr, error) { return c.drv.Port(num) }

// Close closes the device (ibv_close_device): every QP is destroyed and the provider's goroutines
// stop. Blocked GetAsyncEvent and CQ.Wait calls return ErrClosed.
func (c *Context) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.qps.Range(func(_, v any) bool {
		_ = v.(*QP).Destroy()
		return true
	})
	close(c.done)
	return c.drv.Close()
}

// lookupLKey returns the MR with local key k, or nil.
func (c *Context) lookupLKey(k uint32) *MR { return lookup(c.mrs.lkeys.Load(), k) }

// lookupRKey returns the MR with remote key k, or nil.
func (c *Context) lookupRKey(k uint32) *MR { return lookup(c.mrs.rkeys.Load(), k) }

// lookupQP returns the QP with number qpn, or nil.
func (c *Context) lookupQP(qpn uint32) *QP {
	v, ok := c.qps.Load(qpn)
	if !ok {
		return nil
	}
	return v.(*QP)
}

// remoteSlice is the responder's check of an incoming RDMA/atomic request (IBA §9.7.4.1.5,
// "memory access validation"): the rkey must name a live MR of the QP's PD whose access flags
// include need, and [addr, addr+n) must lie inside it. On failure it returns WCRemAccessErr.
func (c *Context) remoteSlice(pd *PD, rkey uint32, addr, n uint64, need Access) ([]byte, WCStatus) {
	mr := c.lookupRKey(rkey)
	if mr == nil || mr.dead.Load() || (pd != nil && mr.pd != pd) || mr.Access&need != need {
		return nil, WCRemAccessErr
	}
	b, err := mr.Slice(addr, n)
	if err != nil {
		return nil, WCRemAccessErr
	}
	return b, WCSuccess
}

// localSlices resolves a scatter/gather list to memory: every SGE's lkey must name a live MR of
// pd (with AccessLocalWrite when write is set) and lie inside it; otherwise WCLocProtErr. The
// slices are appended to dst.
func (c *Context) localSlices(pd *PD, sgl []SGE, write bool, dst [][]byte) ([][]byte, WCStatus) {
	for _, s := range sgl {
		mr := c.lookupLKey(s.LKey)
		if mr == nil || mr.dead.Load() || (pd != nil && mr.pd != pd) || (write && mr.Access&AccessLocalWrite == 0) {
			return dst, WCLocProtErr
		}
		b, err := mr.Slice(s.Addr, uint64(s.Length))
		if err != nil {
			return dst, WCLocProtErr
		}
		dst = append(dst, b)
	}
	return dst, WCSuccess
}

// localBuffers resolves a work request's local buffer: LocalBuf as is, or its SGL through
// localSlices.
func (c *Context) localBuffers(pd *PD, wr *SendWR, write bool, dst [][]byte) ([][]byte, WCStatus) {
	if wr.LocalBuf != nil {
		return append(dst, wr.LocalBuf), WCSuccess
	}
	return c.localSlices(pd, wr.SGL, write, dst)
}

// AsyncEvent is an asynchronous event (struct ibv_async_event).
type AsyncEvent struct {
	Type  EventType
	QPNum uint32 // QP events
	Port  uint8  // port events
	CQ    *CQ    // CQ events
	SRQ   *SRQ   // SRQ events
	// Detail is a provider's explanation (e.g. which path failed).
	Detail string
}

func (e AsyncEvent) String() string {
	switch {
	case e.QPNum != 0:
		return fmt.Sprintf("%v qp=%d %s", e.Type, e.QPNum, e.Detail)
	case e.Port != 0:
		return fmt.Sprintf("%v port=%d %s", e.Type, e.Port, e.Detail)
	}
	return fmt.Sprintf("%v %s", e.Type, e.Detail)
}

// postEvent queues an asynchronous event (from providers and the generic layer).
func (c *Context) postEvent(ev AsyncEvent) {
	c.evMu.Lock()
	c.events = append(c.events, ev)
	c.evMu.Unlock()
	select {
	case c.evSignal <- struct{}{}:
	default:
	}
}

// GetAsyncEvent returns the next asynchronous event, blocking until one arrives, ctx ends or the
// device is closed (ibv_get_async_event; no ack is needed).
func (c *Context) GetAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	for {
		c.evMu.Lock()
		if len(c.events) > 0 {
			ev := c.events[0]
			c.events = c.events[1:]
			c.evMu.Unlock()
			return ev, nil
		}
		c.evMu.Unlock()
		select {
		case <-c.evSignal:
		case <-ctx.Done():
			return AsyncEvent{}, ctx.Err()
		case <-c.done:
			return AsyncEvent{}, ErrClosed
		}
	}
}

// PD is a protection domain (struct ibv_pd).
type PD struct {
	ctx  *Context
	refs atomic.Int64
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (c *Context) AllocPD() (*PD, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	return &PD{ctx: c}, nil
}

// Context is the device the PD belongs to.
func (pd *PD) Context() *Context { return pd.ctx }

// Dealloc releases the PD (ibv_dealloc_pd); ErrBusy while MRs, QPs or AHs use it.
func (pd *PD) Dealloc() error {
	if pd.refs.Load() != 0 {
		return fmt.Errorf("%w: PD has %d live objects", ErrBusy, pd.refs.Load())
	}
	return nil
}

// AH is an address handle for UD sends (struct ibv_ah).
type AH struct {
	pd   *PD
	Attr AHAttr
}

// CreateAH creates an address handle (ibv_create_ah). A multicast address handle (DLID a
// multicast LID, DGID the group's MGID, see AttachMcast) needs no Addr.
func (pd *PD) CreateAH(attr AHAttr) (*AH, error) {
	if IsMulticastLID(attr.DLID) {
		if !attr.DGID.IsMulticast() {
			return nil, fmt.Errorf("%w: address handle to multicast LID %#x without a multicast DGID", ErrInvalidArgument, attr.DLID)
		}
	} else if attr.Addr == "" {
		return nil, fmt.Errorf("%w: address handle without destination address", ErrInvalidArgument)
	}
	ah := &AH{pd: pd, Attr: attr}
	if err := pd.ctx.drv.CreateAH(ah); err != nil {
		return nil, fmt.Errorf("ibv: CreateAH %s: %w", attr.Addr, err)
	}
	return ah, nil
}

// SRQ is a shared receive queue (struct ibv_srq); providers that support it implement SRQDriver.
type SRQ struct {
	pd  *PD
	drv SRQDriver
}

// SRQDriver is the provider side of a shared receive queue.
type SRQDriver interface {
	PostRecv(wr *RecvWR) error
	Destroy() error
}

// SRQCreator is implemented by drivers that support shared receive queues.
type SRQCreator interface {
	CreateSRQ(srq *SRQ, maxWR int) (SRQDriver, error)
}

// CreateSRQ creates a shared receive queue of maxWR entries (ibv_create_srq).
func (pd *PD) CreateSRQ(maxWR int) (*SRQ, error) {
	cr, ok := pd.ctx.drv.(SRQCreator)
	if !ok {
		return nil, fmt.Errorf("ibv: CreateSRQ: %w", ErrUnsupported)
	}
	if maxWR <= 0 {
		return nil, fmt.Errorf("%w: SRQ of %d entries", ErrInvalidArgument, maxWR)
	}
	s := &SRQ{pd: pd}
	d, err := cr.CreateSRQ(s, maxWR)
	if err != nil {
		return nil, err
	}
	s.drv = d
	return s, nil
}

// PostRecv posts a receive buffer to the SRQ (ibv_post_srq_recv).
func (s *SRQ) PostRecv(wr *RecvWR) error { return s.drv.PostRecv(wr) }

// Destroy destroys the SRQ.
func (s *SRQ) Destroy() error { return s.drv.Destroy() }
