package hybridft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/hybridft/apm"
	"github.com/goarmci/goarmci/hybridft/recovery"
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
)

// Sentinel errors.
var (
	// ErrPartition: no path to the peer came back within the partition timeout
	// (GOARMCI_PARTITION_TIMEOUT); the connection is given up, its requests fail.
	ErrPartition = errors.New("hybridft: network partition: no path to the peer")
	// ErrFailed wraps the status of a work request that failed for good.
	ErrFailed = errors.New("hybridft: work request failed")
	// ErrClosed: the manager or connection was closed.
	ErrClosed = errors.New("hybridft: closed")
)

// VendorErr values of completions the completion filter produces itself.
const (
	// VendorSynthetic marks a completion the recovery produced without the network: the request
	// had been executed by the responder before the fault (only its acknowledgement was lost).
	VendorSynthetic uint32 = 0x48465401
	// VendorPartition marks the failed completion of a request given up after a partition.
	VendorPartition uint32 = 0x48465402
)

// CompletionError is the error of a completion returned by Endpoint.Poll: nil on success,
// ErrPartition (wrapped) for requests given up after a network partition, else ErrFailed
// wrapping the status. rma/multirail use it to surface errors.Is-testable causes.
func CompletionError(wc *ibv.WC) error {
	switch {
	case wc.Status == ibv.WCSuccess:
		return nil
	case wc.VendorErr == VendorPartition:
		return fmt.Errorf("%w (work request %d)", ErrPartition, wc.WRID)
	}
	return fmt.Errorf("%w: %v", ErrFailed, wc.Status)
}

// Endpoint holds one process's per-device resources that its connections share: the protection
// domain and the completion queue every RC queue pair of the device reports to. Endpoints made
// by a Manager (Manager.NewEndpoint) are fault tolerant; copies of an Endpoint (or WithPort)
// share its fault-tolerance state.
type Endpoint struct {
	Dev  *ibv.Context
	PD   *ibv.PD
	CQ   *ibv.CQ
	Port uint8 // local port (rail) new connections use
	// PathBits are the path bits new connections use on Port (WithPath): source path bits and
	// the offset of the destination LID from the peer port's base LID [Vishnu07 §2.2].
	PathBits uint8

	ft *devState // nil: pass-through
}

// NewEndpoint allocates the PD and a CQ of cqe entries on dev, for connections on port. Its
// connections are pass-through: faults surface as failed completions (see Manager.NewEndpoint).
func NewEndpoint(dev *ibv.Context, port uint8, cqe int) (*Endpoint, error) {
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, fmt.Errorf("hybridft: endpoint: %w", err)
	}
	cq, err := dev.CreateCQ(cqe)
	if err != nil {
		return nil, fmt.Errorf("hybridft: endpoint: %w", err)
	}
	return &Endpoint{Dev: dev, PD: pd, CQ: cq, Port: port}, nil
}

// WithPort returns a copy of the endpoint whose new connections use port (same PD, CQ and
// fault-tolerance state): one endpoint per rail of a device.
func (ep *Endpoint) WithPort(port uint8) *Endpoint {
	e := *ep
	e.Port = port
	return &e
}

// WithPath returns a copy of the endpoint whose new connections use path bits bits on its port
// (same PD, CQ and fault-tolerance state): one endpoint per (rail, path) of a device, the
// several paths per rail of [Vishnu07 §2.2, ch. 7] (LMC). A connection's queue pair then sends
// with source path bits bits to the peer port's base LID plus bits, so a destination-routed
// fabric carries each path on its own route, and the peer's responses come back on it; the
// peer port must answer to that LID (LMC ≥ log2(bits+1)). Both ends of a connection should use
// the same path bits. A fault-tolerant connection's home path is (port, bits): software
// recovery reconnects on it while its port is up.
func (ep *Endpoint) WithPath(bits uint8) *Endpoint {
	e := *ep
	e.PathBits = bits
	return &e
}

