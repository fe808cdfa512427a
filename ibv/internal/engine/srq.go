package engine

import (
	"fmt"
	"sync"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/wqring"
)

// SRQ is a shared receive queue (ibv_create_srq; [Sridhar08]: receive memory proportional to the
// traffic, not to the number of connections). QPs created with it take their receives from it;
// a QP going to ERROR does not flush the shared receives (they belong to the SRQ).
type SRQ struct {
	mu   sync.Mutex
	q    recvQueue
	dead bool
}

// CreateSRQ creates the engine side of a shared receive queue of maxWR entries.
func (e *Engine) CreateSRQ(_ *ibv.SRQ, maxWR int) (ibv.SRQDriver, error) {
	if maxWR <= 0 || maxWR > 1<<20 {
		return nil, fmt.Errorf("engine: %w: SRQ of %d entries", ibv.ErrInvalidArgument, maxWR)
	}
	return &SRQ{q: recvQueue{q: wqring.New[rwqe](maxWR)}}, nil
}

// PostRecv queues a shared receive buffer; ErrQueueFull when maxWR are posted.
func (s *SRQ) PostRecv(wr *ibv.RecvWR) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return ibv.ErrClosed
	}
	if err := s.q.push(wr); err != nil {
		return fmt.Errorf("engine: %w: SRQ holds %d receives", err, s.q.tail-s.q.head)
	}
	return nil
}

// Destroy drops the queued receives.
func (s *SRQ) Destroy() error {
	s.mu.Lock()
	s.dead = true
	s.q.head, s.q.tail = 0, 0
	s.mu.Unlock()
	return nil
}

// popInto takes the oldest shared receive into dst (the copy keeps dst's SGL capacity).
func (s *SRQ) popInto(dst *rwqe) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.q.pop()
	if !ok {
		return false
	}
	dst.id = w.id
	dst.sgl = append(dst.sgl[:0], w.sgl...)
	return true
}

func (s *SRQ) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.head == s.q.tail
}
