package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/internal/secret"
)

// PeerInfo is what every rank reports about itself at start-up.
type PeerInfo struct {
	Rank   int
	Host   string // host name
	HostID string // node identity (host name + boot id); equal HostIDs share memory
}

// Client is one rank's connection to the job's rendezvous service, kept for the whole job
// (the runtime uses AllGather for collective memory allocation). Collectives (AllGather,
// Barrier) must be called by every rank in the same order, one at a time per Client; Put and
// Get may be called concurrently. Close ends the rank's membership.
type Client struct {
	conn   net.Conn
	info   Info
	jobID  string
	secret secret.Key // the job's: Info.Secret, or handed out by the rendezvous (auth.go)
	addr   string
	log    zerolog.Logger

	wmu sync.Mutex // serializes frame writes

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan frame
	broken  error // set when the connection or the job failed

	// Failure detection (liveness.go), under mu.
	failTimeout time.Duration // the server's, from the welcome
	partTimeout time.Duration // likewise
	hostRank    int           // the rank hosting the rendezvous, -1 for goarmci run
	det         *detector     // one member: the rendezvous
	failures    map[int]*PeerFailure
	onFail      []func(rank int, cause error)
	expelled    bool        // this rank was declared failed
	expelledA   atomic.Bool // expelled, for Member's fast path
	// Membership lease (Member): base is the clock's origin; confirmed is the send time (since
	// base, ns) of the latest heartbeat the rendezvous answered (mPong); pongWake is closed and
	// replaced at every answer.
	base      time.Time
	confirmed atomic.Int64
	pongWake  chan struct{}
	closing   atomic.Bool // Close or abort started: the connection's end is ours
	pingStop  chan struct{}
	pingDone  chan struct{}

	collMu  sync.Mutex // one collective at a time
	seq     uint64     // collectives entered
	peers   []PeerInfo
	started bool // first exchange done

	readerDone chan struct{}
	reading    bool // readLoop started

	// Owned pieces started by Connect for this rank.
	server       *Server
	pmi          *pmiClient
	rdvFile      string // the rendezvous file this rank wrote, until removed
	closeTimeout time.Duration
	closeOnce    sync.Once
	closeErr     error
}

// Rank is this process's rank in [0, Size).
func (c *Client) Rank() int { return c.info.Rank }

// Size is the number of ranks in the job.
func (c *Client) Size() int { return c.info.Size }

// Info is the environment this client was connected from.
func (c *Client) Info() Info { return c.info }

// JobID is the job id agreed through the rendezvous: equal on every rank.
func (c *Client) JobID() string { return c.jobID }

// JobSecret is the job's secret (internal/secret, Size bytes), equal on every rank: the one
// GOARMCI_JOB_SECRET gave, or the one the rendezvous handed out. The runtime keys its
// connection handshakes and CM messages with it.
func (c *Client) JobSecret() []byte { return c.secret.Bytes() }

// Addr is the rendezvous address this client is connected to.
func (c *Client) Addr() string { return c.addr }

// Peers returns every rank's PeerInfo, indexed by rank, as exchanged at Connect.
func (c *Client) Peers() []PeerInfo { return slices.Clone(c.peers) }

// LocalRanks returns the ranks sharing this rank's node (equal HostID), ascending, this rank
// included.
func (c *Client) LocalRanks() []int {
	var out []int
	me := c.peers[c.info.Rank].HostID
	for _, p := range c.peers {
		if p.HostID == me {
			out = append(out, p.Rank)
		}
	}
	return out
}

// SameNode reports whether rank shares this rank's node.
func (c *Client) SameNode(rank int) bool {
	return rank >= 0 && rank < len(c.peers) && c.peers[rank].HostID == c.peers[c.info.Rank].HostID
}

