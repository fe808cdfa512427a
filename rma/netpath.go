package rma

import (
	"context"
	"fmt"
	"slices"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/multirail"
)

// How network peers are reached (GOARMCI_NET_TRANSPORT, Config.NetworkTransport) [Takagi15]:
//
//   - "rc": a dedicated RC connection per peer and rail (and path), set up at Init or on demand
//     above GOARMCI_ON_DEMAND_THRESHOLD ranks; memory grows with the peers talked to.
//   - "dc": the shared datagram path. Each rank has one DC queue pair per rail (ibv.DC, the
//     Dynamically Connected transport of [Takagi15 §2.1]) that carries RDMA write, read, atomics
//     and accumulates to every network peer, the engine keeping the RC guarantees per peer
//     record (exactly once under loss, duplication and reordering; [Sridhar08]: UD as the
//     scalable transport). A peer costs a small record at each end, not a queue pair. Every
//     network peer's channel is a multirail channel of one DC view (hybridft.NewDCConn) per
//     rail, so striping, fences and flushes work as over RC.
//   - "adaptive": every peer starts on the shared path; the adaptive driver (adaptive.go)
//     promotes the peers whose traffic gains most to dedicated RC connections, at most
//     GOARMCI_MAX_RC at a time, dialled on demand through the UD connection manager, and closes
//     idle ones by agreement of both ends [Takagi15 §3.2–3.4].
//
// A peer's channel is switched only while its gate holds new operations back and the ones
// already issued to it have completed (begin, waitGate; the driver's drain), so no operation on
// the new path starts before every earlier one on the old path completed: ARMCI's ordering of
// overlapping operations from one origin holds across a switch [Takagi15 §3.3].

// Values of Config.NetworkTransport.
const (
	NetRC       = "rc"
	NetDC       = "dc"
	NetAdaptive = "adaptive"
)

