package rma

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/rma/transport"
)

// The adaptive transport's driver (GOARMCI_NET_TRANSPORT=adaptive, [Takagi15 §3]): the thin
// I/O side of the pure cores of package transport. Every network peer starts on the shared
// datagram path (netpath.go). Operations count themselves per peer (two atomic adds, peer.count);
// about once a second (half the statistics window) the driver feeds the counts to the
// Selector, asks it for decisions (Evaluate: FIND_MAP over the window and its second half, the
// threshold γ, at most h RC connections, eviction of idle ones) and carries them out through
// each peer's Switch:
//
//   - a promotion dials the peer's RC connection on demand through the UD connection manager
//     (hybridft.OnDemand; a pooled one is reused), then suspends the peer's operations (its gate),
//     drains the ones already issued on the shared path, switches the peer's channel and resumes;
//   - a demotion drains the same way back to the shared path, its RC connection pooled or, with
//     Close, torn down by agreement of both ends (OnDemand.Disconnect: the peer drains its own
//     use of the connection first);
//   - the target side of the bound: a peer's dial is admitted only while this rank has room for
//     one more connection or an idle pooled one to give up (Selector.Admit); a refused dial
//     leaves the dialer on the shared path ([Takagi15 §3.4]).
//
// The Switch core tracks operations by id; the driver keeps their number instead (the peer's
// outstanding operations), so the core's drain step is the driver's wait for that number to
// reach zero under the closed gate — the same order: no operation on the new path before every
// earlier one on the old path completed.
type adaptive struct {
	r      *Runtime
	period time.Duration // between evaluations

	mu     sync.Mutex // sel, sw, last, queued, rels
	sel    *transport.Selector
	sw     []*transport.Switch // per rank; nil for this rank and same-node peers
	last   []adLast
	queued []transport.Decision // from Admit (evictions to make room), carried out at the next evaluation
	rels   []adRelease          // peers that asked to close their connection to this rank

	wake   chan struct{} // a release is queued
	cancel context.CancelFunc
	done   chan struct{}

	promotions, demotions, closes, refusals atomic.Int64
}

// adLast is what the driver read of a peer at the previous evaluation.
type adLast struct {
	msgs, bytes int64
	in          uint64 // requests the peer's RC connection executed here (its use of the connection)
}

// adRelease is a peer's request to close its connection to this rank (the passive side of a
// disconnect): done answers it once this rank has stopped using and closed the connection.
type adRelease struct {
	peer int
	done func()
}

// dialTimeout bounds a promotion's dial: a peer that does not answer stays on the shared path.
const dialTimeout = 10 * time.Second

// newAdaptive builds the driver from the environment's selection knobs (GOARMCI_MAX_RC,
// GOARMCI_RC_WINDOW, GOARMCI_RC_GAMMA, GOARMCI_RC_IDLE_TIMEOUT). Errors wrap ErrConfig.
func newAdaptive(r *Runtime) (*adaptive, error) {
	ec := r.cfg.env.cfg
	cfg := transport.DefaultConfig()
	cfg.MaxRC, cfg.Window, cfg.Gamma, cfg.IdleTimeout = ec.MaxRC, ec.RCWindow, ec.RCGamma, ec.RCIdleTimeout
	sel, err := transport.NewSelector(r.size, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return &adaptive{r: r, period: max(cfg.Window/2, time.Millisecond), sel: sel,
		sw: make([]*transport.Switch, r.size), last: make([]adLast, r.size), wake: make(chan struct{}, 1)}, nil
}

// hook installs the admission and release callbacks on the connection manager's on-demand
// setup, right after it is created (before any peer can dial).
func (a *adaptive) hook(od *hybridft.OnDemand) {
	od.SetAdmit(a.admit)
	od.SetRelease(a.release)
}

// start begins the evaluations once every peer's shared-path channel exists (end of connect).
func (a *adaptive) start() {
	for p, pe := range a.r.peers {
		if p != a.r.rank && pe.dc != nil {
			a.sw[p] = transport.NewSwitch(transport.PathShared)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan struct{})
	go a.run(ctx)
}

// stop ends the driver and waits for it (teardown, before the channels close).
func (a *adaptive) stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	<-a.done
	a.cancel = nil
}

func (a *adaptive) run(ctx context.Context) {
	defer close(a.done)
	t := time.NewTicker(a.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
			a.releaseQueued(ctx)
		case <-t.C:
			a.releaseQueued(ctx)
			a.evaluate(ctx)
		}
	}
}