// AllGather is collective over all ranks: every rank contributes data (any length, up to
// 256 MiB in total) and receives every contribution, indexed by rank (MPI_Allgather of
// variable-size blobs). It waits until every rank has called it or ctx ends; on timeout the
// error wraps ErrTimeout (ErrStartupTimeout during Connect) and ctx.Err() and names the ranks
// that never arrived. After a failed collective the client is unusable for collectives (ranks
// would disagree on the collective count). A lost rank gives ErrPeerLost.
func (c *Client) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	c.collMu.Lock()
	defer c.collMu.Unlock()
	if err := c.err(); err != nil {
		return nil, err
	}
	seq := c.seq
	c.seq++
	id, ch := c.register()
	defer c.unregister(id)
	var e enc
	e.u64(id)
	e.u64(seq)
	e.bytes(data)
	if err := c.write(mGather, e.b); err != nil {
		return nil, c.fail(err)
	}
	f, err := c.wait(ctx, ch)
	if err != nil {
		if ctx.Err() != nil {
			err = c.timeoutError(seq, ctx.Err())
		}
		return nil, c.fail(err)
	}
	d := dec{b: f.payload}
	d.u64()
	gotSeq, parts := d.u64(), d.list()
	if err := d.done(); err != nil {
		return nil, c.fail(err)
	}
	if gotSeq != seq || len(parts) != c.info.Size {
		return nil, c.fail(fmt.Errorf("%w: collective #%d answered as #%d with %d parts", ErrProtocol, seq, gotSeq, len(parts)))
	}
	return parts, nil
}

// Barrier is collective: it returns once every rank has entered it (MPI_Barrier over the
// rendezvous; the runtime's RDMA barriers of [Kini03] are in rma). Errors as AllGather.
func (c *Client) Barrier(ctx context.Context) error {
	_, err := c.AllGather(ctx, nil)
	return err
}

// Put stores value under key in the job's key-value space (visible to every rank; a later
// Put replaces it), like PMI_KVS_Put + commit.
func (c *Client) Put(ctx context.Context, key string, value []byte) error {
	var e enc
	_, err := c.call(ctx, mPut, func(id uint64) []byte {
		e.u64(id)
		e.str(key)
		e.bytes(value)
		return e.b
	})
	return err
}

// Get returns the value stored under key, waiting until some rank puts it or ctx ends
// (error wrapping ErrTimeout and ctx.Err()).
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	var e enc
	f, err := c.call(ctx, mGet, func(id uint64) []byte {
		e.u64(id)
		e.str(key)
		return e.b
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: key %q was never put (%s): %w", ErrTimeout, key, c.info.Launcher, ctx.Err())
		}
		return nil, err
	}
	d := dec{b: f.payload}
	d.u64()
	v := d.bytes()
	if err := d.done(); err != nil {
		return nil, err
	}
	return v, nil
}

// call sends one request and waits for its answer (errors: the answer's mError, ctx).
func (c *Client) call(ctx context.Context, typ byte, build func(id uint64) []byte) (frame, error) {
	if err := c.err(); err != nil {
		return frame{}, err
	}
	return c.roundTrip(ctx, typ, build)
}

// roundTrip is call on a client that may be broken by a job failure but whose connection works.
func (c *Client) roundTrip(ctx context.Context, typ byte, build func(id uint64) []byte) (frame, error) {
	id, ch := c.register()
	defer c.unregister(id)
	if err := c.write(typ, build(id)); err != nil {
		return frame{}, c.fail(err)
	}
	return c.wait(ctx, ch)
}

func (c *Client) register() (uint64, chan frame) {
	ch := make(chan frame, 1)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	return id, ch
}

func (c *Client) unregister(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) wait(ctx context.Context, ch chan frame) (frame, error) {
	select {
	case f := <-ch:
		return c.answer(f)
	case <-c.readerDone:
		// A reply may have arrived just before the reader stopped.
		select {
		case f := <-ch:
			return c.answer(f)
		default:
		}
		return frame{}, c.err()
	case <-ctx.Done():
		return frame{}, ctx.Err()
	}
}

// answer turns the error frames a waiter may get into errors.
func (c *Client) answer(f frame) (frame, error) {
	switch f.typ {
	case mError:
		return frame{}, decodeError(f.payload)
	case mPeerFailed:
		pf, err := decodePeerFailed(f.payload, c.info.Size)
		if err != nil {
			return frame{}, err
		}
		return frame{}, pf
	}
	return f, nil
}

func (c *Client) write(typ byte, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	return writeFrame(c.conn, typ, payload)
}

func (c *Client) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// fail marks the client broken with err (the first failure sticks) and returns it.
func (c *Client) fail(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = err
	}
	return err
}

