package transport

import (
	"cmp"
	"slices"
	"time"
)

// Costs are the parameters of the cost model of FIND_MAP [Takagi15 §3.2, Table 2, App. A]. The
// shared datagram path is the model's baseline (its DC-sendrecv channel); goarmci has no
// DC-RDMA tier, so a peer either keeps the baseline or gets a dedicated RC connection.
type Costs struct {
	// RCGain (r) is the latency one message saves on a dedicated RC queue pair instead of the
	// shared path.
	RCGain time.Duration
	// Credit (c) is the cost of one credit message, sent once every RingEntries (s) messages of
	// a dedicated connection [Takagi15 App. A.2].
	Credit      time.Duration
	RingEntries int
	// Poll (p) is the cost of one failed poll of one connection's receive ring; with l dedicated
	// connections the busiest peer's messages wait l/2 polls each [Takagi15 App. A.1].
	Poll time.Duration
	// Setup (ρ) is the cost of establishing a new RC connection, Reuse that of taking one back
	// from the pool [Takagi15 §3.4, App. A.3].
	Setup, Reuse time.Duration
}

// DefaultCosts returns the parameters of [Takagi15 Table 2] (r = 0.15 µs, c = 0.3 µs, s = 16,
// p = 0.01 µs, ρ = 10 µs), with a pooled connection's reuse at a tenth of ρ.
func DefaultCosts() Costs {
	return Costs{RCGain: 150 * time.Nanosecond, Credit: 300 * time.Nanosecond, RingEntries: 16,
		Poll: 10 * time.Nanosecond, Setup: 10 * time.Microsecond, Reuse: time.Microsecond}
}

// perMessage is the net saving of one message on a dedicated connection, r − c/s, in ns.
func (c Costs) perMessage() float64 {
	return float64(c.RCGain) - float64(c.Credit)/float64(c.RingEntries)
}

// Candidate is one peer offered to FindMap: its messages in the window and what giving it a
// dedicated connection costs now (0 when it has one, Costs.Reuse when one is pooled, Costs.Setup
// otherwise).
type Candidate struct {
	Peer  int
	Msgs  int64
	Setup time.Duration
}

// FindMap is FIND_MAP of [Takagi15 Fig. 6] with the shared path as baseline: the candidates
// sorted by messages (descending; ties: cheaper setup, then lower peer), it takes the m ≤ h
// first that maximize the latency reduction
//
//	x_m = Σ_{i≤m} n_i (r − c/s) − n_1 · m/2 · p − Σ_{i≤m} setup_i
//
// and returns those peers (in that order) and x_m in ns. Candidates without messages are never
// chosen; h ≤ 0 chooses none. cands is sorted in place.
func FindMap(c Costs, cands []Candidate, h int) (rc []int, gain float64) {
	slices.SortFunc(cands, func(a, b Candidate) int {
		if a.Msgs != b.Msgs {
			return cmp.Compare(b.Msgs, a.Msgs)
		}
		if a.Setup != b.Setup {
			return cmp.Compare(a.Setup, b.Setup)
		}
		return cmp.Compare(a.Peer, b.Peer)
	})
	per := c.perMessage()
	best, bestM, sum := 0.0, 0, 0.0
	for m := 1; m <= h && m <= len(cands) && cands[m-1].Msgs > 0; m++ {
		sum += float64(cands[m-1].Msgs)*per - float64(cands[m-1].Setup)
		x := sum - float64(cands[0].Msgs)*float64(m)/2*float64(c.Poll)
		if x > best {
			best, bestM = x, m
		}
	}
	rc = make([]int, bestM)
	for i := range rc {
		rc[i] = cands[i].Peer
	}
	return rc, best
}

// mappingGain is the latency reduction, in ns, of keeping the dedicated connections of the peers
// in rc over traffic msgs (per peer), without setup costs [Takagi15 §3.4 T2–T3].
func mappingGain(c Costs, msgs []int64, rc []int) float64 {
	var sum float64
	var top int64
	for _, p := range rc {
		sum += float64(msgs[p]) * c.perMessage()
		top = max(top, msgs[p])
	}
	return sum - float64(top)*float64(len(rc))/2*float64(c.Poll)
}
