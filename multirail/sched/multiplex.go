package sched

import "fmt"

// Binding sends every operation on one subchannel ([Vishnu07 §4.1.2], "binding": least overhead;
// uses several rails when several processes of a node bind to different subchannels).
type Binding struct {
	n, sub int
}

// NewBinding binds to subchannel sub mod n.
func NewBinding(n, sub int) *Binding { return &Binding{n: n, sub: ((sub % n) + n) % n} }

// Name implements Policy.
func (p *Binding) Name() string { return fmt.Sprintf("binding:%d", p.sub) }

// Schedule implements Policy.
func (p *Binding) Schedule(op Op, dst []Stripe) []Stripe {
	if op.Pinned {
		return single(dst, op, op.Sub)
	}
	return single(dst, op, p.sub)
}

// Complete implements Policy.
func (p *Binding) Complete(Op, []Done) {}

// Feedback implements Policy.
func (p *Binding) Feedback() bool { return false }

// RoundRobin sends each operation whole on the next subchannel in turn ([Vishnu07 §4.1.2],
// multiplexing; the message size is ignored since the per-operation cost dominates).
type RoundRobin struct {
	n, next int
}

// NewRoundRobin returns round robin over n subchannels, starting at 0.
func NewRoundRobin(n int) *RoundRobin { return &RoundRobin{n: n} }

// Name implements Policy.
func (p *RoundRobin) Name() string { return "round-robin" }

// Pick returns the next subchannel and advances.
func (p *RoundRobin) Pick() int {
	s := p.next
	p.next = (p.next + 1) % p.n
	return s
}

// Schedule implements Policy.
func (p *RoundRobin) Schedule(op Op, dst []Stripe) []Stripe {
	if op.Pinned {
		return single(dst, op, op.Sub)
	}
	return single(dst, op, p.Pick())
}

// Complete implements Policy.
func (p *RoundRobin) Complete(Op, []Done) {}

// Feedback implements Policy.
func (p *RoundRobin) Feedback() bool { return false }

// Window is window-based round robin [Vishnu07 §4.1.2]: W consecutive operations use one
// subchannel before the scheduler moves to the next, so subchannels of different latency
// reorder fewer messages.
type Window struct {
	n, w      int
	cur, used int
}

// NewWindow returns window-based round robin with window w ≥ 1 over n subchannels.
func NewWindow(n, w int) *Window { return &Window{n: n, w: max(w, 1)} }

// Name implements Policy.
func (p *Window) Name() string { return fmt.Sprintf("window:%d", p.w) }

// Schedule implements Policy.
func (p *Window) Schedule(op Op, dst []Stripe) []Stripe {
	if op.Pinned {
		return single(dst, op, op.Sub)
	}
	if p.used == p.w {
		p.cur, p.used = (p.cur+1)%p.n, 0
	}
	p.used++
	return single(dst, op, p.cur)
}

// Complete implements Policy.
func (p *Window) Complete(Op, []Done) {}

// Feedback implements Policy.
func (p *Window) Feedback() bool { return false }