// timeoutError asks the service which ranks have not entered collective seq and builds the
// timeout error naming them.
func (c *Client) timeoutError(seq uint64, cause error) error {
	sentinel := ErrTimeout
	if !c.started {
		sentinel = ErrStartupTimeout
	}
	missing := "unknown (the rendezvous did not answer)"
	qctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var e enc
	f, err := c.call(qctx, mStatus, func(id uint64) []byte {
		e.u64(id)
		e.u64(seq)
		return e.b
	})
	if err != nil {
		missing = fmt.Sprintf("unknown (%v)", err)
	} else {
		d := dec{b: f.payload}
		d.u64()
		d.u64()
		rs := d.u32list()
		if d.done() == nil {
			missing = formatRanks(rs)
		}
	}
	return fmt.Errorf("%w: launcher %s, rank %d of %d, rendezvous %s: collective #%d: ranks that never arrived: %s: %w",
		sentinel, c.info.Launcher, c.info.Rank, c.info.Size, c.addr, seq, missing, cause)
}

// formatRanks prints ranks compactly: "3", "0-2,5".
func formatRanks(rs []uint32) string {
	if len(rs) == 0 {
		return "none"
	}
	s := ""
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if s != "" {
			s += ","
		}
		if j > i {
			s += fmt.Sprintf("%d-%d", rs[i], rs[j])
		} else {
			s += fmt.Sprintf("%d", rs[i])
		}
		i = j + 1
	}
	return s
}

func decodeError(p []byte) error {
	d := dec{b: p}
	d.u64()
	kind, msg := d.u8(), d.str()
	if err := d.done(); err != nil {
		return err
	}
	switch kind {
	case ekLost:
		return fmt.Errorf("%w: %s", ErrPeerLost, msg)
	case ekRefused:
		return fmt.Errorf("%w: %s", ErrRefused, msg)
	case ekAuth:
		return fmt.Errorf("%w: %w: %s", ErrRefused, ErrAuth, msg)
	default:
		return fmt.Errorf("%w: rendezvous says: %s", ErrProtocol, msg)
	}
}

// readLoop delivers answers to their waiters until the connection ends.
func (c *Client) readLoop() {
	defer close(c.readerDone)
	for {
		f, err := readFrame(c.conn)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				err = ErrClosed
			}
			c.rendezvousLost(FailExited, 0) // first: the failure is the client's error then
			c.fail(fmt.Errorf("bootstrap: rendezvous connection: %w", err))
			return
		}
		if len(f.payload) < 8 {
			c.fail(fmt.Errorf("%w: message type %d without request id", ErrProtocol, f.typ))
			c.conn.Close()
			return
		}
		c.mu.Lock()
		c.det.heard(0, time.Now())
		c.mu.Unlock()
		switch f.typ {
		case mPing:
			continue
		case mPong:
			d := dec{b: f.payload}
			token := int64(d.u64())
			if d.done() != nil || token < 0 {
				c.fail(fmt.Errorf("%w: malformed heartbeat answer", ErrProtocol))
				c.conn.Close()
				return
			}
			c.mu.Lock()
			if token > c.confirmed.Load() {
				c.confirmed.Store(token)
			}
			close(c.pongWake)
			c.pongWake = make(chan struct{})
			c.mu.Unlock()
			continue
		case mPeerFailed:
			pf, err := decodePeerFailed(f.payload, c.info.Size)
			if err != nil {
				c.fail(err)
				c.conn.Close()
				return
			}
			c.peerFailed(pf, f)
			continue
		}
		id := uint64(f.payload[0])<<56 | uint64(f.payload[1])<<48 | uint64(f.payload[2])<<40 | uint64(f.payload[3])<<32 |
			uint64(f.payload[4])<<24 | uint64(f.payload[5])<<16 | uint64(f.payload[6])<<8 | uint64(f.payload[7])
		if f.typ == mError && id == 0 {
			// The job failed: every waiter gets the error.
			c.fail(decodeError(f.payload))
			c.mu.Lock()
			for _, ch := range c.pending {
				select {
				case ch <- f:
				default:
				}
			}
			c.mu.Unlock()
			continue
		}
		c.mu.Lock()
		ch := c.pending[id]
		c.mu.Unlock()
		if ch != nil {
			select {
			case ch <- f:
			default:
			}
		}
	}
}

