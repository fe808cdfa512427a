package bootstrap

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/internal/secret"
)

// Server is the rendezvous service of one job of Size ranks: a key-value store and
// collectives (AllGather, Barrier) over all ranks, on a TCP listener. Ranks join with Connect.
// It is the role of the PMI server of MPI launchers.
//
// When a rank's connection ends before it said goodbye, or nothing is heard from it for the
// failure timeout, the rank is failed (liveness.go): every other rank is told (its Client
// reports the rank to OnPeerFailure), and pending and later collectives of every rank return an
// error wrapping ErrPeerLost naming the rank.
type Server struct {
	ln          net.Listener
	size        int
	jobID       string
	log         zerolog.Logger
	failTimeout time.Duration
	partTimeout time.Duration
	key         secret.Key // the job's secret: given (keyed, WithSecret) or generated
	keyed       bool
	rejects     secret.Rejections

	mu      sync.Mutex
	conns   map[*sconn]struct{}
	ranks   []*sconn // by rank, nil until joined
	joined  int
	left    int
	hasLeft []bool
	entered []uint64 // by rank: collectives entered so far
	gathers map[uint64]*gatherState
	kv      map[string][]byte
	getters map[string][]getter
	failed  error
	det     *detector // one member per rank
	peerErr []*PeerFailure
	// Incarnations: every join gets the next number; a failure records the incarnation it
	// ended, and frames from that incarnation or older are ignored (a stopped rank that resumes
	// after it was declared failed changes nothing).
	incarnations uint64
	failedInc    []uint64 // by rank; 0: not failed
	// Exit statuses reported by the launcher hosting the server (WithExitStatuses), or nil.
	exits      *exitWait
	exitTimers map[uint64]*time.Timer // held notices' timers, by number
	nextTimer  uint64

	// sendMu orders the frames: every batch produced under mu is written while holding sendMu,
	// taken before mu is released (sendUnlock), so each connection receives its frames in the
	// order the state changes made them (a collective's result before the failure notice of a
	// rank that left after it).
	sendMu sync.Mutex

	done     chan struct{} // closed when every rank joined and left
	closed   chan struct{}
	closeErr error
	once     sync.Once
	wg       sync.WaitGroup
}

type sconn struct {
	c    net.Conn
	rank int    // -1 before hello
	inc  uint64 // incarnation, set at hello
	wmu  sync.Mutex
	bye  bool
}

type gatherState struct {
	parts [][]byte
	ids   []uint64
	have  []bool
	n     int
}

type getter struct {
	sc *sconn
	id uint64
}

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithJobID sets the job id the server hands to every rank (Client.JobID); default: random.
func WithJobID(id string) ServerOption { return func(s *Server) { s.jobID = id } }

// WithServerLogger sets the server's logger (default: none).
func WithServerLogger(l zerolog.Logger) ServerOption { return func(s *Server) { s.log = l } }

// WithServerFailureTimeout sets how long a rank may stay silent (no frame, heartbeats included)
// before it is declared failed; the server hands it to every rank, whose heartbeats it paces.
// 0 turns heartbeats off: only closed connections fail ranks. Default DefaultFailureTimeout
// (config GOARMCI_FAILURE_TIMEOUT).
func WithServerFailureTimeout(d time.Duration) ServerOption {
	return func(s *Server) { s.failTimeout = max(d, 0) }
}

// WithServerPartitionTimeout sets the partition timeout of the job (GOARMCI_PARTITION_TIMEOUT:
// how long the network layer rides out a partition): a silent rank whose host does not answer
// either is declared failed after it plus the failure timeout; 0: never. The server hands it
// to every rank. Default DefaultPartitionTimeout.
func WithServerPartitionTimeout(d time.Duration) ServerOption {
	return func(s *Server) { s.partTimeout = max(d, 0) }
}

