// Package recovery holds the pure cores of Hybrid-IBNFT's software recovery ([Vishnu09 §IV.C],
// [Vishnu07 §10.3]): the decision, for each work request a failed queue pair flushed, of what the
// re-issue must do so that it takes effect exactly once; and the path repository of the healthy
// paths to each peer. Nothing here starts a goroutine or reads a clock: time is an argument.
package recovery

import (
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/wire"
)

// Kind is what to do with one failed work request.
type Kind uint8

const (
	// Repost: the responder executed none of it (or it is an idempotent read): post it again whole.
	Repost Kind = iota + 1
	// RepostTail: the responder executed its first Offset bytes (a multi-packet write or
	// accumulate is executed packet by packet): post only the rest.
	RepostTail
	// Complete: the responder executed all of it; only the acknowledgement was lost. Complete it
	// successfully without sending it again (an accumulate must not be applied twice).
	Complete
	// CompleteAtomic: an atomic the responder executed; its result is Value (from the
	// responder's record), to be written to the local buffer before completing it.
	CompleteAtomic
	// Fail: an executed atomic whose result the responder no longer remembers: it cannot be
	// completed correctly nor re-issued; complete it with an error.
	Fail
)

func (k Kind) String() string {
	switch k {
	case Repost:
		return "repost"
	case RepostTail:
		return "repost-tail"
	case Complete:
		return "complete"
	case CompleteAtomic:
		return "complete-atomic"
	case Fail:
		return "fail"
	}
	return "?"
}

// Sent is what the failed requester knew of one work request: its first PSN, its number of
// PSNs and the path MTU that segmented it (bytes). A request that never got PSNs is not Sent.
type Sent struct {
	FirstPSN, NPkts uint32
	MTU             int
}

// Action is the decision for one work request.
type Action struct {
	Kind   Kind
	Offset uint64 // RepostTail: bytes already executed
	Value  uint64 // CompleteAtomic: the atomic's original value
}

// Decide returns the action for a failed work request of opcode op and local length bytes,
// given what the requester sent (ok false: never sent) and the peer responder's expected PSN
// ePSN on the failed incarnation (every PSN before it was executed), with lookup returning the
// result of the executed atomic at a PSN. PSNs compare in the 24-bit sequence space.
func Decide(op ibv.Opcode, length uint64, s Sent, ok bool, ePSN uint32, lookup func(psn uint32) (uint64, bool)) Action {
	if !ok || s.NPkts == 0 {
		return Action{Kind: Repost}
	}
	done := wire.PSNDiff(ePSN, s.FirstPSN)
	if done <= 0 {
		return Action{Kind: Repost}
	}
	if op == ibv.OpRDMARead {
		return Action{Kind: Repost} // idempotent, and the data is needed
	}
	if uint32(done) >= s.NPkts {
		if op.IsAtomic() && op != ibv.OpAccumulate {
			if lookup != nil {
				if v, found := lookup(s.FirstPSN); found {
					return Action{Kind: CompleteAtomic, Value: v}
				}
			}
			return Action{Kind: Fail}
		}
		return Action{Kind: Complete}
	}
	switch op {
	case ibv.OpRDMAWrite, ibv.OpRDMAWriteImm, ibv.OpAccumulate:
		off := uint64(done) * uint64(s.MTU)
		if off >= length {
			return Action{Kind: Complete}
		}
		return Action{Kind: RepostTail, Offset: off}
	}
	// a send partly received: the responder discarded it when its queue pair failed
	return Action{Kind: Repost}
}

// Tail returns wr advanced by off bytes: remote address and local buffer (LocalBuf, or the SGL
// with its first elements dropped or shortened; the SGL is appended to sgl).
func Tail(wr ibv.SendWR, off uint64, sgl []ibv.SGE) ibv.SendWR {
	wr.RemoteAddr += off
	if wr.LocalBuf != nil {
		wr.LocalBuf = wr.LocalBuf[min(off, uint64(len(wr.LocalBuf))):]
		return wr
	}
	sgl = sgl[:0]
	for _, s := range wr.SGL {
		if off >= uint64(s.Length) {
			off -= uint64(s.Length)
			continue
		}
		s.Addr += off
		s.Length -= uint32(off)
		off = 0
		sgl = append(sgl, s)
	}
	wr.SGL = sgl
	return wr
}