// OnPeerFailure registers f to be called once for every rank declared failed (its process
// ended before Finalize, or it stayed silent for the failure timeout; see liveness.go), with a
// *PeerFailure describing it. Failures known before the call are reported at once; later ones
// from the client's reader, so f must not block. A rank told that it was itself declared failed
// (it was stopped past the timeout) reports its own rank.
func (c *Client) OnPeerFailure(f func(rank int, cause error)) {
	c.mu.Lock()
	c.onFail = append(c.onFail, f)
	known := make([]*PeerFailure, 0, len(c.failures))
	for _, pf := range c.failures {
		known = append(known, pf)
	}
	c.mu.Unlock()
	slices.SortFunc(known, func(a, b *PeerFailure) int { return a.Rank - b.Rank })
	for _, pf := range known {
		f(pf.Rank, pf)
	}
}

// FailureTimeout is the job's failure timeout, as the rendezvous said (0: heartbeats off).
func (c *Client) FailureTimeout() time.Duration { return c.failTimeout }

// PartitionTimeout is the job's partition timeout, as the rendezvous said (0: none).
func (c *Client) PartitionTimeout() time.Duration { return c.partTimeout }

// peerFailed records a failure (told by the rendezvous in frame f, or found by this client):
// the job's collectives fail, every waiter is woken with it, and the callbacks learn it.
func (c *Client) peerFailed(pf *PeerFailure, f frame) {
	c.mu.Lock()
	if c.failures[pf.Rank] != nil {
		c.mu.Unlock()
		return
	}
	c.failures[pf.Rank] = pf
	if pf.Rank == c.info.Rank {
		c.expelled = true
		c.expelledA.Store(true)
		if c.pongWake != nil {
			close(c.pongWake) // Member's waiters learn it
			c.pongWake = make(chan struct{})
		}
	}
	if pf.Rank == c.hostRank {
		c.det.fail(0)
	}
	if c.broken == nil {
		c.broken = pf
	}
	if f.payload == nil {
		f = frame{typ: mPeerFailed, payload: encodePeerFailed(pf)}
	}
	for _, ch := range c.pending {
		select {
		case ch <- f:
		default:
		}
	}
	cbs := slices.Clone(c.onFail)
	c.mu.Unlock()
	c.log.Warn().Int("peer", pf.Rank).Str("reason", pf.Error()).Msg("bootstrap: rank failed")
	for _, cb := range cbs {
		cb(pf.Rank, pf)
	}
}

// rendezvousLost handles the end (FailExited) or the silence (FailSilent, FailUnreachable after
// after) of the rendezvous connection that this client did not cause: the rank hosting the
// rendezvous failed. Under goarmci run (the launcher hosts it) no rank is to blame; the client
// is broken only.
func (c *Client) rendezvousLost(reason FailReason, after time.Duration) {
	if c.closing.Load() {
		return
	}
	c.mu.Lock()
	host, expelled := c.hostRank, c.expelled
	fail := true // tick declared it
	if reason == FailExited {
		_, fail = c.det.closed(0)
	}
	c.mu.Unlock()
	if !fail || expelled || host == c.info.Rank {
		return
	}
	if host < 0 {
		c.fail(fmt.Errorf("%w: the rendezvous (goarmci run) is gone", ErrPeerLost))
		return
	}
	c.peerFailed(&PeerFailure{Rank: host, Reason: reason, After: after}, frame{})
}

// heartbeat is the client's driver of the detector's clock: it sends a heartbeat every
// heartbeatEvery and declares the rendezvous' host failed when nothing came from it for the
// failure timeout.
func (c *Client) heartbeat() {
	defer close(c.pingDone)
	t := time.NewTicker(heartbeatEvery(c.failTimeout))
	defer t.Stop()
	for {
		select {
		case <-c.pingStop:
			return
		case <-c.readerDone:
			return
		case now := <-t.C:
			if c.closing.Load() {
				return
			}
			c.ping()
			at, acked := hostAckedAt(c.conn, now)
			c.mu.Lock()
			if acked {
				c.det.hostHeard(0, at)
			}
			ds := c.det.tick(now)
			c.mu.Unlock()
			for _, d := range ds {
				c.rendezvousLost(d.reason, d.after)
			}
		}
	}
}

