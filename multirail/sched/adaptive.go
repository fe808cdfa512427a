package sched

import (
	"fmt"
	"time"
)

// BSS is batch based striping and sorting [Vishnu07 ch. 8] and, with n_batch = n_paths, HSAM's
// adaptive striping (ch. 7; §8.4: "HSAM is a special case of the BSS scheme").
//
// Every path starts with the same weight w_i = W_total/n_paths (eq. 8.1; W_total = 1). An
// operation of at least the threshold is striped over the first n_batch paths of the array
// sorted by non-increasing weight, each path carrying w_i/W_batch of it. When all its stripes
// have completed, the weights of the paths used are updated from the stripes' delivery times t_i
// (eq. 8.3, which is eq. 7.4 when the batch is every path):
//
//	w'_i = (1-α)·w_i + α·W_batch·(b_i/t_i) / Σ_k∈batch (b_k/t_k)
//
// and the array is sorted again. The seeds write w_i/t_i for the path bandwidth (eq. 7.2); since
// stripe i carried b_i = S·w_i/W_batch bytes, b_i/t_i is the same quantity up to the constant
// S/W_batch — we use the bytes actually carried, which stays right when the weights changed
// between scheduling and completion (several operations in flight). Paths outside the batch keep
// their weights (the heuristic of §8.2.1). Our addition: a path's weight never falls below
// MinShare·W_total, so a path the update starved can still be measured when it recovers. Stripes
// whose delivery time was not measured (0) are left out of the update; with fewer than two
// measured stripes nothing changes (eq. 7.4 is then the identity).
//
// Operations below the threshold and atomics go whole over the batch, multiplexed as Even
// multiplexes them (mux: on the previous operation's path while it is idle, else the least busy
// path of the batch, in batch order after the previous one on ties). The
// piggybacking of W_batch on finish messages (§8.3.3) belongs to two-sided rendezvous; one-sided
// RDMA needs no target-side bookkeeping (§5.2.5).
type BSS struct {
	name      string
	w         []float64 // weight per subchannel
	order     []int     // subchannels by non-increasing weight (ties: lower index first)
	batch     int
	alpha     float64
	threshold int
	floor     float64
	mux       mux
	share     []float64 // scratch: weights of the batch in order
	// n_batch = 1 (see updateOne): the last measured rate per subchannel (bytes/ns, 0: never
	// measured) and the rate per unit of weight of the first measurement
	rate []float64
	ref  float64
}

// NewBSS returns BSS (n_paths = n, n_batch = batch) with history factor alpha ∈ (0, 1], the
// switchover threshold in bytes and the minimum weight share (0 ≤ minShare < 1/n). Errors wrap
// ErrBadConfig.
func NewBSS(n, batch int, alpha float64, threshold int, minShare float64) (*BSS, error) {
	if n < 1 || n > MaxSubchannels || batch < 1 || batch > n || !(alpha > 0 && alpha <= 1) || minShare < 0 || minShare*float64(n) >= 1 {
		return nil, fmt.Errorf("%w: bss n_paths %d n_batch %d α %g min share %g", ErrBadConfig, n, batch, alpha, minShare)
	}
	p := &BSS{name: fmt.Sprintf("bss:%d:%g", batch, alpha), w: make([]float64, n), order: make([]int, n), batch: batch,
		alpha: alpha, threshold: threshold, floor: minShare, share: make([]float64, batch), mux: newMux(n),
		rate: make([]float64, n)}
	for i := range p.w {
		p.w[i] = 1 / float64(n) // eq. 8.1
		p.order[i] = i
	}
	return p, nil
}

// Name implements Policy.
func (p *BSS) Name() string { return p.name }

// Feedback implements Policy.
func (p *BSS) Feedback() bool { return true }

// Weights returns a copy of the current weights, one per subchannel (they sum to 1).
func (p *BSS) Weights() []float64 { return append([]float64(nil), p.w...) }

// Batch returns the subchannels of the current batch, best first.
func (p *BSS) Batch() []int { return append([]int(nil), p.order[:p.batch]...) }

// Schedule implements Policy.
func (p *BSS) Schedule(op Op, dst []Stripe) []Stripe {
	start := len(dst)
	switch {
	case op.Pinned:
		dst = single(dst, op, op.Sub)
	case op.Kind == Atomic || op.Size < p.threshold || p.batch == 1:
		dst = single(dst, op, p.mux.pick(p.order[:p.batch]))
	default:
		subs := p.order[:p.batch]
		for k, s := range subs {
			p.share[k] = p.w[s]
		}
		dst = split(dst, op, subs, p.share)
	}
	p.mux.scheduled(dst[start:])
	return dst
}