// WithExitStatuses says that the launcher hosting the server reports how every rank's process
// ended (RankExited), as goarmci run does: the failure notice of a rank whose connection closes
// before its goodbye then waits for its status, at most exitWaitBound (100 ms), so that the
// survivors' errors say it ("rank 1 was killed by signal 9 (SIGKILL) before Finalize").
func WithExitStatuses() ServerOption {
	return func(s *Server) { s.exits = newExitWait(s.size, exitWaitBound) }
}

// DefaultFailureTimeout is the default failure timeout (GOARMCI_FAILURE_TIMEOUT).
const DefaultFailureTimeout = 2 * time.Second

// DefaultPartitionTimeout is the default partition timeout (GOARMCI_PARTITION_TIMEOUT, whose
// default hybridft.DefaultPartitionTimeout is).
const DefaultPartitionTimeout = 30 * time.Second

// helloTimeout bounds how long a new connection may take to say who it is.
const helloTimeout = 30 * time.Second

// writeTimeout bounds one write to a rank; a rank that does not read is dropped.
const writeTimeout = 30 * time.Second

// NewServer starts serving ln for a job of size ranks (size ≥ 1). The server owns ln and its
// goroutines; Close stops them. Errors: size < 1.
func NewServer(ln net.Listener, size int, opts ...ServerOption) (*Server, error) {
	if size < 1 {
		return nil, fmt.Errorf("%w: rendezvous size %d < 1", ErrBadEnv, size)
	}
	s := &Server{
		ln: ln, size: size, log: zerolog.Nop(), failTimeout: DefaultFailureTimeout, partTimeout: DefaultPartitionTimeout,
		conns: map[*sconn]struct{}{}, ranks: make([]*sconn, size), hasLeft: make([]bool, size), entered: make([]uint64, size),
		gathers: map[uint64]*gatherState{}, kv: map[string][]byte{}, getters: map[string][]getter{},
		done: make(chan struct{}), closed: make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	if !s.keyed {
		k, err := secret.New()
		if err != nil {
			return nil, fmt.Errorf("bootstrap: rendezvous: %w", err)
		}
		s.key = k
	}
	if s.jobID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		s.jobID = hex.EncodeToString(b[:])
	}
	s.det = newDetector(size, s.failTimeout, s.partTimeout)
	s.peerErr = make([]*PeerFailure, size)
	s.failedInc = make([]uint64, size)
	s.exitTimers = map[uint64]*time.Timer{}
	s.wg.Add(1)
	go s.acceptLoop()
	if s.failTimeout > 0 {
		s.wg.Add(1)
		go s.heartbeat()
	}
	return s, nil
}

// Failed returns the ranks declared failed so far, ascending.
func (s *Server) Failed() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for r, pf := range s.peerErr {
		if pf != nil {
			out = append(out, r)
		}
	}
	return out
}

// RankExited reports how rank's process ended (the launcher's wait(2); see WithExitStatuses). A
// rank whose connection closed before its goodbye and whose notice waits for this is declared
// now, its status in the notice; a status reported first is used when the close follows. Ranks
// outside the job, and statuses after the notice went out, are ignored.
func (s *Server) RankExited(rank int, st ExitStatus) {
	if s.exits == nil || rank < 0 || rank >= s.size {
		return
	}
	st.Known = true
	var msgs []out
	s.mu.Lock()
	if s.exits.exited(rank, st) {
		msgs = s.declareLocked(&PeerFailure{Rank: rank, Reason: FailExited, Exit: st})
	}
	s.sendUnlock(msgs)
}

// exitWaitDue is the timer of a notice held for an exit status: the ones whose bound passed go
// out without it.
func (s *Server) exitWaitDue(id uint64) {
	defer s.wg.Done()
	var msgs []out
	s.mu.Lock()
	delete(s.exitTimers, id)
	select {
	case <-s.closed:
	default:
		for _, r := range s.exits.due(time.Now()) {
			msgs = append(msgs, s.declareLocked(&PeerFailure{Rank: r, Reason: FailExited})...)
		}
	}
	s.sendUnlock(msgs)
}