// ping sends a heartbeat whose token is the time since base: the rendezvous' answer (mPong)
// renews the membership lease from then (Member). It returns the token.
func (c *Client) ping() int64 {
	token := int64(time.Since(c.base))
	var e enc
	e.u64(uint64(token))
	_ = c.write(mPing, e.b)
	return token
}

// Member checks that this rank is still a member of the job, before it writes to another rank's
// memory itself (shared memory, where no network layer of the target can refuse it): nil when
// the rendezvous answered a heartbeat this rank sent less than half the failure timeout ago
// (the rendezvous declares a rank only after a silence of 7/8 of it: a write now lands before any
// declaration); else — the process was stopped or starved — it sends a heartbeat and waits for
// the answer. Errors: this rank's *PeerFailure (errors.Is ErrPeerLost) when it was declared failed
// (the rendezvous sends that notice before it stops answering), ctx's error. Without heartbeats
// (failure timeout 0), or once the rendezvous is gone (no rank can be declared any more), only a
// notice already received fails it. The fast path costs a clock read and two atomic loads.
func (c *Client) Member(ctx context.Context) error {
	if c.expelledA.Load() {
		return c.selfFailure()
	}
	if c.failTimeout <= 0 || time.Since(c.base)-time.Duration(c.confirmed.Load()) < c.failTimeout/2 {
		return nil
	}
	token := c.ping()
	for {
		c.mu.Lock()
		wake, ok := c.pongWake, c.confirmed.Load() >= token
		c.mu.Unlock()
		if c.expelledA.Load() {
			return c.selfFailure()
		}
		if ok {
			return nil
		}
		select {
		case <-wake:
		case <-c.readerDone:
			if c.expelledA.Load() {
				return c.selfFailure()
			}
			return nil // no rendezvous: nobody can declare this rank any more
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// selfFailure is this rank's own failure record (it was declared failed).
func (c *Client) selfFailure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pf := c.failures[c.info.Rank]; pf != nil {
		return pf
	}
	return fmt.Errorf("%w: rank %d was declared failed", ErrPeerLost, c.info.Rank)
}

// stopHeartbeat stops the heartbeat goroutine, if any, and waits for it.
func (c *Client) stopHeartbeat() {
	if c.pingStop == nil {
		return
	}
	select {
	case <-c.pingStop:
	default:
		close(c.pingStop)
	}
	<-c.pingDone
}

// Close says goodbye to the rendezvous and closes the connection. When this rank hosts the
// service (rank 0 under Slurm, PMI or a given GOARMCI_RDV), Close first waits until every
// rank has left (bounded by the close timeout, default 60 s), then stops it. The PMI-1
// connection, if any, is finalized. Idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		var errs []error
		c.closing.Store(true)
		c.stopHeartbeat()
		c.mu.Lock()
		// No goodbye from a rank declared failed, nor to a failed rendezvous host.
		expelled := c.expelled || c.hostRank >= 0 && c.failures[c.hostRank] != nil
		c.mu.Unlock()
		select {
		case <-c.readerDone:
		default:
			if !expelled {
				// Goodbye even after another rank failed: this rank's end is clean.
				ctx, cancel := context.WithTimeout(context.Background(), c.closeTimeout)
				var e enc
				_, err := c.roundTrip(ctx, mBye, func(id uint64) []byte { e.u64(id); return e.b })
				cancel()
				if err != nil && !errors.Is(err, ErrPeerLost) {
					errs = append(errs, fmt.Errorf("bootstrap: goodbye: %w", err))
				}
			}
		}
		c.fail(ErrClosed)
		errs = append(errs, ignoreClosed(c.conn.Close()))
		<-c.readerDone
		if c.server != nil {
			select {
			case <-c.server.Done():
			case <-time.After(c.closeTimeout):
				c.log.Warn().Msg("rendezvous: closing before every rank left")
			}
			errs = append(errs, c.server.Close())
		}
		if c.pmi != nil {
			errs = append(errs, c.pmi.finalize(c.closeTimeout), c.pmi.close())
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