// FaultTolerant reports whether the endpoint's connections recover from faults.
func (ep *Endpoint) FaultTolerant() bool { return ep.ft != nil }

// Poll takes up to len(wc) completions of the endpoint's connections: the completion filter
// and error detection module of [Vishnu07 §10.3.1]. On a fault-tolerant endpoint, the failed
// completions of requests that will be re-issued are absorbed (they complete later, once), so
// it may return fewer completions than it took, even 0.
func (ep *Endpoint) Poll(wc []ibv.WC) int {
	n := ep.CQ.Poll(wc)
	if ep.ft == nil || n == 0 {
		return n
	}
	k := 0
	for i := 0; i < n; i++ {
		if ep.ft.filter(&wc[i]) {
			if k != i {
				wc[k] = wc[i]
			}
			k++
		}
	}
	return k
}

// Wait blocks until a completion may be ready to Poll, ctx ends or the device closes.
func (ep *Endpoint) Wait(ctx context.Context) error { return ep.CQ.Wait(ctx) }

// Conn is one RC connection to a peer over one path (one RC queue pair). On a fault-tolerant
// endpoint it keeps a log of the work requests posted and not yet completed, and survives
// faults: APM first, the software re-establishment protocol when APM fails (package doc).
type Conn struct {
	ep    *Endpoint
	qp    *ibv.QP
	local ConnInfo
	// a view of a shared DC queue pair (dcconn.go): the destination every work request gets
	dcAH  *ibv.AH
	dcQPN uint32

	// fault tolerance (nil ft: pass-through)
	ft  *devState
	m   *Manager
	id  uint64
	drv recoveryDriver

	mu          sync.Mutex
	remote      ConnInfo
	recoverable bool
	state       connState
	dead        error
	log         wrLog
	nposted     int    // log entries posted and awaiting their completion
	inc         uint32 // incarnation of the queue pair (recovery sequence that set it up)
	home        apm.Path
	primary     apm.Path
	alt         apm.Path
	hasAlt      bool
	paths       *recovery.Paths
	peerUp      uint32
	outageSince time.Time
	peerRec     map[uint32]record // the peer's responder records by incarnation
	ownRec      map[uint32]record // ours
	rec         *protoState       // re-establishment protocol (manager goroutine); fault-tolerant connections only
	lg          zerolog.Logger    // failover and recovery events (ConnectOptions.Log)
	apmRetryAt  time.Time
	apmForced   time.Time

	stats connStats
}

type connState uint8

const (
	stNormal connState = iota // posts go to the queue pair
	stFailed                  // a fault: posts are queued, recovery under way
	stReady                   // re-established: re-issue once every failed request has completed
	stDead                    // given up (partition) or closed
)

type connStats struct {
	migrations, recoveries, reposted, completed, giveBacks, forced atomic.Int64
}

// Stats counts a connection's fault-tolerance actions.
type Stats struct {
	PathMigrations int64 // automatic path migrations (EventPathMig) of its queue pair
	Recoveries     int64 // software re-establishments (REQ/REP/ACK completed)
	Reposted       int64 // failed work requests re-issued (whole or their unexecuted tail)
	Completed      int64 // failed work requests completed without re-issue (executed before the fault)
	GiveBacks      int64 // returns to the home path after it recovered
	Forced         int64 // manual migrations of GOARMCI_APM_TEST
	// Transport are the queue pair's transport counters (retransmissions, out-of-sequence and
	// duplicate requests received; ibv.QP.Counters).
	Transport ibv.QPCounters
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	s := &c.stats
	return Stats{PathMigrations: s.migrations.Load(), Recoveries: s.recoveries.Load(), Reposted: s.reposted.Load(),
		Completed: s.completed.Load(), GiveBacks: s.giveBacks.Load(), Forced: s.forced.Load(), Transport: c.qp.Counters()}
}

// FaultTolerant reports whether the connection recovers from network faults (its endpoint
// belongs to a Manager).
func (c *Conn) FaultTolerant() bool { return c.ft != nil }

