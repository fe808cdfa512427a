// Package rmatest runs several rma ranks inside one test process: each rank is a goroutine with
// its own Runtime, devices and connections, joined by an in-process bootstrap; RunFabric and
// StartFabric put one rank on each node of the simulated network ibv/fabric.
package rmatest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/goarmci/goarmci/internal/secret"
)

// ErrClosed: the group was closed while a collective was in progress.
var ErrClosed = errors.New("rmatest: bootstrap group closed")

// Group is an in-process bootstrap shared by n ranks (rma.Bootstrap for each rank via Member).
type Group struct {
	n      int
	mu     sync.Mutex
	cond   *sync.Cond
	round  int
	data   [][]byte
	filled int
	result [][]byte
	closed bool
	secret []byte // the job's (rma.JobSecreter)

	failMu   sync.Mutex
	failed   map[int]error                 // injected failures, by rank
	watchers []func(rank int, cause error) // members' OnPeerFailure callbacks
}

// NewGroup creates a bootstrap group of n ranks.
func NewGroup(n int) *Group {
	k, _ := secret.New() // crypto/rand.Read does not fail (Go ≥ 1.24)
	g := &Group{n: n, data: make([][]byte, n), secret: k.Bytes()}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Fail declares rank failed to every member (rma.FailureDetector), as the real bootstrap does
// when a rank's process ends before Finalize: cause is what the members' errors say (nil: "rank
// N exited before Finalize"). The failed rank's own member is told too (a rank declared failed
// learns it), so none of the group's ranks waits for it. Each rank is declared once.
func (g *Group) Fail(rank int, cause error) {
	if cause == nil {
		cause = fmt.Errorf("rank %d exited before Finalize", rank)
	}
	g.failMu.Lock()
	if g.failed == nil {
		g.failed = map[int]error{}
	}
	if _, ok := g.failed[rank]; ok {
		g.failMu.Unlock()
		return
	}
	g.failed[rank] = cause
	ws := append([]func(int, error){}, g.watchers...)
	g.failMu.Unlock()
	for _, w := range ws {
		w(rank, cause)
	}
}

// Failed reports whether some rank was declared failed (Fail).
func (g *Group) Failed() bool {
	g.failMu.Lock()
	defer g.failMu.Unlock()
	return len(g.failed) > 0
}

// Member is rank's view of the group.
func (g *Group) Member(rank int) *Member { return &Member{g: g, rank: rank} }

// Close wakes every rank blocked in a collective with ErrClosed.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.cond.Broadcast()
	g.mu.Unlock()
}

// Member implements rma.Bootstrap for one rank.
type Member struct {
	g    *Group
	rank int
}

func (m *Member) Rank() int { return m.rank }
func (m *Member) Size() int { return m.g.n }

// JobSecret is the group's secret, made at NewGroup (rma.JobSecreter): the ranks' tcp streams
// and CM messages are authenticated with it as in a launched job.
func (m *Member) JobSecret() []byte { return m.g.secret }

// AllGather contributes data and returns every rank's contribution.
func (m *Member) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	g := m.g
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.data[m.rank] != nil {
		return nil, fmt.Errorf("rmatest: rank %d entered a collective twice", m.rank)
	}
	round := g.round
	g.data[m.rank] = append([]byte{}, data...)
	g.filled++
	if g.filled == g.n {
		g.result = g.data
		g.data = make([][]byte, g.n)
		g.filled = 0
		g.round++
		g.cond.Broadcast()
	}
	for g.round == round {
		if g.closed {
			return nil, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g.cond.Wait()
	}
	return g.result, nil
}

// Barrier is an AllGather of nothing.
func (m *Member) Barrier(ctx context.Context) error {
	_, err := m.AllGather(ctx, nil)
	return err
}

// OnPeerFailure registers f for the failures the group declares (Fail); it makes Member an
// rma.FailureDetector.
func (m *Member) OnPeerFailure(f func(rank int, cause error)) {
	g := m.g
	g.failMu.Lock()
	g.watchers = append(g.watchers, f)
	known := make(map[int]error, len(g.failed))
	for r, c := range g.failed {
		known[r] = c
	}
	g.failMu.Unlock()
	for r := range g.n {
		if c, ok := known[r]; ok {
			f(r, c)
		}
	}
}

// Close is a no-op (the group outlives its members).
func (m *Member) Close() error { return nil }
