package rma

import "github.com/goarmci/goarmci/multirail"

// Rails is a read-only view of the rails that carry this rank's operations to one network peer:
// the subchannels of the peer's multirail channel, one RC connection per rail — per (rail, path)
// with Config.Paths > 1, rail-major (paths.go) — and the policy that stripes operations over
// them [Vishnu07 ch. 4, 7]. Its counters are live. A nil *Rails (no
// channel to the peer) has no rails.
type Rails struct{ ch *multirail.Channel }

// Rails returns the rails to network peer p, or nil for this rank itself, a bad rank, a peer of
// this node (reached over shared memory, without rails), or a peer connected on demand that has
// not been used yet.
func (r *Runtime) Rails(p int) *Rails {
	ch := r.channel(p)
	if ch == nil {
		return nil
	}
	return &Rails{ch: ch}
}

// Len is the number of subchannels (rails × paths).
func (rs *Rails) Len() int {
	if rs == nil {
		return 0
	}
	return len(rs.ch.Subchannels())
}

// Policy names the striping policy (its multirail/sched Name: "round-robin", "binding:1",
// "fragment", ...), "" for a single rail (nothing to stripe).
func (rs *Rails) Policy() string {
	if rs == nil {
		return ""
	}
	return rs.ch.Policy()
}

// Posted is the number of work requests (stripes) ever posted on rail i (0-based), 0 for a rail
// that does not exist.
func (rs *Rails) Posted(i int) int64 {
	if rs == nil {
		return 0
	}
	return rs.ch.Posted(i)
}

// Stats returns one RailStats per rail, in rail order (nil without rails).
func (rs *Rails) Stats() []RailStats {
	if rs == nil {
		return nil
	}
	var out []RailStats
	for i, sub := range rs.ch.Subchannels() {
		fs := sub.Stats()
		out = append(out, RailStats{Posted: rs.ch.Posted(i), PathMigrations: fs.PathMigrations,
			Recoveries: fs.Recoveries, Reposted: fs.Reposted,
			Retransmissions: int64(fs.Transport.Retransmissions()), Duplicates: int64(fs.Transport.DuplicateRequest)})
	}
	return out
}