// Port is the local port (rail) of the connection's current primary path.
func (c *Conn) Port() uint8 {
	if c.ft == nil {
		return c.ep.Port
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.primary.Port
}

// Err is nil while the connection works (or recovers), else why it was given up (ErrPartition,
// ErrClosed).
func (c *Conn) Err() error {
	if c.ft == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// record is a responder's state of one incarnation: its expected PSN and atomic results.
type record struct {
	epsn    uint32
	atoms   map[uint32]uint64
	none    bool // the queue pair never reached the incarnation: nothing executed
	unknown bool
}

// recoveryDriver is what the engine-based providers offer (ibv/internal/engine/recovery.go).
type recoveryDriver interface {
	FailedRequests(fn func(id uint64, firstPSN, npkts uint32, mtu int))
	ResponderState(fn func(psn uint32, value uint64)) uint32
}

// NewConn creates an RC queue pair on the endpoint, moves it to INIT with full remote access and
// returns it with the ConnInfo to send to the peer (version 2, with the alternate paths and the
// connection manager, on a fault-tolerant endpoint).
func (ep *Endpoint) NewConn() (*Conn, error) {
	qp, err := ep.PD.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: ep.CQ, RecvCQ: ep.CQ})
	if err != nil {
		return nil, fmt.Errorf("hybridft: %w", err)
	}
	if err := qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: ep.Port, AccessFlags: ibv.AccessAll},
		ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags); err != nil {
		_ = qp.Destroy()
		return nil, fmt.Errorf("hybridft: %w", err)
	}
	pa, err := ep.Dev.QueryPort(ep.Port)
	if err != nil {
		_ = qp.Destroy()
		return nil, fmt.Errorf("hybridft: %w", err)
	}
	c := &Conn{ep: ep, qp: qp, local: ConnInfo{Addr: pa.Addr, LID: pa.LID, QPN: qp.Num(), PSN: newPSN()}}
	if ep.ft == nil {
		return c, nil
	}
	m := ep.ft.m
	c.ft, c.m = ep.ft, m
	c.id = rand.Uint64() | 1
	c.rec = &protoState{recCore: newRecCore(c.id, m.opts.Resend, m.opts.Probe)}
	c.drv, _ = provider.QPDriver(qp).(recoveryDriver)
	c.log.init(qp.Cap().MaxSendWR)
	c.home = apm.Path{Port: ep.Port, PathBits: ep.PathBits}
	c.primary = c.home
	c.peerRec, c.ownRec = map[uint32]record{}, map[uint32]record{}
	c.local.ID, c.local.Port = c.id, ep.Port
	for p := 1; p <= ep.Dev.QueryDevice().PhysPortCnt; p++ {
		a, err := ep.Dev.QueryPort(uint8(p))
		if err != nil {
			break
		}
		c.local.Paths = append(c.local.Paths, PortPath{Addr: a.Addr, LID: a.LID, LMC: a.LMC})
	}
	c.local.CM, c.local.CMQPN = m.cm.Addrs(), m.cm.QPN()
	ep.ft.add(c)
	return c, nil
}

func newPSN() uint32 { return rand.Uint32() & 0xffffff }

// Local is the info the peer needs.
func (c *Conn) Local() ConnInfo { return c.local }

// QP is the connection's queue pair.
func (c *Conn) QP() *ibv.QP { return c.qp }

// ConnectOptions modify Connect.
type ConnectOptions struct {
	// PrimaryAddr, when set, replaces the peer's address on the primary path: [Vishnu09 §V.B]'s
	// fault emulation (a wrong destination at QP setup, so every request fails, APM has nothing
	// to migrate to and the software recovery runs; it reconnects with the true address).
	PrimaryAddr string
	// Log, when set, is the logger of this connection's failover and recovery events; the caller
	// adds what names the connection in its terms (peer rank, rail). Default: the manager's
	// logger with the connection id. The queue pair number is added either way.
	Log *zerolog.Logger
}

