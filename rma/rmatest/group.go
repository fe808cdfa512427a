// Package rmatest runs several rma ranks inside one test process: each rank is a goroutine with
// its own Runtime, devices and connections, joined by an in-process bootstrap.
package rmatest

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
}

// NewGroup creates a bootstrap group of n ranks.
func NewGroup(n int) *Group {
	g := &Group{n: n, data: make([][]byte, n)}
	g.cond = sync.NewCond(&g.mu)
	return g
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

// Close is a no-op (the group outlives its members).
func (m *Member) Close() error { return nil }