// openDC creates the DC queue pair of every rail of network n (one per port: the endpoints of
// other path bits share it). They are destroyed at teardown, after the channels.
func (r *Runtime) openDC(n *network) error {
	for _, ep := range n.eps {
		if ep.PathBits != 0 {
			continue
		}
		qp, err := ep.NewDCQP()
		if err != nil {
			return err
		}
		n.dcqps = append(n.dcqps, qp)
		n.dceps = append(n.dceps, ep)
	}
	r.closers = append(r.closers, func() error {
		var first error
		for _, qp := range n.dcqps {
			if err := qp.Destroy(); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
	return nil
}

// dcBlob is this rank's DC queue pairs as peers need them: a count, then per rail a length byte
// and a ConnInfo (address, LID, QP number). Empty without a shared path.
func (r *Runtime) dcBlob(n *network) ([]byte, error) {
	if n == nil || len(n.dcqps) == 0 {
		return nil, nil
	}
	b := []byte{byte(len(n.dcqps))}
	for i, qp := range n.dcqps {
		ci, err := hybridft.DCInfo(qp, n.dceps[i])
		if err != nil {
			return nil, err
		}
		m := ci.Marshal()
		b = append(b, byte(len(m)))
		b = append(b, m...)
	}
	return b, nil
}

// connectDC builds the shared-path channel of network peer pe from its DC blob: one DC view per
// rail both ranks have. Errors wrap ErrConfig when the peer has no shared path (the ranks
// disagree on GOARMCI_NET_TRANSPORT).
func (r *Runtime) connectDC(pe *peer, blob []byte) error {
	n := r.nets[pe.net]
	if len(blob) == 0 {
		return fmt.Errorf("%w: rank %d has no shared datagram path, this rank uses GOARMCI_NET_TRANSPORT=%s: "+
			"it must be equal on every rank", ErrConfig, pe.rank, r.cfg.NetworkTransport)
	}
	cis, err := railInfos(blob)
	if err != nil {
		return fmt.Errorf("rank %d: %w", pe.rank, err)
	}
	k := min(len(cis), len(n.dcqps))
	conns := make([]*hybridft.Conn, 0, k)
	for i := 0; i < k; i++ {
		c, err := n.dceps[i].NewDCConn(n.dcqps[i], cis[i])
		if err != nil {
			return fmt.Errorf("rank %d rail %d: %w", pe.rank, i, err)
		}
		conns = append(conns, c)
	}
	ch, err := n.net.NewChannelConfig(r.channelConfig(), conns...)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	pe.dc = ch
	pe.ch.Store(ch)
	return nil
}

// channels returns the distinct channels the peer holds (the one in use, the shared path's,
// a pooled RC connection's).
func (pe *peer) channels() []*multirail.Channel {
	var out []*multirail.Channel
	for _, ch := range []*multirail.Channel{pe.ch.Load(), pe.dc, pe.rc} {
		if ch != nil && !slices.Contains(out, ch) {
			out = append(out, ch)
		}
	}
	return out
}

// countNet records one operation of n bytes to the peer for the adaptive selection (two atomic
// adds; the driver reads them about once a second).
func (pe *peer) countNet(n int64) {
	pe.sent.Add(1)
	pe.sentBytes.Add(n)
}

// waitGate is begin's slow path while the adaptive driver switches pe's channel: the operation
// takes its count back (so the drain can end), waits for the gate to open — making progress on
// the peer's network, as the drain needs completions — and counts itself again. Called with
// the operation counted in pe.outstanding; returns with it counted and the gate open.
func (r *Runtime) waitGate(pe *peer) {
	n := r.nets[pe.net].net
	for pe.gate.Load() {
		pe.outstanding.Add(-1)
		_ = r.pollUntil(context.Background(), func() bool { n.Progress(); return !pe.gate.Load() })
		pe.outstanding.Add(1)
	}
}

// drainPeer closes pe's gate and waits until every operation issued to it has completed (or
// the peer failed): the suspend and drain steps of a path switch. The caller opens the gate
// (pe.gate.Store(false)) once it has switched.
func (r *Runtime) drainPeer(pe *peer) {
	pe.gate.Store(true)
	n := r.nets[pe.net].net
	_ = r.pollUntil(context.Background(), func() bool {
		n.Progress()
		return pe.outstanding.Load() == 0 || r.failedErr(pe.rank) != nil
	})
}

// chanMemory is the memory of a channel's subchannels: of an RC channel its queue pairs, of the
// shared path's view of a peer its DC views (records, address handles, the DC queue pairs' peer
// records).
func chanMemory(ch *multirail.Channel) (qps int, bytes int64) {
	for _, c := range ch.Subchannels() {
		qps++
		bytes += c.MemoryFootprint()
	}
	return qps, bytes
}

// dcQPMemory is the memory of network n's DC queue pairs without their peer records (counted per
// peer: chanMemory).
func dcQPMemory(n *network) (qps int, bytes int64) {
	for _, qp := range n.dcqps {
		qps++
		bytes += qp.MemoryFootprint() - int64(qp.DCPeers())*qp.DCPeerBytes()
	}
	return qps, bytes
}

// netOf is the runtime's network of kind, or nil.
func (r *Runtime) netOf(kind Transport) *network {
	for _, n := range r.nets {
		if n.kind == kind {
			return n
		}
	}
	return nil
}

// openNetPath sets up what Config.NetworkTransport asks of the network once it is open: the DC
// queue pairs (dc, adaptive) and the adaptive driver. Errors wrap ErrConfig when adaptive has no
// connection manager to dial RC connections through.
func (r *Runtime) openNetPath() error {
	mode := r.cfg.NetworkTransport
	n := r.netOf(TransportTCP)
	if mode == NetRC || n == nil {
		return nil
	}
	if mode == NetAdaptive && n.mgr == nil {
		return fmt.Errorf("%w: GOARMCI_NET_TRANSPORT=adaptive dials RC connections through the connection manager: "+
			"it needs GOARMCI_FT (and Config.NetworkDeviceFT on a given device)", ErrConfig)
	}
	if err := r.openDC(n); err != nil {
		return err
	}
	if mode == NetAdaptive {
		ad, err := newAdaptive(r)
		if err != nil {
			return err
		}
		r.ad = ad
	}
	return nil
}

// rcOrNet is the RC channel of network peer pe for the memory accounting: its channel under rc,
// its RC connection (in use or pooled) under adaptive, nil on the shared path only.
func (r *Runtime) rcOrNet(pe *peer) *multirail.Channel {
	if pe.dc == nil {
		return r.channel(pe.rank)
	}
	return r.rcOf(pe)
}

// rcOf is pe's RC connection under the adaptive transport (in use or pooled), or nil.
func (r *Runtime) rcOf(pe *peer) *multirail.Channel {
	r.odMu.Lock()
	defer r.odMu.Unlock()
	return pe.rc
}