// Connect moves the queue pair to RTR and RTS towards the remote queue pair described by r. On
// a fault-tolerant endpoint it then loads an alternate path (APM) when one exists.
func (c *Conn) Connect(r ConnInfo) error { return c.ConnectWith(r, ConnectOptions{}) }

// ConnectWith is Connect with options.
func (c *Conn) ConnectWith(r ConnInfo, o ConnectOptions) error {
	addr := r.Addr
	if o.PrimaryAddr != "" {
		addr = o.PrimaryAddr
	}
	bits := c.ep.PathBits
	err := c.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: addr, DLID: r.LID + uint16(bits),
		SrcPathBits: bits, PortNum: c.ep.Port},
		DestQPN: r.QPN, RQPSN: r.PSN}, ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN)
	if err != nil {
		return fmt.Errorf("hybridft: connect to %s qp %d: %w", r.Addr, r.QPN, err)
	}
	attr := &ibv.QPAttr{State: ibv.StateRTS, SQPSN: c.local.PSN}
	mask := ibv.AttrState | ibv.AttrSQPSN
	if c.m != nil {
		mask |= c.m.rtsAttrs(attr)
	}
	if err := c.qp.Modify(attr, mask); err != nil {
		return fmt.Errorf("hybridft: connect to %s qp %d: %w", r.Addr, r.QPN, err)
	}
	if c.ft == nil {
		return nil
	}
	lg := c.m.log.With().Uint64("conn", c.id)
	if o.Log != nil {
		lg = o.Log.With()
	}
	c.mu.Lock()
	c.lg = lg.Uint32("qpn", c.qp.Num()).Logger()
	c.remote = r
	n := uint8(min(len(r.Paths), len(c.local.Paths), 32))
	c.recoverable = c.drv != nil && r.ID != 0 && len(r.CM) > 0 && n > 0 && int(r.Port) <= len(r.Paths)
	c.paths = recovery.NewPaths(c.home.Port, n)
	c.paths.Backoff = c.m.opts.Backoff
	c.peerUp = 1<<n - 1
	c.mu.Unlock()
	c.m.register(c)
	return nil
}