// heartbeat is the server's driver of the detector's clock: every heartbeatEvery it declares
// the ranks silent for the failure timeout failed and sends every joined rank a heartbeat.
func (s *Server) heartbeat() {
	defer s.wg.Done()
	t := time.NewTicker(heartbeatEvery(s.failTimeout))
	defer t.Stop()
	ping := pingPayload
	for {
		select {
		case <-s.closed:
			return
		case now := <-t.C:
			var msgs []out
			var drop []*sconn
			s.mu.Lock()
			for _, sc := range s.ranks {
				if sc != nil {
					if at, ok := hostAckedAt(sc.c, now); ok {
						s.det.hostHeard(sc.rank, at)
					}
				}
			}
			for _, d := range s.det.tick(now) {
				msgs = append(msgs, s.declareLocked(&PeerFailure{Rank: d.k, Reason: d.reason, After: d.after})...)
				if sc := s.ranks[d.k]; sc != nil {
					drop = append(drop, sc)
				}
			}
			for _, sc := range s.ranks {
				if sc != nil && !s.det.failed(sc.rank) {
					msgs = append(msgs, out{sc, mPing, ping})
				}
			}
			s.sendUnlock(msgs)
			for _, sc := range drop {
				sc.c.Close() // told it was declared failed (if it ever reads again); its reader ends
			}
		}
	}
}

// declareLocked records rank pf.Rank as failed and returns the notices to every joined rank
// (the failed one included, when still connected: a stopped rank that resumes learns it was
// declared failed). The first failure fails the job's collectives.
func (s *Server) declareLocked(pf *PeerFailure) []out {
	if s.peerErr[pf.Rank] != nil {
		return nil
	}
	s.peerErr[pf.Rank] = pf
	if sc := s.ranks[pf.Rank]; sc != nil {
		s.failedInc[pf.Rank] = sc.inc
	} else {
		s.failedInc[pf.Rank] = s.incarnations // its connection is gone: no later frame anyway
	}
	if s.failed == nil {
		s.failed = pf
	}
	s.log.Warn().Int("peer", pf.Rank).Str("reason", pf.Error()).Msg("rendezvous: rank lost")
	var msgs []out
	p := encodePeerFailed(pf)
	for _, o := range s.ranks {
		if o != nil {
			msgs = append(msgs, out{o, mPeerFailed, p})
		}
	}
	return msgs
}

// Addr is the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// JobID is the job id handed to the ranks.
func (s *Server) JobID() string { return s.jobID }

// Done is closed when every rank has joined and then left (said goodbye or was lost).
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is the job's failure (wrapping ErrPeerLost), or nil.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// Missing returns the ranks that have not contributed to collective number seq (counted from
// 0 in call order) — the ranks a waiting rank is waiting for.
func (s *Server) Missing(seq uint64) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.missingLocked(seq)
}

func (s *Server) missingLocked(seq uint64) []int {
	var out []int
	for r, n := range s.entered {
		if n <= seq {
			out = append(out, r)
		}
	}
	return out
}

// Close stops the service: closes the listener and every connection and waits for the
// server's goroutines. Idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		close(s.closed)
		s.closeErr = s.ln.Close()
		s.mu.Lock()
		for sc := range s.conns {
			sc.c.Close()
		}
		for id, t := range s.exitTimers {
			if t.Stop() {
				delete(s.exitTimers, id)
				s.wg.Done() // its callback will not run
			}
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
	if errors.Is(s.closeErr, net.ErrClosed) {
		return nil
	}
	return s.closeErr
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn().Err(err).Msg("rendezvous accept")
			time.Sleep(10 * time.Millisecond)
			continue
		}
		sc := &sconn{c: c, rank: -1}
		s.mu.Lock()
		select {
		case <-s.closed:
			s.mu.Unlock()
			c.Close()
			return
		default:
		}
		s.conns[sc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(sc)
	}
}

// out is a message to send after the server lock is released.
type out struct {
	sc      *sconn
	typ     byte
	payload []byte
}

