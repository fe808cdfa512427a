package recovery

import "time"

// MaxPorts is the largest number of ports (rails) a repository tracks.
const MaxPorts = 32

// Paths is the path repository of one connection [Vishnu07 §10.3.2]: the candidate paths to the
// peer — port p of this device to port p of the peer's, rail to rail, as the rails are separate
// networks — with their health. A path is unhealthy while its local port is down, or for a
// back-off period after a queue pair failed on it; the home path is preferred whenever healthy,
// so a recovered rail is given back (§10.3.3).
type Paths struct {
	Home   uint8 // the connection's own rail (1-based)
	N      uint8 // ports usable on both sides
	failed [MaxPorts]time.Time
	// Backoff is how long a failed path is avoided (default 500 ms); after it, the path is
	// probed again by using it.
	Backoff time.Duration
}

// NewPaths returns the repository of a connection whose home rail is home, with n rails shared
// with the peer.
func NewPaths(home, n uint8) *Paths {
	n = min(n, MaxPorts)
	if home == 0 || home > n {
		home = 1
	}
	return &Paths{Home: home, N: n, Backoff: 500 * time.Millisecond}
}

// Fail records that a queue pair failed on port p at now.
func (ps *Paths) Fail(p uint8, now time.Time) {
	if p >= 1 && p <= ps.N {
		ps.failed[p-1] = now
	}
}

// Recovered forgets the failure of port p (it carried traffic again).
func (ps *Paths) Recovered(p uint8) {
	if p >= 1 && p <= ps.N {
		ps.failed[p-1] = time.Time{}
	}
}

// Choose returns the port of the path to use now: the home rail when it is up on both sides
// (localUp and peerUp are bit masks, bit p-1 for port p) and not in back-off, else the next
// such rail in round-robin order from home; when every up rail is in back-off, the one that
// failed longest ago (probing it); ok is false when no rail is up on both sides (a network
// partition, as far as this side knows).
func (ps *Paths) Choose(localUp, peerUp uint32, now time.Time) (port uint8, ok bool) {
	var oldest uint8
	var oldestT time.Time
	for i := uint8(0); i < ps.N; i++ {
		p := (ps.Home-1+i)%ps.N + 1
		if localUp&peerUp&(1<<(p-1)) == 0 {
			continue
		}
		f := ps.failed[p-1]
		if f.IsZero() || now.Sub(f) >= ps.Backoff {
			return p, true
		}
		if oldest == 0 || f.Before(oldestT) {
			oldest, oldestT = p, f
		}
	}
	return oldest, oldest != 0
}
