package rma

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/goarmci/goarmci/internal/config"
)

// Communication statistics (GOARMCI_STATS, Config.Stats): per peer, the operations this rank
// issued to it and their bytes, and per rail of a network peer the work requests posted and the
// fault-tolerance events of its connection. Counting is decided at Init: without statistics the
// operations pay one predictable branch, with them two atomic adds per operation. Operations on
// the runtime's own segment (barrier flags, collective scratch) are not counted; collectives
// appear through the Puts they issue.

// peerCounters are one peer's counters (nil when statistics are off).
type peerCounters struct {
	puts, gets, accs, atomics atomic.Int64
	bytesOut, bytesIn         atomic.Int64
	waitNS                    atomic.Int64 // blocked waiting for completions of operations to the peer
}

// PeerStats is this rank's traffic to one peer (Runtime.Stats).
type PeerStats struct {
	Rank      int    `json:"rank"`
	Transport string `json:"transport"` // "self", "shm" or "tcp"
	Puts      int64  `json:"puts"`      // Put calls, contiguous, strided and vector, blocking or not
	Gets      int64  `json:"gets"`
	Accs      int64  `json:"accs"`
	Atomics   int64  `json:"atomics"`   // Rmw, compare-and-swap, mutex tickets
	BytesOut  int64  `json:"bytes_out"` // bytes of Puts and Accs
	BytesIn   int64  `json:"bytes_in"`  // bytes of Gets
	// WaitSeconds is the time this rank was blocked waiting for its operations to the peer to
	// complete: blocking Put/Get/Acc, Handle.Wait.
	WaitSeconds float64     `json:"wait_seconds"`
	Rails       []RailStats `json:"rails,omitempty"`
}

// RailStats is one rail (subchannel) of a network peer's channel.
type RailStats struct {
	Posted         int64 `json:"posted"` // work requests (stripes) posted
	PathMigrations int64 `json:"path_migrations"`
	Recoveries     int64 `json:"recoveries"`
	Reposted       int64 `json:"reposted"` // failed work requests issued again after a recovery
	// Retransmissions: how often the rail's queue pair went back to retransmit (ACK timeouts,
	// sequence-error and implied NAKs; ibv.QPCounters.Retransmissions).
	Retransmissions int64 `json:"retransmissions"`
	// Duplicates: requests from the peer received again after they were executed (answered, not
	// executed twice).
	Duplicates int64 `json:"duplicates"`
}

// Stats returns this rank's statistics, one entry per peer with any traffic (this rank
// included), in rank order; nil when statistics are off (GOARMCI_STATS=false, the default).
func (r *Runtime) Stats() []PeerStats {
	if !r.stats {
		return nil
	}
	var out []PeerStats
	for _, pe := range r.peers {
		c := pe.ctr
		s := PeerStats{Rank: pe.rank, Transport: r.TransportTo(pe.rank), Puts: c.puts.Load(), Gets: c.gets.Load(),
			Accs: c.accs.Load(), Atomics: c.atomics.Load(), BytesOut: c.bytesOut.Load(), BytesIn: c.bytesIn.Load(),
			WaitSeconds: time.Duration(c.waitNS.Load()).Seconds()}
		s.Rails = r.Rails(pe.rank).Stats()
		if s.Puts+s.Gets+s.Accs+s.Atomics > 0 || len(s.Rails) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// SyncWait is the time this rank spent in synchronization waits since Init: barriers, fences,
// collectives' waits, mutex and notify waits (0 when statistics are off).
func (r *Runtime) SyncWait() time.Duration { return time.Duration(r.syncWaitNS.Load()) }

// rankStats is the record writeStats prints.
type rankStats struct {
	Rank            int     `json:"rank"`
	Size            int     `json:"size"`
	SyncWaitSeconds float64 `json:"sync_wait_seconds"`
	// Rejected: attempts from outside the job this rank refused (Runtime.Rejected)
	Rejected int64       `json:"rejected"`
	Peers    []PeerStats `json:"peers"`
	// Memory is what the communication objects hold at Finalize (Runtime.Memory).
	Memory MemoryStats `json:"memory"`
	// Adaptive is the adaptive transport's decisions (GOARMCI_NET_TRANSPORT=adaptive only).
	Adaptive *AdaptiveStats `json:"adaptive,omitempty"`
}

// writeStats writes this rank's statistics (Finalize, GOARMCI_STATS): one JSON line for
// GOARMCI_STATS=json, else a few readable lines (one per peer, one per rail).
func (r *Runtime) writeStats(w io.Writer) {
	rs := rankStats{r.rank, r.size, r.SyncWait().Seconds(), r.Rejected(), r.Stats(), r.Memory(), nil}
	if r.ad != nil {
		a := r.Adaptive()
		rs.Adaptive = &a
	}
	if r.cfg.env.cfg.StatsFormat == config.StatsJSON {
		if b, err := json.Marshal(rs); err == nil {
			fmt.Fprintf(w, "goarmci stats %s\n", b)
		}
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "goarmci stats: rank %d of %d, %.3f s in synchronization waits, %d refused attempts from outside the job\n",
		rs.Rank, rs.Size, rs.SyncWaitSeconds, rs.Rejected)
	for _, p := range rs.Peers {
		fmt.Fprintf(&b, "  to rank %d (%s): %d puts, %d gets, %d accs, %d atomics, %s out, %s in, %.3f s waiting\n",
			p.Rank, p.Transport, p.Puts, p.Gets, p.Accs, p.Atomics, config.FormatBytes(p.BytesOut), config.FormatBytes(p.BytesIn), p.WaitSeconds)
		for i, rl := range p.Rails {
			fmt.Fprintf(&b, "    rail %d: %d work requests, %d retransmissions, %d duplicates, %d path migrations, %d recoveries, %d re-posted\n",
				i, rl.Posted, rl.Retransmissions, rl.Duplicates, rl.PathMigrations, rl.Recoveries, rl.Reposted)
		}
	}
	if a := rs.Adaptive; a != nil {
		fmt.Fprintf(&b, "  adaptive transport: %d promotions, %d demotions, %d connections closed, %d refused or failed; %d RC connections open, peers on RC %v\n",
			a.Promotions, a.Demotions, a.Closes, a.Refusals, a.OpenRC, a.OnRC)
	}
	writeMemory(&b, rs.Memory)
	io.WriteString(w, b.String())
}

// count records one transfer of n bytes to pe (statistics on; seg is not the runtime's own).
func (pe *peer) count(x xfer, n int) {
	c := pe.ctr
	switch x.kind {
	case kPut:
		c.puts.Add(1)
		c.bytesOut.Add(int64(n))
	case kGet:
		c.gets.Add(1)
		c.bytesIn.Add(int64(n))
	default:
		c.accs.Add(1)
		c.bytesOut.Add(int64(n))
	}
}

// bytes is the number of bytes the shape moves.
func (s *shape) bytes() int {
	if s.kind == shapeStrided {
		if s.st.empty() {
			return 0
		}
		n := 1
		for _, c := range s.st.count[:s.st.levels+1] {
			n *= c
		}
		return n
	}
	n := 0
	for _, v := range s.vecs {
		n += len(v.Local)
	}
	return n
}