// sendUnlock releases s.mu (held by the caller) and writes msgs, in production order with every
// other batch (sendMu is taken before s.mu is released).
func (s *Server) sendUnlock(msgs []out) {
	s.sendMu.Lock()
	s.mu.Unlock()
	s.write(msgs)
	s.sendMu.Unlock()
}

// send writes msgs produced outside s.mu (frames of a connection's own admission or end).
func (s *Server) send(msgs []out) {
	if len(msgs) == 0 {
		return
	}
	s.sendMu.Lock()
	s.write(msgs)
	s.sendMu.Unlock()
}

func (s *Server) write(msgs []out) {
	for _, m := range msgs {
		m.sc.wmu.Lock()
		_ = m.sc.c.SetWriteDeadline(time.Now().Add(writeTimeout))
		err := writeFrame(m.sc.c, m.typ, m.payload)
		m.sc.wmu.Unlock()
		if err != nil {
			m.sc.c.Close() // its reader ends and reports the loss
		}
	}
}

func errorMsg(sc *sconn, id uint64, kind byte, msg string) out {
	var e enc
	e.u64(id)
	e.u8(kind)
	e.str(msg)
	return out{sc, mError, e.b}
}

func (s *Server) serveConn(sc *sconn) {
	defer s.wg.Done()
	defer sc.c.Close()
	_ = sc.c.SetReadDeadline(time.Now().Add(helloTimeout))
	if !s.admit(sc) {
		return
	}
	for {
		f, err := readFrame(sc.c)
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				s.send([]out{errorMsg(sc, 0, ekProtocol, err.Error())})
			}
			s.dropped(sc, err)
			return
		}
		stop := s.handle(sc, f)
		if stop {
			s.dropped(sc, nil)
			return
		}
	}
}

// admit runs the secret handshake of a new connection (auth.go) and then joins its rank
// (handle's mHello); false: the connection was refused and dropped. A refusal for a malformed
// frame or a failed proof is counted and logged (Rejected).
func (s *Server) admit(sc *sconn) bool {
	f, err := readFrame(sc.c)
	if err == nil && f.typ != mHello {
		err = fmt.Errorf("%w: message type %d before hello", ErrProtocol, f.typ)
	}
	var h hello
	if err == nil {
		h, err = decodeHello(f.payload)
	}
	if err == nil {
		sNonce := secret.Nonce()
		ch := makeChallenge(s.key, s.keyed, &h, sNonce)
		s.send([]out{{sc, mChallenge, ch.encode()}})
		var a frame
		a, err = readFrame(sc.c)
		if err == nil && a.typ != mAuth {
			err = fmt.Errorf("%w: message type %d instead of the hello's proof", ErrProtocol, a.typ)
		}
		if err == nil {
			err = checkAuth(s.key, s.keyed, &h, sNonce, a.payload)
		}
	}
	if err != nil {
		switch {
		case errors.Is(err, ErrAuth):
			s.send([]out{errorMsg(sc, 0, ekAuth, err.Error())})
			s.rejected(sc.c.RemoteAddr().String(), err)
		case errors.Is(err, ErrProtocol):
			s.send([]out{errorMsg(sc, 0, ekProtocol, err.Error())})
			s.rejected(sc.c.RemoteAddr().String(), err)
		case errors.Is(err, io.ErrUnexpectedEOF): // a truncated frame; a plain EOF is a probe
			s.rejected(sc.c.RemoteAddr().String(), err)
		}
		s.dropped(sc, err)
		return false
	}
	stop := s.handle(sc, f)
	if stop {
		s.dropped(sc, nil)
		return false
	}
	return true
}

// handle processes one frame from sc and sends what it produced; stop closes the connection.
func (s *Server) handle(sc *sconn, f frame) (stop bool) {
	s.mu.Lock()
	msgs, stop := s.handleLocked(sc, f)
	s.sendUnlock(msgs)
	return stop
}