// Post posts a work request on the connection (ibv_post_send). On a fault-tolerant endpoint the
// request is signaled and logged until it completes; while the connection recovers it is
// queued and posted after the failed requests, in order. Errors: those of ibv.QP.PostSend,
// ibv.ErrQueueFull when the log is full (retry after progress), ErrPartition or ErrClosed when
// the connection was given up.
func (c *Conn) Post(wr *ibv.SendWR) error {
	if c.ft == nil {
		if c.dcAH != nil {
			wr.AH, wr.RemoteQPN = c.dcAH, c.dcQPN
		}
		return c.qp.PostSend(wr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil {
		c.qp.ReleaseBurst() // ends a burst held for an earlier SendMore (ibv.SendMore)
		return c.dead
	}
	e, ok := c.log.push(wr)
	if !ok {
		c.qp.ReleaseBurst()
		return fmt.Errorf("hybridft: %w: %d requests logged", ibv.ErrQueueFull, c.log.cap())
	}
	// SendMore holds this request's packets for the next post (ibv.SendMore) on its first post
	// only: the logged entry drops it, so a replay never holds them
	if c.state != stNormal {
		e.wr.Flags &^= ibv.SendMore
		e.state = esQueued
		return nil
	}
	err := c.postEntry(e, &e.wr)
	e.wr.Flags &^= ibv.SendMore
	if err != nil {
		c.log.dropTail()
		return err
	}
	return nil
}

// postEntry posts wr for log entry e on the current incarnation (c.mu held).
func (c *Conn) postEntry(e *entry, wr *ibv.SendWR) error {
	e.state, e.inc, e.hasSent = esPosted, c.inc, false
	c.nposted++
	if err := c.qp.PostSend(wr); err != nil {
		e.state = esQueued
		c.nposted--
		return err
	}
	return nil
}

// Close destroys the queue pair and forgets the connection (a DC view only forgets: the DC
// queue pair is shared).
func (c *Conn) Close() error {
	if c.dcAH != nil {
		return nil
	}
	if c.ft != nil {
		c.ft.remove(c)
		c.m.unregister(c)
		c.mu.Lock()
		if c.dead == nil {
			c.dead = ErrClosed
		}
		c.state = stDead
		c.mu.Unlock()
	}
	return c.qp.Destroy()
}

// Abort gives the connection up for good because its peer is gone (the runtime learned that the
// peer's process ended): Err returns err from now on, no recovery is attempted, requests waiting
// for a re-issue complete failed at once, and the queue pair moves to ERROR so the ones posted
// complete flushed (WR_FLUSH_ERR) instead of waiting for retries and the partition timeout.
//
// On a view of a shared DC queue pair (NewDCConn) it does nothing: the queue pair serves every
// peer, and the dead peer's record fails its requests alone when its retries run out.
func (c *Conn) Abort(err error) {
	if c.dcAH != nil {
		return
	}
	if c.ft != nil {
		c.mu.Lock()
		c.giveUpLocked(err)
		c.mu.Unlock()
	}
	_ = c.qp.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState)
}

// onWC is the completion filter for one completion of the connection's queue pair; it reports
// whether the completion goes to the consumer.
func (c *Conn) onWC(wc *ibv.WC) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wc.VendorErr == VendorSynthetic || wc.VendorErr == VendorPartition {
		if e := c.log.find(wc.WRID, esLocal); e != nil {
			e.state = esDone
			c.log.popDone()
		}
		return true
	}
	e := c.log.find(wc.WRID, esPosted)
	if e == nil {
		return true // not logged (posted before the log existed): pass through
	}
	c.nposted--
	switch {
	case wc.Status == ibv.WCSuccess:
		e.state = esDone
		c.log.popDone()
		if !c.outageSince.IsZero() && c.state == stNormal {
			c.outageSince = time.Time{}
			c.paths.Recovered(c.primary.Port)
		}
		return true
	case c.state == stDead:
		e.state = esDone
		c.log.popDone()
		if c.dead == ErrPartition {
			wc.VendorErr = VendorPartition
		}
		return true
	case !c.recoverable || !transient(wc.Status):
		// the consumer's own error (rkey, bounds, ...), or no way to recover: final; the queue
		// pair is in ERROR, so the others are re-issued on a recycled one
		e.state = esDone
		c.log.popDone()
		if c.recoverable {
			c.failLocked(false)
		}
		return true
	}
	e.state = esFailed
	c.failLocked(true)
	if c.state == stReady {
		c.tryRepostLocked()
	}
	return false
}

// transient reports whether a failed completion is the network's doing (retries exhausted on
// every path, or flushed by the queue pair's failure) rather than the request's.
func transient(s ibv.WCStatus) bool { return s == ibv.WCRetryExcErr || s == ibv.WCWRFlushErr }

// failLocked moves a working connection to stFailed and wakes the manager (c.mu held).
func (c *Conn) failLocked(pathFault bool) {
	if c.state != stNormal {
		return
	}
	c.state = stFailed
	c.rec.pathFault = pathFault
	if c.outageSince.IsZero() {
		c.outageSince = time.Now()
	}
	c.lg.Info().Uint8("port", c.primary.Port).Bool("path_fault", pathFault).
		Msg("hybridft: connection failed; software recovery starts")
	c.m.kick(c)
}

