package sched

import (
	"fmt"
	"strings"
)

// Even stripes operations of at least the threshold evenly over all subchannels and sends
// smaller ones round robin (seed 000 §4.1.2 "even striping"; §4.3.2: even striping for large
// messages, round robin for small). Atomics are never striped.
type Even struct {
	rr        RoundRobin
	threshold int
	subs      []int
	ones      []float64
}

// NewEven returns even striping over n subchannels.
func NewEven(n, threshold int) *Even {
	p := &Even{rr: RoundRobin{n: n}, threshold: threshold, subs: make([]int, n), ones: equalWeights(n)}
	for i := range p.subs {
		p.subs[i] = i
	}
	return p
}

// Name implements Policy.
func (p *Even) Name() string { return "even" }

// Schedule implements Policy.
func (p *Even) Schedule(op Op, dst []Stripe) []Stripe {
	if op.Pinned || op.Kind == Atomic || op.Size < p.threshold {
		return p.rr.Schedule(op, dst)
	}
	return split(dst, op, p.subs, p.ones)
}

// Complete implements Policy.
func (p *Even) Complete(Op, []Done) {}

// Feedback implements Policy.
func (p *Even) Feedback() bool { return false }

// Weighted stripes operations of at least the threshold over all subchannels in proportion to
// static weights — the path bandwidths (seed 000 §4.1.2 "weighted striping") — and sends
// smaller ones round robin.
type Weighted struct {
	Even
	w []float64
}

// NewWeighted returns weighted striping with one weight (> 0) per subchannel. Errors wrap
// ErrBadConfig.
func NewWeighted(w []float64, threshold int) (*Weighted, error) {
	if len(w) == 0 || len(w) > MaxSubchannels {
		return nil, fmt.Errorf("%w: %d weights", ErrBadConfig, len(w))
	}
	for _, x := range w {
		if !(x > 0) {
			return nil, fmt.Errorf("%w: weight %g", ErrBadConfig, x)
		}
	}
	p := &Weighted{Even: *NewEven(len(w), threshold), w: append([]float64(nil), w...)}
	return p, nil
}

// Name implements Policy.
func (p *Weighted) Name() string {
	var b strings.Builder
	b.WriteString("weighted")
	for _, x := range p.w {
		fmt.Fprintf(&b, ":%g", x)
	}
	return b.String()
}

// Schedule implements Policy.
func (p *Weighted) Schedule(op Op, dst []Stripe) []Stripe {
	if op.Pinned || op.Kind == Atomic || op.Size < p.threshold {
		return p.rr.Schedule(op, dst)
	}
	return split(dst, op, p.subs, p.w)
}

// EPC is the enhanced point-to-point and collective policy (seed 000 §6.2.2): blocking and
// collective operations of at least the threshold are striped evenly over all subchannels;
// non-blocking ones go whole, round robin (their parallelism already fills the subchannels, and
// striping medium messages over many queue pairs costs more than it gains, §6.2.1).
type EPC struct {
	Even
}

// NewEPC returns EPC over n subchannels.
func NewEPC(n, threshold int) *EPC { return &EPC{Even: *NewEven(n, threshold)} }

// Name implements Policy.
func (p *EPC) Name() string { return "epc" }

// Schedule implements Policy.
func (p *EPC) Schedule(op Op, dst []Stripe) []Stripe {
	if !op.Blocking && !op.Collective {
		return p.rr.Schedule(op, dst)
	}
	return p.Even.Schedule(op, dst)
}
