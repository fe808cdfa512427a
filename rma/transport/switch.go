package transport

import "fmt"

// Path is the way operations to a peer go.
type Path uint8

const (
	// PathShared is the shared datagram path (the process's DC queue pair).
	PathShared Path = iota
	// PathRC is a dedicated RC connection.
	PathRC
)

func (p Path) String() string {
	switch p {
	case PathShared:
		return "shared"
	case PathRC:
		return "rc"
	}
	return fmt.Sprintf("Path(%d)", uint8(p))
}

// EventKind names a Switch event.
type EventKind uint8

const (
	// OpIssued: the driver issued operation ID on the current path. IDs are the peer's operation
	// counter: strictly increasing, from 1.
	OpIssued EventKind = iota + 1
	// OpCompleted: operation ID completed (successfully or not).
	OpCompleted
	// SwitchRequested: the selector wants the peer on path To.
	SwitchRequested
	// ConnReady: the RC connection asked for by ActConnect is ready (a pooled one at once).
	ConnReady
	// ConnFailed: the RC connection under way, or the one in use, failed.
	ConnFailed
)

// Event is one input of a Switch.
type Event struct {
	Kind EventKind
	ID   uint64 // OpIssued, OpCompleted
	To   Path   // SwitchRequested
}

// ActionKind names what a Switch asks of the driver.
type ActionKind uint8

const (
	// ActConnect: set up (or take from the pool) the peer's RC connection, then feed ConnReady
	// or ConnFailed. Operations keep flowing on the current path meanwhile.
	ActConnect ActionKind = iota + 1
	// ActCancel: the RC connection asked for is not wanted any more (a switch was called off);
	// return it to the pool.
	ActCancel
	// ActSuspend: issue no new operation to the peer (queue them) until ActResume.
	ActSuspend
	// ActSwitch: from now on operations to the peer go on path To.
	ActSwitch
	// ActResume: issue the queued and new operations again.
	ActResume
)

// SwitchAction is one output of a Switch.
type SwitchAction struct {
	Kind ActionKind
	To   Path // ActSwitch
}

// switchState is a Switch's phase.
type switchState uint8

const (
	steady     switchState = iota // operations go on path
	connecting                    // the RC connection is being set up; operations go on path
	draining                      // suspended until the operations on path complete, then target
)

// Switch is the channel switch protocol of one peer [Takagi15 §3.3 J1–J5], as a pure state
// machine: Step takes an event and returns the actions for the driver. A switch to RC first
// sets the connection up while operations keep flowing on the shared path; then new operations
// are suspended, the ones issued on the old path (up to the last id issued before the
// suspension) complete, the path changes and operations resume. So no operation on the new
// path starts before every earlier operation on the old path completed, which keeps ARMCI's
// ordering of overlapping operations from one origin. A switch to the shared path drains the
// same way without a connection step. A request for the path being left calls the switch off.
//
// Memory: the ids of the operations in flight (a map entry each).
type Switch struct {
	path, target Path
	state        switchState
	lastIssued   uint64              // highest id issued
	lastOld      uint64              // draining: the last id issued on the old path
	inFlight     map[uint64]struct{} // issued, not completed; all on path
}

// NewSwitch returns the switch of a peer whose operations go on path p.
func NewSwitch(p Path) *Switch {
	return &Switch{path: p, target: p, inFlight: map[uint64]struct{}{}}
}

// Path returns the path operations go on now.
func (w *Switch) Path() Path { return w.path }

// Suspended reports whether new operations must wait (the switch is draining the old path).
func (w *Switch) Suspended() bool { return w.state == draining }

// LastOnOldPath returns, while suspended, the id of the last operation issued on the path being
// left: the switch completes when it and every earlier one have completed (0 when not suspended).
func (w *Switch) LastOnOldPath() uint64 { return w.lastOld }

// InFlight returns the number of operations issued and not completed.
func (w *Switch) InFlight() int { return len(w.inFlight) }

