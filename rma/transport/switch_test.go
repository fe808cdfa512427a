package transport

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
)

func issued(id uint64) Event        { return Event{Kind: OpIssued, ID: id} }
func completed(id uint64) Event     { return Event{Kind: OpCompleted, ID: id} }
func requested(to Path) Event       { return Event{Kind: SwitchRequested, To: to} }
func act(k ActionKind) SwitchAction { return SwitchAction{Kind: k} }
func switchTo(p Path) SwitchAction  { return SwitchAction{Kind: ActSwitch, To: p} }

var (
	ready  = Event{Kind: ConnReady}
	failed = Event{Kind: ConnFailed}
)

// step is one event of a scripted run and what it must give.
type step struct {
	ev        Event
	want      []SwitchAction
	bad       bool // must fail with ErrBadEvent
	path      Path // path after the event
	suspended bool
}

func TestSwitchTransitions(t *testing.T) {
	tests := []struct {
		name  string
		start Path
		steps []step
	}{
		{"request the current path: nothing", PathShared, []step{
			{ev: requested(PathShared), path: PathShared},
		}},
		{"to RC, idle: connect, then switch at once", PathShared, []step{
			{ev: requested(PathRC), want: []SwitchAction{act(ActConnect)}, path: PathShared},
			{ev: ready, want: []SwitchAction{switchTo(PathRC)}, path: PathRC},
		}},
		{"to RC with operations in flight: operations flow while connecting, suspend, drain, switch, resume", PathShared, []step{
			{ev: issued(1), path: PathShared},
			{ev: requested(PathRC), want: []SwitchAction{act(ActConnect)}, path: PathShared},
			{ev: issued(2), path: PathShared},
			{ev: ready, want: []SwitchAction{act(ActSuspend)}, path: PathShared, suspended: true},
			{ev: issued(3), bad: true, path: PathShared, suspended: true},
			{ev: completed(2), path: PathShared, suspended: true},
			{ev: completed(1), want: []SwitchAction{switchTo(PathRC), act(ActResume)}, path: PathRC},
			{ev: issued(3), path: PathRC},
		}},
		{"to shared with operations in flight", PathRC, []step{
			{ev: issued(5), path: PathRC},
			{ev: requested(PathShared), want: []SwitchAction{act(ActSuspend)}, path: PathRC, suspended: true},
			{ev: completed(5), want: []SwitchAction{switchTo(PathShared), act(ActResume)}, path: PathShared},
		}},
		{"to shared, idle", PathRC, []step{
			{ev: requested(PathShared), want: []SwitchAction{switchTo(PathShared)}, path: PathShared},
		}},
		{"called off while connecting: cancel the connection", PathShared, []step{
			{ev: requested(PathRC), want: []SwitchAction{act(ActConnect)}, path: PathShared},
			{ev: requested(PathRC), path: PathShared},
			{ev: requested(PathShared), want: []SwitchAction{act(ActCancel)}, path: PathShared},
			{ev: ready, bad: true, path: PathShared},
		}},
		{"called off while draining to RC: cancel and resume", PathShared, []step{
			{ev: issued(1), path: PathShared},
			{ev: requested(PathRC), want: []SwitchAction{act(ActConnect)}},
			{ev: ready, want: []SwitchAction{act(ActSuspend)}, suspended: true},
			{ev: requested(PathShared), want: []SwitchAction{act(ActCancel), act(ActResume)}},
			{ev: issued(2)},
			{ev: completed(1)},
		}},
		{"called off while draining to shared: resume on RC", PathRC, []step{
			{ev: issued(1), path: PathRC},
			{ev: requested(PathShared), want: []SwitchAction{act(ActSuspend)}, path: PathRC, suspended: true},
			{ev: requested(PathRC), want: []SwitchAction{act(ActResume)}, path: PathRC},
			{ev: completed(1), path: PathRC},
		}},
		{"connection fails while connecting: stay shared", PathShared, []step{
			{ev: requested(PathRC), want: []SwitchAction{act(ActConnect)}},
			{ev: failed},
			{ev: issued(1)},
		}},
		{"connection fails while draining to RC: resume on shared", PathShared, []step{
			{ev: issued(1)},
			{ev: requested(PathRC), want: []SwitchAction{act(ActConnect)}},
			{ev: ready, want: []SwitchAction{act(ActSuspend)}, suspended: true},
			{ev: failed, want: []SwitchAction{act(ActResume)}},
			{ev: completed(1)},
		}},
		{"connection in use fails: drain to shared", PathRC, []step{
			{ev: issued(1), path: PathRC},
			{ev: failed, want: []SwitchAction{act(ActSuspend)}, path: PathRC, suspended: true},
			{ev: failed, path: PathRC, suspended: true},
			{ev: completed(1), want: []SwitchAction{switchTo(PathShared), act(ActResume)}, path: PathShared},
		}},
		{"bad events change nothing", PathShared, []step{
			{ev: issued(0), bad: true},
			{ev: issued(2)},
			{ev: issued(2), bad: true},
			{ev: issued(1), bad: true},
			{ev: completed(7), bad: true},
			{ev: completed(2)},
			{ev: completed(2), bad: true},
			{ev: ready, bad: true},
			{ev: failed, bad: true},
			{ev: requested(Path(9)), bad: true},
			{ev: Event{Kind: 0}, bad: true},
			{ev: Event{Kind: 99}, bad: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewSwitch(tt.start)
			for i, s := range tt.steps {
				before := *w
				before.inFlight = clone(w.inFlight)
				got, err := w.Step(s.ev)
				if s.bad {
					if !errors.Is(err, ErrBadEvent) {
						t.Fatalf("step %d %+v: err %v, want ErrBadEvent", i, s.ev, err)
					}
					if !reflect.DeepEqual(before, *w) {
						t.Fatalf("step %d %+v: bad event changed the state: %+v → %+v", i, s.ev, before, *w)
					}
				} else if err != nil {
					t.Fatalf("step %d %+v: %v", i, s.ev, err)
				}
				if !reflect.DeepEqual(got, s.want) {
					t.Fatalf("step %d %+v: actions %v, want %v", i, s.ev, got, s.want)
				}
				if w.Path() != s.path || w.Suspended() != s.suspended {
					t.Fatalf("step %d %+v: path %v suspended %v, want %v %v", i, s.ev, w.Path(), w.Suspended(), s.path, s.suspended)
				}
			}
		})
	}
}

func clone(m map[uint64]struct{}) map[uint64]struct{} {
	c := make(map[uint64]struct{}, len(m))
	for k := range m {
		c[k] = struct{}{}
	}
	return c
}

func TestSwitchLastOnOldPath(t *testing.T) {
	w := NewSwitch(PathShared)
	for id := uint64(1); id <= 3; id++ {
		mustStep(t, w, issued(id))
	}
	mustStep(t, w, requested(PathRC))
	mustStep(t, w, ready)
	if got := w.LastOnOldPath(); got != 3 {
		t.Fatalf("last id on the old path %d, want 3", got)
	}
	mustStep(t, w, completed(3))
	mustStep(t, w, completed(1))
	if w.InFlight() != 1 || !w.Suspended() {
		t.Fatalf("in flight %d, suspended %v: the switch must wait for operation 2", w.InFlight(), w.Suspended())
	}
	mustStep(t, w, completed(2))
	if w.LastOnOldPath() != 0 || w.Path() != PathRC {
		t.Fatalf("after the drain: last %d path %v", w.LastOnOldPath(), w.Path())
	}
}

func mustStep(t *testing.T, w *Switch, e Event) []SwitchAction {
	t.Helper()
	a, err := w.Step(e)
	if err != nil {
		t.Fatalf("%+v: %v", e, err)
	}
	return a
}

// orderingDriver plays the driver over a Switch and checks ARMCI ordering: every operation
// issued on a path completes before any operation is issued on another path.
type orderingDriver struct {
	w      *Switch
	next   uint64
	pathOf map[uint64]Path // in flight: the path it was issued on
}

// apply feeds one event derived from op and checks the invariants; it returns an error only for
// a broken invariant.
func (d *orderingDriver) apply(t *testing.T, op byte) {
	var e Event
	switch op % 6 {
	case 0:
		d.next++
		e = issued(d.next)
	case 1:
		// complete one of the operations in flight, chosen by op (out of order too), or an
		// unknown id when none is
		ids := slices.Sorted(maps.Keys(d.pathOf))
		if len(ids) > 0 {
			e = completed(ids[int(op/6)%len(ids)])
		} else {
			e = completed(uint64(op))
		}
	case 2:
		e = requested(PathRC)
	case 3:
		e = requested(PathShared)
	case 4:
		e = ready
	case 5:
		e = failed
	}
	before := *d.w
	before.inFlight = clone(d.w.inFlight)
	acts, err := d.w.Step(e)
	if err != nil {
		if !errors.Is(err, ErrBadEvent) {
			t.Fatalf("%+v: error %v does not wrap ErrBadEvent", e, err)
		}
		if !reflect.DeepEqual(before, *d.w) {
			t.Fatalf("%+v: rejected event changed the state", e)
		}
		if e.Kind == OpIssued {
			d.next-- // not issued: the driver keeps the id
		}
		return
	}
	switch e.Kind {
	case OpIssued:
		for id, p := range d.pathOf {
			if p != d.w.Path() {
				t.Fatalf("operation %d issued on %v while %d is in flight on %v", e.ID, d.w.Path(), id, p)
			}
		}
		d.pathOf[e.ID] = d.w.Path()
	case OpCompleted:
		delete(d.pathOf, e.ID)
	}
	for _, a := range acts {
		if a.Kind == ActSwitch && len(d.pathOf) != 0 {
			t.Fatalf("switch to %v with %d operations in flight on the old path", a.To, len(d.pathOf))
		}
	}
	if len(d.pathOf) != d.w.InFlight() {
		t.Fatalf("in flight %d, switch counts %d", len(d.pathOf), d.w.InFlight())
	}
}

func TestSwitchOrderingRandomWalk(t *testing.T) {
	for run := range 50 {
		d := &orderingDriver{w: NewSwitch(PathShared), pathOf: map[uint64]Path{}}
		x := uint32(run*2654435761 + 1)
		for range 2000 {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			d.apply(t, byte(x))
		}
	}
}

func FuzzSwitch(f *testing.F) {
	f.Add([]byte{0, 0, 2, 0, 4, 0, 1, 1, 0, 3, 1, 0})
	f.Add([]byte{2, 4, 0, 3, 1, 5, 0, 2, 5})
	f.Fuzz(func(t *testing.T, ops []byte) {
		start := PathShared
		if len(ops) > 0 && ops[0]&0x80 != 0 {
			start = PathRC
		}
		d := &orderingDriver{w: NewSwitch(start), pathOf: map[uint64]Path{}}
		for _, op := range ops {
			d.apply(t, op)
		}
	})
}
