package sched

import (
	"fmt"
	"strings"
)

// Even stripes operations of at least the threshold evenly over all subchannels and multiplexes
// smaller ones ([Vishnu07 §4.1.2] "even striping"; §4.3.2: even striping for large messages,
// multiplexing for small): a small operation stays on the previous operation's subchannel while
// that one is idle, else takes the least busy one, round robin on ties (mux). Atomics are never
// striped.
type Even struct {
	mux       mux
	threshold int
	subs      []int
	ones      []float64
}

// NewEven returns even striping over n subchannels.
func NewEven(n, threshold int) *Even {
	p := &Even{mux: newMux(n), threshold: threshold, subs: make([]int, n), ones: equalWeights(n)}
	for i := range p.subs {
		p.subs[i] = i
	}
	return p
}

// Name implements Policy.
func (p *Even) Name() string { return "even" }

// Schedule implements Policy.
func (p *Even) Schedule(op Op, dst []Stripe) []Stripe {
	return p.schedule(op, dst, p.ones)
}

// schedule stripes op in proportion to w, or sends it whole (pinned, atomic, small).
func (p *Even) schedule(op Op, dst []Stripe, w []float64) []Stripe {
	start := len(dst)
	switch {
	case op.Pinned:
		dst = single(dst, op, op.Sub)
	case op.Kind == Atomic || op.Size < p.threshold:
		dst = single(dst, op, p.mux.pick(nil))
	default:
		dst = split(dst, op, p.subs, w)
	}
	p.mux.scheduled(dst[start:])
	return dst
}

// Complete implements Policy: the stripes leave the multiplexer's busy counts.
func (p *Even) Complete(_ Op, done []Done) { p.mux.completed(done) }

// Feedback implements Policy.
func (p *Even) Feedback() bool { return false }

// Weighted stripes operations of at least the threshold over all subchannels in proportion to
// static weights — the path bandwidths ([Vishnu07 §4.1.2] "weighted striping") — and multiplexes
// smaller ones as Even does.
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
func (p *Weighted) Schedule(op Op, dst []Stripe) []Stripe { return p.schedule(op, dst, p.w) }

// EPC is the enhanced point-to-point and collective policy [Vishnu07 §6.2.2]: blocking and
// collective operations of at least the threshold are striped evenly over all subchannels;
// non-blocking ones go whole (their parallelism already fills the subchannels, and striping
// medium messages over many queue pairs costs more than it gains, §6.2.1), multiplexed as Even
// multiplexes small ones: a burst of them spreads round robin over the idle subchannels.
type EPC struct {
	Even
}

// NewEPC returns EPC over n subchannels.
func NewEPC(n, threshold int) *EPC { return &EPC{Even: *NewEven(n, threshold)} }

// Name implements Policy.
func (p *EPC) Name() string { return "epc" }

// Schedule implements Policy.
func (p *EPC) Schedule(op Op, dst []Stripe) []Stripe {
	if !op.Blocking && !op.Collective && !op.Pinned {
		start := len(dst)
		dst = single(dst, op, p.mux.pick(nil))
		p.mux.scheduled(dst[start:])
		return dst
	}
	return p.Even.Schedule(op, dst)
}
