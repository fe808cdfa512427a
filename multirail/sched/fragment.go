package sched

// Fragment is the one-sided policy of [Vishnu07 ch. 5]: operations below the switchover threshold
// go whole (§5.2.3), multiplexed as Even multiplexes them (mux: on the previous operation's
// subchannel while it is idle, else the least busy one, round robin on ties); larger ones are
// cut by load-balanced fragmentation (§5.2.2): the policy keeps, per subchannel, independent
// load queues — the bytes of RDMA writes (puts, accumulates) and of RDMA reads (gets) scheduled
// and not yet completed — because writes and reads use the link in opposite directions. A put is spread so that the write loads become as
// equal as possible (water filling: the least loaded subchannels are filled first), a get
// likewise on the read loads. With one kind of operation and empty queues this is equal
// fragmentation; with a mix of equal-size puts and gets it falls back to equal fragmentation
// (§5.2.2). Since a faster rail drains its queue sooner, a stream of operations in flight also
// shifts towards the faster rails.
type Fragment struct {
	mux       mux
	threshold int
	load      [2][]int64 // [0] writes, [1] reads: bytes outstanding per subchannel
	subs      []int
	share     []float64
	order     []int
}

// NewFragment returns load-balanced fragmentation over n subchannels.
func NewFragment(n, threshold int) *Fragment {
	return &Fragment{mux: newMux(n), threshold: threshold, load: [2][]int64{make([]int64, n), make([]int64, n)},
		subs: make([]int, 0, n), share: make([]float64, 0, n), order: make([]int, n)}
}

// Name implements Policy.
func (p *Fragment) Name() string { return "fragment" }

// Feedback implements Policy (loads need bytes, not times).
func (p *Fragment) Feedback() bool { return false }

// Load returns the outstanding write (put, accumulate) and read (get) bytes of subchannel s.
func (p *Fragment) Load(s int) (write, read int64) { return p.load[0][s], p.load[1][s] }

func dir(k Kind) int {
	if k == Get {
		return 1
	}
	return 0
}

// Schedule implements Policy.
func (p *Fragment) Schedule(op Op, dst []Stripe) []Stripe {
	start := len(dst)
	switch {
	case op.Pinned:
		dst = single(dst, op, op.Sub)
	case op.Kind == Atomic || op.Size < p.threshold:
		dst = single(dst, op, p.mux.pick(nil))
	default:
		dst = p.fill(op, dst)
	}
	p.mux.scheduled(dst[start:])
	if op.Kind != Atomic {
		l := p.load[dir(op.Kind)]
		for _, s := range dst[start:] {
			l[s.Sub] += int64(s.Len)
		}
	}
	return dst
}

// fill water-fills op.Size bytes over the load queue of op's direction.
func (p *Fragment) fill(op Op, dst []Stripe) []Stripe {
	l := p.load[dir(op.Kind)]
	n := len(l)
	o := p.order
	for i := range o {
		o[i] = i
	}
	for i := 1; i < n; i++ { // by load, ties by index
		for j := i; j > 0 && (l[o[j]] < l[o[j-1]] || l[o[j]] == l[o[j-1]] && o[j] < o[j-1]); j-- {
			o[j], o[j-1] = o[j-1], o[j]
		}
	}
	// Find the level λ with Σ_k max(0, λ − l_k) = size: the first k subchannels are below it.
	size := int64(op.Size)
	k, sum := 1, l[o[0]]
	for k < n && int64(k)*l[o[k]]-sum < size {
		sum += l[o[k]]
		k++
	}
	level := float64(size+sum) / float64(k)
	p.subs, p.share = p.subs[:0], p.share[:0]
	for i := 0; i < k; i++ {
		p.subs = append(p.subs, o[i])
		p.share = append(p.share, level-float64(l[o[i]]))
	}
	// Stripes in subchannel order, so the offsets do not depend on the loads' order.
	for i := 1; i < len(p.subs); i++ {
		for j := i; j > 0 && p.subs[j] < p.subs[j-1]; j-- {
			p.subs[j], p.subs[j-1] = p.subs[j-1], p.subs[j]
			p.share[j], p.share[j-1] = p.share[j-1], p.share[j]
		}
	}
	return split(dst, op, p.subs, p.share)
}

// Complete implements Policy: the stripes leave their load queues (and the busy counts).
func (p *Fragment) Complete(op Op, done []Done) {
	p.mux.completed(done)
	if op.Kind == Atomic {
		return
	}
	l := p.load[dir(op.Kind)]
	for _, d := range done {
		if d.Sub >= 0 && d.Sub < len(l) {
			l[d.Sub] = max(0, l[d.Sub]-int64(d.Bytes))
		}
	}
}