// evaluate feeds the counts since the last evaluation to the selector and carries out its
// decisions.
//
// Every call into the selector takes the time under a.mu (time.Now inside the lock): the
// selector refuses a time before one it has seen, and the admission callback calls it too.
func (a *adaptive) evaluate(ctx context.Context) {
	a.mu.Lock()
	now := time.Now()
	for p, pe := range a.r.peers {
		if a.sw[p] == nil {
			continue
		}
		l := &a.last[p]
		m, b := pe.sent.Load(), pe.sentBytes.Load()
		if m > l.msgs {
			_ = a.sel.RecordBatch(p, m-l.msgs, b-l.bytes, now)
		}
		l.msgs, l.bytes = m, b
		if in := a.received(pe); in != l.in {
			l.in = in
			_ = a.sel.Incoming(p, now)
		}
	}
	decs, err := a.sel.Evaluate(now)
	if err != nil {
		a.r.log.Warn().Err(err).Msg("rma: adaptive transport: evaluation")
	}
	decs = append(a.queued, decs...)
	a.queued = nil
	a.mu.Unlock()
	for _, d := range decs {
		a.apply(ctx, d)
	}
}

// received is how many requests the peer's RC connection has executed here (any change means
// the peer uses it), 0 without one.
func (a *adaptive) received(pe *peer) uint64 {
	rc := a.r.rcOf(pe)
	if rc == nil {
		return 0
	}
	var n uint64
	for _, c := range rc.Subchannels() {
		n += c.QP().Counters().MessagesReceived
	}
	return n
}

// apply carries out one decision of the selector.
func (a *adaptive) apply(ctx context.Context, d transport.Decision) {
	if d.Peer < 0 || d.Peer >= len(a.sw) || a.sw[d.Peer] == nil {
		return
	}
	pe := a.r.peers[d.Peer]
	switch d.Action {
	case transport.Promote:
		a.promotions.Add(1)
		a.step(ctx, pe, transport.Event{Kind: transport.SwitchRequested, To: transport.PathRC})
	case transport.Demote:
		a.demotions.Add(1)
		a.step(ctx, pe, transport.Event{Kind: transport.SwitchRequested, To: transport.PathShared})
		if d.Close {
			a.disconnect(ctx, pe)
		}
	case transport.Evict:
		a.disconnect(ctx, pe)
	}
}

// step feeds e to pe's Switch and carries out the actions, and those of the events they lead to.
func (a *adaptive) step(ctx context.Context, pe *peer, e transport.Event) {
	events := []transport.Event{e}
	for len(events) > 0 {
		e, events = events[0], events[1:]
		a.mu.Lock()
		acts, err := a.sw[pe.rank].Step(e)
		a.mu.Unlock()
		if err != nil {
			a.r.log.Debug().Err(err).Int("peer", pe.rank).Msg("rma: adaptive transport: switch")
			continue
		}
		for _, act := range acts {
			switch act.Kind {
			case transport.ActConnect:
				if err := a.connect(ctx, pe); err != nil {
					a.refusals.Add(1)
					a.r.log.Debug().Err(err).Int("peer", pe.rank).Msg("rma: adaptive transport: RC connection refused or failed")
					a.mu.Lock()
					_ = a.sel.ConnFailed(pe.rank, time.Now())
					a.mu.Unlock()
					events = append(events, transport.Event{Kind: transport.ConnFailed})
				} else {
					events = append(events, transport.Event{Kind: transport.ConnReady})
				}
			case transport.ActSuspend:
				a.r.drainPeer(pe)
			case transport.ActSwitch:
				ch := pe.dc
				if rc := a.r.rcOf(pe); act.To == transport.PathRC && rc != nil {
					ch = rc
				}
				pe.ch.Store(ch)
			case transport.ActResume:
				pe.gate.Store(false)
			}
		}
	}
}

// connect makes sure pe has an RC connection: a pooled one, or one dialled now.
func (a *adaptive) connect(ctx context.Context, pe *peer) error {
	if a.r.rcOf(pe) != nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if _, err := a.r.nets[pe.net].od.Dial(dctx, uint32(pe.rank), pe.odAddr); err != nil {
		return fmt.Errorf("%w: connecting to rank %d: %w", ErrTransport, pe.rank, err)
	}
	if a.r.rcOf(pe) == nil {
		return fmt.Errorf("%w: rank %d: connection not installed", ErrTransport, pe.rank)
	}
	return nil
}

// install is the accept callback of an RC connection to pe (either side dialled; r.odMu held):
// it becomes pe's pooled RC channel. reject closes conns with a reason.
func (a *adaptive) install(pe *peer, conns []*hybridft.Conn, reject func(string)) {
	if pe.rc != nil {
		reject("already connected")
		return
	}
	ch, err := a.r.nets[pe.net].net.NewChannelConfig(a.r.channelConfig(), conns...)
	if err != nil {
		reject(err.Error())
		return
	}
	pe.rc = ch
}

