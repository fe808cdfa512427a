package rma

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/goarmci/goarmci/hybridft"
)

// On-demand connections ([Vishnu09 §IV.B.2]; [Sridhar08]: "RC connections aren't scalable ... on
// demand connection setup"). In a job of more ranks than GOARMCI_ON_DEMAND_THRESHOLD (as
// MVAPICH2's MV2_ON_DEMAND_THRESHOLD), Init exchanges only each rank's UD connection manager
// address — a few dozen bytes per rank instead of one connection description per peer and
// rail — and creates no queue pair for network peers. The first operation to a peer dials it
// through the UD connection manager (hybridft.OnDemand: REQ/REP/RTU); the peer installs its
// side of the channel when the handshake completes, whichever side started it. A rank that
// talks to k of N peers holds k × rails queue pairs, not (N-1) × rails. Same-node peers
// (shared memory) are always connected at Init: their connections cost no network resources.

// onDemand reports whether network peers are connected on demand in this job.
func (r *Runtime) onDemand(n *network) bool {
	return n.mgr != nil && n.kind == TransportTCP && (r.size > r.cfg.env.cfg.OnDemandThreshold || r.cfg.NetworkTransport == NetAdaptive)
}

// jobTag is the job id the connection manager's messages carry (messages of another job are
// ignored).
func jobTag(job string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(job))
	return h.Sum32()
}

// startOnDemand opens the on-demand connection setup of network ni.
func (r *Runtime) startOnDemand(ni int) error {
	n := r.nets[ni]
	od, err := n.mgr.OnDemand(n.eps, uint32(r.rank), jobTag(r.cfg.Job), func(peer uint32, conns []*hybridft.Conn) {
		r.installOnDemand(ni, peer, conns)
	})
	if err != nil {
		return err
	}
	n.od = od
	if r.ad != nil {
		r.ad.hook(od)
	}
	r.closers = append(r.closers, od.Close) // before the manager's Close: closers run in reverse
	return nil
}

// installOnDemand is the accept callback (on the manager's goroutine): the connections to peer
// become the subchannels of its channel. Connections for an unknown peer, a peer that is not
// connected on demand, or after teardown began, are closed.
func (r *Runtime) installOnDemand(ni int, peer uint32, conns []*hybridft.Conn) {
	r.odMu.Lock()
	defer r.odMu.Unlock()
	p := int(peer)
	reject := func(why string) {
		r.log.Warn().Int("peer", p).Str("why", why).Msg("rma: on-demand connection refused")
		for _, c := range conns {
			_ = c.Close()
		}
	}
	switch {
	case r.odClosed:
		reject("finalizing")
		return
	case p < 0 || p >= r.size || p == r.rank:
		reject("no such peer")
		return
	case r.failedErr(p) != nil:
		reject("declared failed") // an expelled rank that resumed: its traffic is not taken
		return
	}
	pe := r.peers[p]
	if r.ad != nil && pe.net == ni && pe.dc != nil {
		r.ad.install(pe, conns, reject)
		return
	}
	if !pe.lazy || pe.net != ni || pe.ready.Load() {
		reject("peer not connected on demand, or already connected")
		return
	}
	ch, err := r.nets[ni].net.NewChannelConfig(r.channelConfig(), conns...)
	if err != nil {
		reject(err.Error())
		return
	}
	pe.ch.Store(ch)
	pe.ready.Store(true) // publishes ch
	r.log.Debug().Int("peer", p).Int("rails", len(conns)).Msg("rma: connected on demand")
}

// dial connects a peer connected on demand the first time an operation needs it (blocking
// until the handshake completes or ctx ends); later calls cost one atomic load. Errors:
// ErrTransport wrapping the dial's error, or ErrFinalized when teardown refused the connection.
func (r *Runtime) dial(ctx context.Context, pe *peer) error {
	if pe.ready.Load() {
		return nil
	}
	if _, err := r.nets[pe.net].od.Dial(ctx, uint32(pe.rank), pe.odAddr); err != nil {
		return fmt.Errorf("%w: connecting to rank %d on demand: %w", ErrTransport, pe.rank, err)
	}
	if !pe.ready.Load() { // installOnDemand refused it: teardown began
		return fmt.Errorf("%w: rank %d: %w", ErrTransport, pe.rank, ErrFinalized)
	}
	return nil
}

// Connected reports whether this rank holds a channel to rank p (always true for same-node and
// eagerly connected peers once Init returned; for peers connected on demand, after the first
// operation between the two ranks).
func (r *Runtime) Connected(p int) bool {
	if p < 0 || p >= r.size || p == r.rank || r.peers == nil {
		return false
	}
	pe := r.peers[p]
	return !pe.lazy && pe.ch.Load() != nil || pe.lazy && pe.ready.Load()
}