// handleLocked processes one frame from sc under s.mu and returns the frames to send.
func (s *Server) handleLocked(sc *sconn, f frame) (msgs []out, stop bool) {
	d := dec{b: f.payload}
	now := time.Now()
	if sc.rank < 0 && f.typ != mHello {
		return []out{errorMsg(sc, 0, ekProtocol, fmt.Sprintf("message type %d before hello", f.typ))}, true
	}
	if sc.rank >= 0 && sc.inc <= s.failedInc[sc.rank] {
		// A late frame of an incarnation declared failed (a stopped rank resumed): ignored, and
		// its connection closed; it was told (mPeerFailed of its own rank).
		s.log.Debug().Int("peer", sc.rank).Uint64("incarnation", sc.inc).Msg("rendezvous: frame of a failed rank ignored")
		return nil, true
	}
	if sc.rank >= 0 {
		s.det.heard(sc.rank, now)
	}
	switch f.typ {
	case mPing:
		token := d.u64()
		if err := d.done(); err != nil {
			return []out{errorMsg(sc, 0, ekProtocol, "malformed heartbeat")}, true
		}
		var e enc
		e.u64(token)
		return []out{{sc, mPong, e.b}}, false // the rank is a member: it may go on

	case mHello:
		h, err := decodeHello(f.payload)
		if err != nil {
			return []out{errorMsg(sc, 0, ekProtocol, err.Error())}, true
		}
		rank, size := h.rank, h.size
		switch {
		case sc.rank >= 0:
			return []out{errorMsg(sc, 0, ekProtocol, "second hello")}, true
		case s.failed != nil:
			return []out{errorMsg(sc, 0, ekLost, s.failed.Error())}, true
		case size != s.size:
			return []out{errorMsg(sc, 0, ekRefused, fmt.Sprintf("rank %d says the job has %d ranks, the rendezvous serves %d", rank, size, s.size))}, true
		case rank < 0 || rank >= s.size:
			return []out{errorMsg(sc, 0, ekRefused, fmt.Sprintf("rank %d outside [0, %d)", rank, s.size))}, true
		case s.ranks[rank] != nil || s.hasLeft[rank]:
			return []out{errorMsg(sc, 0, ekRefused, fmt.Sprintf("rank %d joined twice", rank))}, true
		}
		sc.rank = rank
		s.incarnations++
		sc.inc = s.incarnations
		s.ranks[rank] = sc
		s.joined++
		s.det.join(rank, now)
		_ = sc.c.SetReadDeadline(time.Time{})
		var e enc
		e.str(s.jobID)
		e.u64(uint64(s.failTimeout))
		e.u64(uint64(s.partTimeout))
		e.bytes(welcomeSecret(s.key, s.keyed))
		s.log.Debug().Int("peer", rank).Int("joined", s.joined).Msg("rendezvous: rank joined")
		return []out{{sc, mWelcome, e.b}}, false

	case mGather:
		id, seq, data := d.u64(), d.u64(), d.bytes()
		if err := d.done(); err != nil {
			return []out{errorMsg(sc, 0, ekProtocol, err.Error())}, true
		}
		if s.failed != nil {
			return []out{errorMsg(sc, id, ekLost, s.failed.Error())}, false
		}
		if seq != s.entered[sc.rank] {
			return []out{errorMsg(sc, id, ekProtocol, fmt.Sprintf("rank %d entered collective #%d, expected #%d", sc.rank, seq, s.entered[sc.rank]))}, true
		}
		s.entered[sc.rank]++
		g := s.gathers[seq]
		if g == nil {
			g = &gatherState{parts: make([][]byte, s.size), ids: make([]uint64, s.size), have: make([]bool, s.size)}
			s.gathers[seq] = g
		}
		if g.have[sc.rank] {
			return []out{errorMsg(sc, id, ekProtocol, fmt.Sprintf("rank %d entered collective #%d twice", sc.rank, seq))}, true
		}
		g.parts[sc.rank], g.ids[sc.rank], g.have[sc.rank] = data, id, true
		g.n++
		if g.n < s.size {
			return nil, false
		}
		delete(s.gathers, seq)
		var body enc
		body.list(g.parts)
		for r := range s.size {
			var e enc
			e.u64(g.ids[r])
			e.u64(seq)
			e.b = append(e.b, body.b...)
			if s.ranks[r] != nil {
				msgs = append(msgs, out{s.ranks[r], mGatherResult, e.b})
			}
		}
		return msgs, false

	case mPut:
		id, key, val := d.u64(), d.str(), d.bytes()
		if err := d.done(); err != nil {
			return []out{errorMsg(sc, 0, ekProtocol, err.Error())}, true
		}
		s.kv[key] = val
		var e enc
		e.u64(id)
		msgs = append(msgs, out{sc, mPutAck, e.b})
		for _, g := range s.getters[key] {
			var v enc
			v.u64(g.id)
			v.bytes(val)
			msgs = append(msgs, out{g.sc, mValue, v.b})
		}
		delete(s.getters, key)
		return msgs, false

	case mGet:
		id, key := d.u64(), d.str()
		if err := d.done(); err != nil {
			return []out{errorMsg(sc, 0, ekProtocol, err.Error())}, true
		}
		if val, ok := s.kv[key]; ok {
			var e enc
			e.u64(id)
			e.bytes(val)
			return []out{{sc, mValue, e.b}}, false
		}
		s.getters[key] = append(s.getters[key], getter{sc, id})
		return nil, false

	case mStatus:
		id, seq := d.u64(), d.u64()
		if err := d.done(); err != nil {
			return []out{errorMsg(sc, 0, ekProtocol, err.Error())}, true
		}
		var e enc
		e.u64(id)
		e.u64(seq)
		missing := s.missingLocked(seq)
		e.u32(uint32(len(missing)))
		for _, r := range missing {
			e.u32(uint32(r))
		}
		return []out{{sc, mStatusReply, e.b}}, false

	case mBye:
		id := d.u64()
		if err := d.done(); err != nil {
			return []out{errorMsg(sc, 0, ekProtocol, err.Error())}, true
		}
		sc.bye = true
		s.det.bye(sc.rank)
		var e enc
		e.u64(id)
		return []out{{sc, mByeAck, e.b}}, false
	}
	return []out{errorMsg(sc, 0, ekProtocol, fmt.Sprintf("unexpected message type %d", f.typ))}, true
}