// disconnect closes pe's RC connection by agreement of both ends (this rank already moved its
// operations to the shared path).
func (a *adaptive) disconnect(ctx context.Context, pe *peer) {
	rc, od := a.r.rcOf(pe), a.r.nets[pe.net].od
	if rc == nil || od == nil {
		return
	}
	if pe.ch.Load() == rc { // never: the selector demotes before it closes
		a.r.drainPeer(pe)
		pe.ch.Store(pe.dc)
		pe.gate.Store(false)
	}
	// Forget the connection first: the peer may dial again, and its accept install a new one,
	// before Disconnect returns.
	a.r.odMu.Lock()
	if pe.rc == rc {
		pe.rc = nil
	}
	a.r.odMu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	err := od.Disconnect(dctx, uint32(pe.rank))
	cancel()
	if err != nil {
		a.r.log.Debug().Err(err).Int("peer", pe.rank).Msg("rma: adaptive transport: disconnect")
	}
	_ = rc.Close()
	a.closes.Add(1)
}

// admit is the connection manager's admission callback (its goroutine; must not block): the
// target's half of the bound h.
func (a *adaptive) admit(peer uint32) bool {
	p := int(peer)
	a.mu.Lock()
	defer a.mu.Unlock()
	if p < 0 || p >= len(a.sw) || a.sw[p] == nil {
		return false
	}
	ok, decs, err := a.sel.Admit(p, time.Now())
	if err != nil || !ok {
		return false
	}
	a.queued = append(a.queued, decs...)
	return true
}

// release is the connection manager's callback when a peer asks to close its connection to this
// rank (its goroutine; must not block): the driver moves this rank's operations to the peer off
// the connection, closes it and answers.
func (a *adaptive) release(peer uint32, _ []*hybridft.Conn, done func()) {
	a.mu.Lock()
	a.rels = append(a.rels, adRelease{peer: int(peer), done: done})
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// releaseQueued answers the peers' close requests.
func (a *adaptive) releaseQueued(ctx context.Context) {
	a.mu.Lock()
	rels := a.rels
	a.rels = nil
	a.mu.Unlock()
	for _, rel := range rels {
		if rel.peer >= 0 && rel.peer < len(a.sw) && a.sw[rel.peer] != nil {
			pe := a.r.peers[rel.peer]
			a.step(ctx, pe, transport.Event{Kind: transport.SwitchRequested, To: transport.PathShared})
			a.r.odMu.Lock()
			rc := pe.rc
			pe.rc = nil
			a.r.odMu.Unlock()
			if rc != nil {
				_ = rc.Close()
			}
			a.mu.Lock()
			if err := a.sel.Closed(rel.peer, time.Now()); err != nil && !errors.Is(err, transport.ErrBadEvent) {
				a.r.log.Debug().Err(err).Int("peer", rel.peer).Msg("rma: adaptive transport: closed")
			}
			a.mu.Unlock()
		}
		rel.done()
	}
}

// AdaptiveStats counts the adaptive transport's decisions on this rank (GOARMCI_NET_TRANSPORT=
// adaptive; zero otherwise).
type AdaptiveStats struct {
	Promotions int64 `json:"promotions"` // peers moved to a dedicated RC connection (or tried)
	Demotions  int64 `json:"demotions"`  // peers moved back to the shared path
	Closes     int64 `json:"closes"`     // RC connections this rank closed (evictions, demotions with close)
	Refusals   int64 `json:"refusals"`   // promotions whose connection was refused or failed
	OpenRC     int   `json:"open_rc"`    // RC connections open now (in use or pooled)
	OnRC       []int `json:"on_rc"`      // the peers whose operations go on their RC connection now
}

// Adaptive returns the adaptive transport's counters and the peers on RC now.
func (r *Runtime) Adaptive() AdaptiveStats {
	a := r.ad
	if a == nil {
		return AdaptiveStats{}
	}
	st := AdaptiveStats{Promotions: a.promotions.Load(), Demotions: a.demotions.Load(),
		Closes: a.closes.Load(), Refusals: a.refusals.Load()}
	r.odMu.Lock()
	for p, pe := range r.peers {
		if pe.rc != nil {
			st.OpenRC++
			if pe.ch.Load() == pe.rc {
				st.OnRC = append(st.OnRC, p)
			}
		}
	}
	r.odMu.Unlock()
	return st
}
