package hybridft

import (
	"github.com/goarmci/goarmci/hybridft/recovery"
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/wqring"
)

type entryState uint8

const (
	esFree   entryState = iota
	esPosted            // on the queue pair, awaiting its completion
	esFailed            // failed with the network: to be re-issued
	esQueued            // posted while the connection recovered: not on the queue pair yet
	esLocal             // completed by a synthetic completion not yet polled
	esDone              // completed and polled
)

// entry is one logged work request (a copy; its SGL is owned).
type entry struct {
	wr      ibv.SendWR
	sgl     []ibv.SGE
	tail    []ibv.SGE
	done    uint64 // bytes of wr the responder executed on earlier incarnations: wr's tail at done is what is posted
	state   entryState
	inc     uint32 // incarnation it was last posted on
	hasSent bool   // sent was reported by the failed queue pair
	sentInc uint32
	sent    recovery.Sent
}

// wrLog is the per-connection log of posted-but-uncompleted work requests, a ring in post order
// (RC completes in order, so the oldest posted entry is the one a completion names). It holds at
// most the queue pair's MaxSendWR entries and memory for the requests outstanding only: it grows
// when full and shrinks when it empties (internal/wqring).
type wrLog struct {
	e          wqring.Ring[entry]
	head, tail uint64
}

func (l *wrLog) init(n int) { l.e = wqring.New[entry](n) }
func (l *wrLog) cap() int   { return l.e.Limit() }

func (l *wrLog) at(i uint64) *entry { return l.e.At(i) }

func (l *wrLog) push(wr *ibv.SendWR) (*entry, bool) {
	if !l.e.Reserve(l.head, l.tail) {
		return nil, false
	}
	e := l.at(l.tail)
	l.tail++
	sgl := e.sgl
	e.wr = *wr
	e.done = 0
	e.wr.Flags |= ibv.SendSignaled
	if wr.SGL != nil {
		e.sgl = append(sgl[:0], wr.SGL...)
		e.wr.SGL = e.sgl
	}
	return e, true
}

func (l *wrLog) dropTail() {
	l.tail--
	l.reset(l.at(l.tail))
}

func (l *wrLog) reset(e *entry) {
	e.wr = ibv.SendWR{}
	e.state, e.hasSent, e.done = esFree, false, 0
}

// find returns the oldest entry in state st with work request id (normally the head).
func (l *wrLog) find(id uint64, st entryState) *entry {
	for i := l.head; i != l.tail; i++ {
		if e := l.at(i); e.state == st && e.wr.ID == id {
			return e
		}
	}
	return nil
}

func (l *wrLog) popDone() {
	for l.head != l.tail {
		e := l.at(l.head)
		if e.state != esDone {
			return
		}
		l.reset(e)
		l.head++
	}
	l.e.Idle(l.head, l.tail)
}