// dropped records the end of sc's connection; a joined rank that did not say goodbye fails
// the job.
func (s *Server) dropped(sc *sconn, cause error) {
	var msgs []out
	s.mu.Lock()
	delete(s.conns, sc)
	for key, gs := range s.getters {
		kept := gs[:0]
		for _, g := range gs {
			if g.sc != sc {
				kept = append(kept, g)
			}
		}
		s.getters[key] = kept
	}
	if sc.rank >= 0 && s.ranks[sc.rank] == sc {
		r := sc.rank
		s.ranks[r] = nil
		s.hasLeft[r] = true
		s.left++
		select {
		case <-s.closed:
		default:
			if reason, ok := s.det.closed(r); ok {
				s.log.Debug().Int("peer", r).Err(cause).Msg("rendezvous: connection closed before goodbye")
				switch {
				case s.exits == nil:
					msgs = s.declareLocked(&PeerFailure{Rank: r, Reason: reason})
				case s.exits.closed(r, time.Now()):
					msgs = s.declareLocked(&PeerFailure{Rank: r, Reason: reason, Exit: s.exits.status[r]})
				default:
					// Hold the notice for the exit status; the timer sends it without.
					s.nextTimer++
					id := s.nextTimer
					s.wg.Add(1)
					s.exitTimers[id] = time.AfterFunc(s.exits.bound, func() { s.exitWaitDue(id) })
				}
			}
		}
		if s.left == s.size {
			close(s.done)
		}
	}
	s.sendUnlock(msgs)
}