// Complete implements Policy: eq. 8.3 over the measured stripes, then the re-sort.
func (p *BSS) Complete(op Op, done []Done) {
	p.mux.completed(done)
	if p.batch == 1 {
		if len(done) == 1 && p.updateOne(done[0]) {
			p.sort()
		}
		return
	}
	if Update(p.w, done, p.alpha, p.floor) {
		p.sort()
	}
}

// updateOne is eq. 8.3 for a batch of one path, where it would compare the path with itself and
// never move: the batch path's measured rate is weighed against the other paths' last measured
// rates, and a path never measured is assumed to deliver what its weight promises at the rate
// per unit of weight of the first measurement. So a batch path that slows down loses weight
// against the others until another path sorts first and is measured in its turn ([Vishnu07]
// §8.3: BSS with n_batch = 1 is the adaptive choice of the single best path). Only operations of
// at least the threshold count: below it a delivery time measures latency, not bandwidth.
func (p *BSS) updateOne(d Done) bool {
	s := d.Sub
	if d.Delivery <= 0 || d.Bytes <= 0 || d.Bytes < p.threshold || s < 0 || s >= len(p.w) {
		return false
	}
	r := float64(d.Bytes) / float64(d.Delivery/time.Nanosecond)
	if p.rate[s] == 0 {
		p.rate[s] = r
	} else {
		p.rate[s] = (1-p.alpha)*p.rate[s] + p.alpha*r
	}
	if p.ref == 0 {
		p.ref = p.rate[s] / p.w[s]
	}
	var rsum, wsum float64
	for k := range p.w {
		if p.rate[k] > 0 {
			rsum += p.rate[k]
		} else {
			rsum += p.ref * p.w[k]
		}
		wsum += p.w[k]
	}
	p.w[s] = (1-p.alpha)*p.w[s] + p.alpha*wsum*p.rate[s]/rsum
	var total float64
	for _, x := range p.w {
		total += x
	}
	for k := range p.w {
		p.w[k] = max(p.w[k]/total, p.floor)
	}
	return true
}

// Update applies eq. 7.4 / 8.3 to the weights w (one per subchannel) for the paths of one
// operation's stripes: each stripe's rate b_i/t_i redistributes the paths' summed weight
// W_batch, blended with the old weights by α. Weights below floor·Σw are raised to it (taken from
// the other paths of the batch, in proportion to what they have above it). It reports whether
// anything changed; stripes with Delivery ≤ 0 or Bytes ≤ 0 are ignored, as are duplicates of a
// subchannel already seen.
func Update(w []float64, done []Done, alpha, floor float64) bool {
	var seen [MaxSubchannels]bool
	var rate [MaxSubchannels]float64
	var idx [MaxSubchannels]int
	m := 0
	var wb, rsum, total float64
	for _, x := range w {
		total += x
	}
	for _, d := range done {
		if d.Delivery <= 0 || d.Bytes <= 0 || d.Sub < 0 || d.Sub >= len(w) || seen[d.Sub] {
			continue
		}
		seen[d.Sub] = true
		idx[m] = d.Sub
		rate[m] = float64(d.Bytes) / float64(d.Delivery/time.Nanosecond)
		wb += w[d.Sub]
		rsum += rate[m]
		m++
	}
	if m < 2 || rsum <= 0 {
		return false
	}
	min := floor * total
	var deficit, above float64
	for k := 0; k < m; k++ {
		i := idx[k]
		w[i] = (1-alpha)*w[i] + alpha*wb*rate[k]/rsum
		if w[i] < min {
			deficit += min - w[i]
			w[i] = min
		} else {
			above += w[i] - min
		}
	}
	if deficit > 0 && above > 0 {
		for k := 0; k < m; k++ {
			i := idx[k]
			if w[i] > min {
				w[i] -= deficit * (w[i] - min) / above
			}
		}
	}
	return true
}

// sort orders p.order by non-increasing weight, ties by subchannel (insertion sort: n is small
// and the array is nearly sorted after one update).
func (p *BSS) sort() {
	o := p.order
	for i := 1; i < len(o); i++ {
		for j := i; j > 0 && p.before(o[j], o[j-1]); j-- {
			o[j], o[j-1] = o[j-1], o[j]
		}
	}
}

func (p *BSS) before(a, b int) bool {
	if p.w[a] != p.w[b] {
		return p.w[a] > p.w[b]
	}
	return a < b
}
