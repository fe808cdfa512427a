package transport

import (
	"fmt"
	"slices"
	"time"
)

// Action is what a Decision asks the driver to do for one peer.
type Action uint8

const (
	// Promote moves the peer to a dedicated RC connection: a pooled one when Decision.Reuse,
	// else a new one (Switch: SwitchRequested(PathRC)).
	Promote Action = iota + 1
	// Demote moves the peer back to the shared path (SwitchRequested(PathShared)); its RC
	// connection stays in the pool unless Decision.Close.
	Demote
	// Evict closes the peer's pooled RC connection, which carries nothing (the peer is on the
	// shared path).
	Evict
)

func (a Action) String() string {
	switch a {
	case Promote:
		return "promote"
	case Demote:
		return "demote"
	case Evict:
		return "evict"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Decision is one change for one peer.
type Decision struct {
	Peer   int
	Action Action
	Reuse  bool // Promote: the peer's connection is in the pool, no setup needed
	Close  bool // Demote: close the connection once the switch to the shared path is done
}

// conn is the state of a peer's RC connection in the pool.
type conn uint8

const (
	connNone   conn = iota // no RC connection
	connInUse              // open and carrying the peer's operations
	connPooled             // open, the peer on the shared path: reused if it is promoted again
)

// Selector chooses, per peer, a dedicated RC connection or the shared path [Takagi15 §3.2–3.4]:
// it keeps the peers' statistics (Record), and Evaluate, called about once a second, runs
// FindMap over the last window and over its second half, adopts the better mapping if it
// saves more than γ per message over the current one, and keeps at most h RC connections open,
// reusing pooled ones and evicting idle ones. Not safe for concurrent use; the driver
// serializes. Memory: a fixed record per peer (Stats) and one byte of connection state.
type Selector struct {
	cfg   Config
	stats *Stats
	conns []conn
	since []time.Time // when each connection entered its state (pooled: its idle time's start)
	// remote is when the peer last used the connection (Incoming): a connection the peer uses
	// is not idle even if this rank sends nothing on it.
	remote []time.Time
	// retry is when a peer whose connection failed or was refused may be promoted again.
	retry []time.Time
	open  int       // connections in the pool, in use or not
	now   time.Time // latest Evaluate
}

// NewSelector returns a selector for peers 0..peers-1, every one on the shared path. Errors wrap
// ErrBadConfig.
func NewSelector(peers int, cfg Config) (*Selector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := NewStats(peers, cfg.Window)
	if err != nil {
		return nil, err
	}
	return &Selector{cfg: cfg, stats: st, conns: make([]conn, peers), since: make([]time.Time, peers),
		remote: make([]time.Time, peers), retry: make([]time.Time, peers)}, nil
}

// Record counts one operation of n bytes to peer at now (Stats.Record).
func (s *Selector) Record(peer int, n int64, now time.Time) error {
	return s.RecordBatch(peer, 1, n, now)
}

// RecordBatch counts msgs operations of bytes bytes in all to peer at now (Stats.RecordBatch).
func (s *Selector) RecordBatch(peer int, msgs, bytes int64, now time.Time) error {
	if now.Before(s.now) {
		return fmt.Errorf("%w: %v before %v", ErrBadTime, now, s.now)
	}
	return s.stats.RecordBatch(peer, msgs, bytes, now)
}

// Stats returns the selector's statistics (read them; feed them through Record).
func (s *Selector) Stats() *Stats { return s.stats }

// OnRC reports whether peer is mapped to a dedicated RC connection.
func (s *Selector) OnRC(peer int) bool {
	return peer >= 0 && peer < len(s.conns) && s.conns[peer] == connInUse
}

// Open returns the number of RC connections open (in use or pooled), never above h.
func (s *Selector) Open() int { return s.open }

// Incoming tells the selector that peer used its RC connection to this rank at now (the
// target's view of the connection), so the connection is not idle. Errors (ErrBadPeer,
// ErrBadTime) change nothing; a peer without a connection is ignored.
func (s *Selector) Incoming(peer int, now time.Time) error {
	if err := s.check(peer, now); err != nil {
		return err
	}
	if s.conns[peer] != connNone {
		s.remote[peer] = now
	}
	return nil
}

// Admit is the target's half of the bound h: peer asks for an RC connection to this rank (it
// was promoted there). It is accepted if this rank already has the connection, if the pool has
// room, or if a pooled connection idle at both ends (unused here, and by its peer within the
// window) can be closed for it (an Evict decision, returned); otherwise it is refused, and the
// peer's driver reports ConnFailed there. An accepted connection is pooled here: this rank's own
// operations to peer keep their path until Evaluate promotes it. Errors (ErrBadPeer,
// ErrBadTime) change nothing.
func (s *Selector) Admit(peer int, now time.Time) (bool, []Decision, error) {
	if err := s.check(peer, now); err != nil {
		return false, nil, err
	}
	if s.conns[peer] != connNone {
		s.remote[peer] = now
		return true, nil, nil
	}
	var out []Decision
	if s.open >= s.cfg.MaxRC {
		v := s.lruPooled(now)
		if v < 0 {
			return false, nil, nil
		}
		out = s.closePooled(nil, v)
	}
	s.open++
	s.conns[peer], s.since[peer], s.remote[peer] = connPooled, now, now
	return true, out, nil
}

// ConnFailed tells the selector that peer's RC connection failed or was refused by the peer
// (Admit there): it leaves the pool, the peer is on the shared path (the driver's Switch has
// moved it), and it is not promoted again before the idle timeout has passed. Errors
// (ErrBadPeer, ErrBadTime, ErrBadEvent: no connection) change nothing.
func (s *Selector) ConnFailed(peer int, now time.Time) error {
	if err := s.drop(peer, now); err != nil {
		return err
	}
	s.retry[peer] = now.Add(s.cfg.IdleTimeout)
	return nil
}

// Closed tells the selector that peer closed its RC connection to this rank (an Evict or a
// Demote with Close there): it leaves the pool, and the peer is on the shared path (the
// driver's Switch, fed ConnFailed, has moved it). Errors as ConnFailed.
func (s *Selector) Closed(peer int, now time.Time) error { return s.drop(peer, now) }

func (s *Selector) drop(peer int, now time.Time) error {
	if err := s.check(peer, now); err != nil {
		return err
	}
	if s.conns[peer] == connNone {
		return fmt.Errorf("%w: peer %d has no RC connection", ErrBadEvent, peer)
	}
	s.conns[peer] = connNone
	s.open--
	return nil
}

// Evaluate decides the changes at now [Takagi15 §3.4]:
//
//  1. A connection that carried nothing, from this rank (Record) or from its peer (Incoming,
//     Admit), for longer than the idle timeout is evicted (Demote with Close if the peer was on
//     it, else Evict); that peer is not a candidate this round.
//  2. FindMap runs over the window and over its second half (the paper's extended and shrunk
//     windows, T2–T3); for each, g is its reduction minus that of the current mapping over the
//     same traffic, per message. The mapping with the larger g is adopted if g > γ (T4).
//  3. Peers leaving RC are demoted (their connections pooled); peers entering it are promoted,
//     reusing their pooled connection or opening one, for which a full pool gives up its least
//     recently used connection that its peer does not use either; when there is none, the
//     peer stays on the shared path.
//
// Decisions come in the order the driver must carry them out: evictions and demotions before
// promotions, so a connection closes before the one that replaces it opens and at most h are
// ever open. Errors (ErrBadTime) change nothing.
func (s *Selector) Evaluate(now time.Time) ([]Decision, error) {
	if now.Before(s.now) || now.Before(s.stats.now) {
		return nil, fmt.Errorf("%w: evaluation at %v after %v", ErrBadTime, now, later(s.now, s.stats.now))
	}
	s.now = now
	var out []Decision
	idle := make([]bool, len(s.conns))
	for p, c := range s.conns {
		if c == connNone || now.Sub(s.lastUse(p)) <= s.cfg.IdleTimeout {
			continue
		}
		idle[p] = true
		if c == connInUse {
			out = append(out, Decision{Peer: p, Action: Demote, Close: true})
		} else {
			out = append(out, Decision{Peer: p, Action: Evict})
		}
		s.conns[p] = connNone
		s.open--
	}

	next, ok := s.bestMapping(now, idle)
	if !ok {
		return out, nil
	}
	in := make([]bool, len(s.conns))
	for _, p := range next {
		in[p] = true
	}
	for p, c := range s.conns {
		if c == connInUse && !in[p] {
			out = append(out, Decision{Peer: p, Action: Demote})
			s.conns[p], s.since[p] = connPooled, now
		}
	}
	for _, p := range next {
		switch s.conns[p] {
		case connInUse:
			continue
		case connPooled:
			out = append(out, Decision{Peer: p, Action: Promote, Reuse: true})
		case connNone:
			if s.open >= s.cfg.MaxRC {
				// Every pooled connection is in use by its peer: this one stays shared.
				v := s.lruPooled(now)
				if v < 0 {
					continue
				}
				out = s.closePooled(out, v)
			}
			s.open++
			out = append(out, Decision{Peer: p, Action: Promote})
		}
		s.conns[p], s.since[p] = connInUse, now
	}
	slices.SortStableFunc(out, func(a, b Decision) int {
		return boolInt(a.Action == Promote) - boolInt(b.Action == Promote)
	})
	return out, nil
}

// bestMapping returns the RC peers of the better of FindMap over the window and over its second
// half, and false when neither saves more than γ per message over the current mapping.
func (s *Selector) bestMapping(now time.Time, skip []bool) ([]int, bool) {
	var cur []int
	for p, c := range s.conns {
		if c == connInUse {
			cur = append(cur, p)
		}
	}
	var best []int
	bestG := float64(s.cfg.Gamma)
	for _, span := range []time.Duration{s.stats.window, s.stats.window / 2} {
		msgs := make([]int64, len(s.conns))
		var total int64
		var cands []Candidate
		for p := range s.conns {
			if skip[p] || now.Before(s.retry[p]) {
				continue
			}
			msgs[p] = s.stats.RecentAt(p, now, span).Msgs
			total += msgs[p]
			if msgs[p] > 0 {
				cands = append(cands, Candidate{Peer: p, Msgs: msgs[p], Setup: s.setup(p)})
			}
		}
		if total == 0 {
			continue
		}
		rc, gain := FindMap(s.cfg.Costs, cands, s.cfg.MaxRC)
		if g := (gain - mappingGain(s.cfg.Costs, msgs, cur)) / float64(total); g > bestG {
			best, bestG = rc, g
		}
	}
	return best, best != nil
}

// setup is what giving peer a dedicated connection costs now.
func (s *Selector) setup(p int) time.Duration {
	switch s.conns[p] {
	case connInUse:
		return 0
	case connPooled:
		return s.cfg.Costs.Reuse
	}
	return s.cfg.Costs.Setup
}

// lastUse is the latest of the peer's last message, the peer's last use of the connection and
// the start of its connection's state.
func (s *Selector) lastUse(p int) time.Time {
	return later(later(s.stats.Last(p), s.since[p]), s.remote[p])
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// check validates an event's peer and time against every time already seen.
func (s *Selector) check(peer int, now time.Time) error {
	if now.Before(s.now) {
		return fmt.Errorf("%w: %v before %v", ErrBadTime, now, s.now)
	}
	return s.stats.check(peer, now)
}

// lruPooled returns the pooled connection idle the longest that the peer has not used within
// the window either (-1 if none): a connection the peer uses is not taken from it for another.
func (s *Selector) lruPooled(now time.Time) int {
	v := -1
	for p, c := range s.conns {
		if c != connPooled || now.Sub(s.remote[p]) < s.cfg.Window {
			continue
		}
		if v < 0 || s.lastUse(p).Before(s.lastUse(v)) {
			v = p
		}
	}
	return v
}

// closePooled takes pooled connection v out of the pool: a Demote decided in this round gets
// Close, otherwise an Evict is added.
func (s *Selector) closePooled(out []Decision, v int) []Decision {
	s.conns[v] = connNone
	s.open--
	for i := range out {
		if out[i].Peer == v && out[i].Action == Demote {
			out[i].Close = true
			return out
		}
	}
	return append(out, Decision{Peer: v, Action: Evict})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
