package engine

import (
	"fmt"
	"sync"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/internal/wqring"
)

// SRQ is a shared receive queue (ibv_create_srq; [Sridhar08]: receive memory proportional to the
// traffic, not to the number of connections). QPs created with it take their receives from it;
// a QP going to ERROR does not flush the shared receives (they belong to the SRQ).
type SRQ struct {
	ibs   *ibv.SRQ
	mu    sync.Mutex
	q     recvQueue
	dead  bool
	limit uint64 // the armed limit (ibv.SRQ.ArmLimit), 0: disarmed
}

// CreateSRQ creates the engine side of a shared receive queue of maxWR entries.
func (e *Engine) CreateSRQ(srq *ibv.SRQ, maxWR int) (ibv.SRQDriver, error) {
	if maxWR <= 0 || maxWR > 1<<20 {
		return nil, fmt.Errorf("engine: %w: SRQ of %d entries", ibv.ErrInvalidArgument, maxWR)
	}
	return &SRQ{ibs: srq, q: recvQueue{q: wqring.New[rwqe](maxWR)}}, nil
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

// ArmLimit arms the SRQ limit at limit receives, 0 disarms (ibv.SRQLimiter).
func (s *SRQ) ArmLimit(limit int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit > s.q.q.Limit() {
		return fmt.Errorf("engine: %w: SRQ limit %d above its %d entries", ibv.ErrInvalidArgument, limit, s.q.q.Limit())
	}
	if s.dead {
		return ibv.ErrClosed
	}
	s.limit = uint64(limit)
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
	if s.limit > 0 && s.q.tail-s.q.head < s.limit {
		s.limit = 0
		provider.PostEvent(s.ibs.PD().Context(), ibv.AsyncEvent{Type: ibv.EventSRQLimitReached, SRQ: s.ibs})
	}
	return true
}

func (s *SRQ) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.head == s.q.tail
}