// tryRepostLocked is the message re-transmission module ([Vishnu07 §10.3.2], [Vishnu09 §IV.C]): once
// the queue pair is re-established and every request of the failed incarnation has completed,
// each failed request is re-issued exactly once — whole, as its unexecuted tail, or not at all
// when the responder had executed it (recovery.Decide) — then the queued ones (c.mu held).
func (c *Conn) tryRepostLocked() {
	if c.state != stReady || c.nposted != 0 {
		return
	}
	c.state = stNormal
	for i := c.log.head; i != c.log.tail; i++ {
		e := c.log.at(i)
		switch e.state {
		case esQueued:
			if err := c.postEntry(e, &e.wr); err != nil {
				c.completeLocal(e, ibv.WCLocQPOpErr, 0)
			}
		case esFailed:
			c.repost(e)
		}
	}
	// keep only the records a later recovery may still need
	for k := range c.peerRec {
		if k+16 < c.inc {
			delete(c.peerRec, k)
		}
	}
}

// repost re-issues the failed log entry e (c.mu held). What e's last incarnation carried was
// the tail of e.wr at e.done (bytes executed on earlier incarnations), so the responder's record
// is judged against that tail, and a re-issue resumes from e.done plus what the record adds:
// re-posting e.wr whole after a tail had been re-issued would apply an accumulate's head twice.
func (c *Conn) repost(e *entry) {
	act := recovery.Action{Kind: recovery.Repost}
	if e.hasSent {
		r, ok := c.peerRec[e.sentInc]
		switch {
		case !ok || r.unknown:
			if e.wr.Opcode.IsAtomic() {
				act.Kind = recovery.Fail
			}
		case r.none:
		default:
			act = recovery.Decide(e.wr.Opcode, e.wr.LocalLen()-e.done, e.sent, true, r.epsn, func(psn uint32) (uint64, bool) {
				v, ok := r.atoms[psn]
				return v, ok
			})
		}
	}
	switch act.Kind {
	case recovery.Repost, recovery.RepostTail:
		c.stats.reposted.Add(1)
		e.done += act.Offset // 0 for Repost: the same tail again
		wr := &e.wr
		var tail ibv.SendWR
		if e.done > 0 {
			tail = recovery.Tail(e.wr, e.done, e.tail)
			e.tail = tail.SGL
			wr = &tail
		}
		if err := c.postEntry(e, wr); err != nil {
			c.completeLocal(e, ibv.WCLocQPOpErr, 0)
		}
	case recovery.Complete:
		c.stats.completed.Add(1)
		c.completeLocal(e, ibv.WCSuccess, 0)
	case recovery.CompleteAtomic:
		c.stats.completed.Add(1)
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], act.Value)
		bufs, st := provider.LocalBuffers(c.ep.Dev, c.ep.PD, &e.wr, true, nil)
		if st == ibv.WCSuccess {
			src := b[:e.wr.Opcode.AtomicSize()]
			for _, d := range bufs {
				n := copy(d, src)
				src = src[n:]
			}
		}
		c.completeLocal(e, st, 0)
	default:
		c.completeLocal(e, ibv.WCRemOpErr, 0)
	}
}

// completeLocal completes log entry e with status through the CQ (a synthetic completion the
// filter recognizes by VendorErr).
func (c *Conn) completeLocal(e *entry, st ibv.WCStatus, vendor uint32) {
	if vendor == 0 {
		vendor = VendorSynthetic
	}
	e.state = esLocal
	provider.Push(c.ep.CQ, ibv.WC{WRID: e.wr.ID, Status: st, Opcode: provider.WCOpcodeOf(e.wr.Opcode), QPNum: c.qp.Num(),
		ByteLen: uint32(e.wr.LocalLen()), VendorErr: vendor})

}

// giveUpLocked fails the connection for good with err: every logged request not posted
// completes with a failed completion marked VendorPartition (c.mu held).
func (c *Conn) giveUpLocked(err error) {
	if c.state == stDead {
		return
	}
	c.state, c.dead = stDead, err
	for i := c.log.head; i != c.log.tail; i++ {
		if e := c.log.at(i); e.state == esFailed || e.state == esQueued {
			c.completeLocal(e, ibv.WCRetryExcErr, VendorPartition)
		}
	}
}
