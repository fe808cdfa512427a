package transport

import (
	"fmt"
	"time"
)

// statBuckets is the number of buckets of a statistics window: a peer's recent traffic is kept
// as statBuckets counters of Window/statBuckets each, so Record is O(1) and a peer's record is
// a fixed few hundred bytes ([Takagi15 §4.2] keeps a table of the same kind).
const statBuckets = 8

// bucket is the traffic to one peer during one slot of the window.
type bucket struct {
	slot        int64 // the slot's number: time since the epoch / slot width
	msgs, bytes int64
}

// peerRecord is one peer's statistics.
type peerRecord struct {
	msgs, bytes int64 // since the start
	last        time.Time
	ring        [statBuckets]bucket
}

// Stats are per-peer communication statistics (messages, bytes, recent traffic over a sliding
// window of Window), fed with Record events carrying the time; not safe for concurrent use (the
// driver serializes). Memory: one fixed record of 232 bytes per peer.
type Stats struct {
	window, slot time.Duration
	now          time.Time // latest time seen
	peers        []peerRecord
}

// Recent is a peer's traffic within the window ending at a given time.
type Recent struct {
	Msgs, Bytes int64
}

// NewStats returns statistics for peers 0..peers-1 over a sliding window of length window
// (at least statBuckets ns). Errors wrap ErrBadConfig.
func NewStats(peers int, window time.Duration) (*Stats, error) {
	if peers < 0 {
		return nil, fmt.Errorf("%w: %d peers", ErrBadConfig, peers)
	}
	if window < statBuckets {
		return nil, fmt.Errorf("%w: window %v shorter than %d ns", ErrBadConfig, window, statBuckets)
	}
	return &Stats{window: window, slot: window / statBuckets, peers: make([]peerRecord, peers)}, nil
}

// Peers returns the number of peers.
func (s *Stats) Peers() int { return len(s.peers) }

// Window returns the length of the sliding window.
func (s *Stats) Window() time.Duration { return s.window }

func (s *Stats) check(peer int, now time.Time) error {
	if peer < 0 || peer >= len(s.peers) {
		return fmt.Errorf("%w: peer %d of %d", ErrBadPeer, peer, len(s.peers))
	}
	if now.Before(s.now) {
		return fmt.Errorf("%w: %v before %v", ErrBadTime, now, s.now)
	}
	return nil
}

// Record counts one message of n bytes (n ≥ 0) to peer at time now. Errors (ErrBadPeer,
// ErrBadTime, ErrBadEvent for n < 0) change nothing.
func (s *Stats) Record(peer int, n int64, now time.Time) error {
	return s.RecordBatch(peer, 1, n, now)
}

// RecordBatch counts msgs messages of bytes bytes in all to peer at time now: a driver that
// keeps its own counters on the hot path (rma's per-peer atomic counters) feeds their increase
// once per evaluation instead of every message. Errors (ErrBadPeer, ErrBadTime, ErrBadEvent for
// a negative count) change nothing.
func (s *Stats) RecordBatch(peer int, msgs, bytes int64, now time.Time) error {
	if err := s.check(peer, now); err != nil {
		return err
	}
	if msgs < 0 || bytes < 0 {
		return fmt.Errorf("%w: %d messages of %d bytes", ErrBadEvent, msgs, bytes)
	}
	s.now = now
	p := &s.peers[peer]
	p.msgs += msgs
	p.bytes += bytes
	if msgs > 0 {
		p.last = now
	}
	slot := now.UnixNano() / int64(s.slot)
	b := &p.ring[slot%statBuckets]
	if b.slot != slot {
		*b = bucket{slot: slot}
	}
	b.msgs += msgs
	b.bytes += bytes
	return nil
}

// Total returns the messages and bytes recorded to peer since the start (zero for a peer out of
// range).
func (s *Stats) Total(peer int) Recent {
	if peer < 0 || peer >= len(s.peers) {
		return Recent{}
	}
	return Recent{s.peers[peer].msgs, s.peers[peer].bytes}
}

// Last returns the time of the latest message to peer (the zero time if none).
func (s *Stats) Last(peer int) time.Time {
	if peer < 0 || peer >= len(s.peers) {
		return time.Time{}
	}
	return s.peers[peer].last
}

// RecentAt returns the traffic to peer during the last span of the window ending at now: the
// slot holding now and the k−1 slots before it, k = span in slots (Window/8 each) rounded up,
// 1..8. Zero for a peer out of range.
func (s *Stats) RecentAt(peer int, now time.Time, span time.Duration) Recent {
	if peer < 0 || peer >= len(s.peers) {
		return Recent{}
	}
	k := int64((span + s.slot - 1) / s.slot)
	k = max(1, min(k, statBuckets))
	cur := now.UnixNano() / int64(s.slot)
	var r Recent
	for _, b := range s.peers[peer].ring {
		if b.slot > cur-k && b.slot <= cur {
			r.Msgs += b.msgs
			r.Bytes += b.bytes
		}
	}
	return r
}

// Rate returns the recent message rate to peer at now, in messages per second over the window.
func (s *Stats) Rate(peer int, now time.Time) float64 {
	return float64(s.RecentAt(peer, now, s.window).Msgs) / s.window.Seconds()
}