// Step applies event e and returns the actions to carry out, in order. An event not valid in
// the current state returns an error wrapping ErrBadEvent and changes nothing.
func (w *Switch) Step(e Event) ([]SwitchAction, error) {
	switch e.Kind {
	case OpIssued:
		if w.state == draining {
			return nil, fmt.Errorf("%w: operation %d issued while suspended", ErrBadEvent, e.ID)
		}
		if e.ID <= w.lastIssued {
			return nil, fmt.Errorf("%w: operation %d issued after %d", ErrBadEvent, e.ID, w.lastIssued)
		}
		w.lastIssued = e.ID
		w.inFlight[e.ID] = struct{}{}
		return nil, nil
	case OpCompleted:
		if _, ok := w.inFlight[e.ID]; !ok {
			return nil, fmt.Errorf("%w: operation %d completed but not in flight", ErrBadEvent, e.ID)
		}
		delete(w.inFlight, e.ID)
		if w.state == draining && len(w.inFlight) == 0 {
			return w.finish(ActResume), nil
		}
		return nil, nil
	case SwitchRequested:
		return w.request(e.To)
	case ConnReady:
		if w.state != connecting {
			return nil, fmt.Errorf("%w: connection ready with none under way", ErrBadEvent)
		}
		return w.drain(), nil
	case ConnFailed:
		return w.connFailed()
	}
	return nil, fmt.Errorf("%w: event kind %d", ErrBadEvent, e.Kind)
}

func (w *Switch) request(to Path) ([]SwitchAction, error) {
	if to != PathShared && to != PathRC {
		return nil, fmt.Errorf("%w: switch to %v", ErrBadEvent, to)
	}
	switch {
	case w.state == steady && to == w.path:
		return nil, nil
	case w.state != steady && to == w.target:
		return nil, nil
	case w.state != steady: // back to path: call the switch off
		return w.callOff(), nil
	case to == PathRC:
		w.state, w.target = connecting, PathRC
		return []SwitchAction{{Kind: ActConnect}}, nil
	default:
		w.target = to
		return w.drain(), nil
	}
}

func (w *Switch) connFailed() ([]SwitchAction, error) {
	switch {
	case w.state != steady && w.target == PathRC: // the new connection failed: stay shared
		resume := w.state == draining
		w.state, w.target, w.lastOld = steady, w.path, 0
		if resume {
			return []SwitchAction{{Kind: ActResume}}, nil
		}
		return nil, nil
	case w.path == PathRC && w.state == steady: // the connection in use failed: go shared
		w.target = PathShared
		return w.drain(), nil
	case w.path == PathRC: // draining off it already
		return nil, nil
	}
	return nil, fmt.Errorf("%w: connection failed with none under way or in use", ErrBadEvent)
}

// drain starts waiting for the old path's operations, or switches at once when none is in flight.
func (w *Switch) drain() []SwitchAction {
	if len(w.inFlight) == 0 {
		return w.finish(0)
	}
	w.state, w.lastOld = draining, w.lastIssued
	return []SwitchAction{{Kind: ActSuspend}}
}

// finish moves to the target path, then adds action then (ActResume after a suspension).
func (w *Switch) finish(then ActionKind) []SwitchAction {
	w.path, w.state, w.lastOld = w.target, steady, 0
	a := []SwitchAction{{Kind: ActSwitch, To: w.path}}
	if then != 0 {
		a = append(a, SwitchAction{Kind: then})
	}
	return a
}

// callOff abandons the switch under way: operations stay on path.
func (w *Switch) callOff() []SwitchAction {
	var a []SwitchAction
	if w.target == PathRC {
		a = append(a, SwitchAction{Kind: ActCancel})
	}
	if w.state == draining {
		a = append(a, SwitchAction{Kind: ActResume})
	}
	w.state, w.target, w.lastOld = steady, w.path, 0
	return a
}
