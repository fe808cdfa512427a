package sched

// mux multiplexes the operations a striping policy sends whole — those below the switchover
// threshold, atomics, and (EPC) non-blocking ones — over the policy's subchannels: [Vishnu07]
// §4.3.2 (striping for large messages, multiplexing for small ones) with the least-overhead
// property of binding (§4.1.2) while the origin is latency bound.
//
// The rule: an operation stays on the subchannel that carried the previous one as long as that
// subchannel has nothing in flight; otherwise it goes to the least busy subchannel, the first
// after the previous one in round-robin order on ties. "Busy" counts the stripes scheduled on a
// subchannel and not yet completed, of every operation (striped and pinned ones included).
//
// Why not plain round robin: an origin that issues one small blocking operation at a time
// (ARMCI_Put + ARMCI_Fence, ARMCI_Get, a lock, a barrier step) gains nothing from a second
// queue pair, but round robin moves every operation to another one, whose stream, reader
// goroutine and completion path have gone cold since the last use on this class of transport
// (a parked reader costs tens of µs to wake, and polling readers on every rail take the cores
// the ranks need): with round robin, 8 B put and get latency on 2 and 4 rails stayed above one
// rail's and never reached what one rail reaches while its reader polls (bench/SCENARIOS.md,
// bench/README.md "Design measurements"). With the rule above such an origin uses one subchannel, like binding,
// and pays one rail's latency. A burst of non-blocking operations still spreads as round robin does
// (each finds the previous subchannel busy and takes the next idle one), so the message rate of
// n queue pairs is kept; and a small operation avoids a subchannel loaded by a large transfer.
type mux struct {
	last int
	busy []int32
}

func newMux(n int) mux { return mux{busy: make([]int32, n)} }

// pick returns the subchannel of the next whole operation among cands (nil: every subchannel;
// else distinct subchannels, in the caller's order of preference for the round robin) and
// remembers it as the previous one.
func (m *mux) pick(cands []int) int {
	n := len(cands)
	sub := func(i int) int { return cands[i] }
	at := -1 // the previous subchannel's position among the candidates
	if cands == nil {
		n, at = len(m.busy), m.last
		sub = func(i int) int { return i }
	} else {
		for i, s := range cands {
			if s == m.last {
				at = i
				break
			}
		}
	}
	if at >= 0 && m.busy[m.last] == 0 {
		return m.last
	}
	best := -1
	for k := 1; k <= n; k++ {
		if s := sub((at + k + n) % n); best < 0 || m.busy[s] < m.busy[best] {
			best = s
		}
	}
	m.last = best
	return best
}

// scheduled counts the stripes of one operation as in flight.
func (m *mux) scheduled(st []Stripe) {
	for _, s := range st {
		if s.Sub >= 0 && s.Sub < len(m.busy) {
			m.busy[s.Sub]++
		}
	}
}

// completed takes the completed stripes of one operation out of the counts.
func (m *mux) completed(done []Done) {
	for _, d := range done {
		if d.Sub >= 0 && d.Sub < len(m.busy) && m.busy[d.Sub] > 0 {
			m.busy[d.Sub]--
		}
	}
}
