package engine

import (
	"fmt"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/ibv/wire"
)

// migrateResponder is the responder's half of automatic path migration (IBA §17.2.8; [Vishnu07]
// ch. 9): a request of the connected peer arriving from the ARMED alternate path means the peer's
// requester migrated, so this QP migrates too (ARMED→MIGRATED, the alternate becomes primary,
// EventPathMig): its own requests then take the path that works at once instead of finding the
// dead primary by their retries, and the QP's owner re-arms a new alternate. Unacknowledged
// requests of this side are re-sent on the new primary (go-back-N; the peer drops duplicates).
// It is called without sqMu or rqMu (MigrateAuto takes the QP's modify lock).
func (q *QP) migrateResponder(alt *ibv.AHAttr) {
	if !q.altArmed.CompareAndSwap(alt, nil) {
		return // another packet of the burst got here first
	}
	q.sqMu.Lock()
	s := &q.sq
	if s.migrating || q.dead.Load() {
		q.sqMu.Unlock()
		return // the requester is migrating by its own retries: one migration
	}
	s.migrating = true
	q.sqMu.Unlock()
	_, ok := provider.MigrateAuto(q.ibq, fmt.Sprintf("request from the alternate path %s port %d", alt.Addr, alt.PortNum))
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	s.migrating = false
	if st := q.st(); !ok || !s.a.hasAlt || q.dead.Load() || (st != ibv.StateRTS && st != ibv.StateSQD) {
		// not ARMED after all (a path load slipped in): nothing moved
		q.pumpLocked()
		return
	}
	q.swapToAltLocked()
	q.e.log.Debug().Uint32("qp", q.num).Str("path", s.a.path.Addr).Msg("engine: responder migrated to the alternate path")
	outstanding := wire.PSNDiff(s.sent, s.una) > 0
	if outstanding {
		s.rewind(s.una)
		q.deadline.Store(0)
	}
	q.pumpLocked()
	if outstanding && q.deadline.Load() == 0 {
		q.armTimer()
	}
}

// swapToAltLocked makes the alternate path the primary after an automatic migration (the
// requester's, by its retries, or the responder's): paths and their ACK timeouts swap in the
// requester's and the responder's copies of the attributes, PathFault sees the new primary, and
// the retry count starts over. sqMu is held; it takes rqMu.
func (q *QP) swapToAltLocked() {
	s := &q.sq
	q.rqMu.Lock()
	s.a.path, s.a.alt = s.a.alt, s.a.path
	s.a.timeout, s.a.altTimeout = s.a.altTimeout, s.a.timeout
	if s.a.timeout == 0 {
		s.a.timeout = s.a.altTimeout
	}
	q.rq.a = s.a
	q.rqMu.Unlock()
	q.publishPath()
	s.retries = 0
}
