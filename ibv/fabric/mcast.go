package fabric

import (
	"fmt"
	"slices"

	"github.com/goarmci/goarmci/ibv"
)

// UD multicast on the fabric ([IBA] §10.5; ibv.QP.AttachMcast): the switch of each rail keeps,
// per multicast LID, the ports of the nodes with a queue pair attached (joined through the
// engine's McastTransport), and replicates a multicast packet to every one of them, the
// sender's own node included. Each copy then travels as a packet of its own on the link from
// the sender to that member; with a Topology, on that member's route, except that the sender's
// first link is crossed once (the leaf switch makes the copies). The plan's rules — seeded
// loss, delay, partitions, down ports — act on every receiver's copy independently, and a lost
// copy is not sent again (UD).

type mcastKey struct {
	rail uint8
	lid  uint16
}

// mcastJoin adds a reference of node n's port on rail to group lid.
func (f *Fabric) mcastJoin(n *node, rail uint8, lid uint16) {
	f.mcMu.Lock()
	defer f.mcMu.Unlock()
	if f.mcast == nil {
		f.mcast = map[mcastKey]map[int]int{}
	}
	k := mcastKey{rail, lid}
	if f.mcast[k] == nil {
		f.mcast[k] = map[int]int{}
	}
	f.mcast[k][n.idx]++
}

// mcastLeave drops a reference of node n's port on rail to group lid.
func (f *Fabric) mcastLeave(n *node, rail uint8, lid uint16) {
	f.mcMu.Lock()
	defer f.mcMu.Unlock()
	k := mcastKey{rail, lid}
	m := f.mcast[k]
	if m == nil {
		return
	}
	if m[n.idx]--; m[n.idx] <= 0 {
		delete(m, n.idx)
	}
	if len(m) == 0 {
		delete(f.mcast, k)
	}
}

// mcastForget drops every membership of node n (its device closed).
func (f *Fabric) mcastForget(n *node) {
	f.mcMu.Lock()
	defer f.mcMu.Unlock()
	for k, m := range f.mcast {
		delete(m, n.idx)
		if len(m) == 0 {
			delete(f.mcast, k)
		}
	}
}

// McastMembers returns the nodes whose port on rail joined multicast LID lid, in order.
func (f *Fabric) McastMembers(rail uint8, lid uint16) []int {
	f.mcMu.Lock()
	defer f.mcMu.Unlock()
	var out []int
	for i := range f.mcast[mcastKey{rail, lid}] {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// JoinMcast joins the node's port to a group (engine.McastTransport).
func (t *transport) JoinMcast(port uint8, _ ibv.GID, lid uint16) error {
	n := (*node)(t)
	if _, err := n.port(port); err != nil {
		return err
	}
	n.f.mcastJoin(n, port, lid)
	return nil
}

// LeaveMcast leaves a group (engine.McastTransport).
func (t *transport) LeaveMcast(port uint8, _ ibv.GID, lid uint16) error {
	n := (*node)(t)
	n.f.mcastLeave(n, port, lid)
	return nil
}

// SendMcast replicates one packet to every member of group path.DLID on the rail of the local
// port path.PortNum (engine.McastTransport). Errors wrap ibv.ErrUnreachable (the local port is
// down) or ibv.ErrInvalidArgument (no such port); a copy that cannot reach its member is lost.
func (t *transport) SendMcast(path ibv.AHAttr, hdr, payload []byte) error {
	n := (*node)(t)
	f := n.f
	src, err := n.port(path.PortNum)
	if err != nil {
		return err
	}
	if src.down.Load() {
		return fmt.Errorf("fabric: %w: port %d of node %d is down", ibv.ErrUnreachable, src.num, n.idx)
	}
	members := f.McastMembers(path.PortNum, path.DLID)
	f.mu.RLock()
	dsts := make([]*port, 0, len(members))
	for _, i := range members {
		if i < len(f.nodes) {
			dsts = append(dsts, f.nodes[i].ports[path.PortNum-1])
		}
	}
	f.mu.RUnlock()
	replica := false // a copy has crossed the sender's first link: the switch copies it
	for _, dst := range dsts {
		up, err := f.sendCopy(src, dst, path.SrcPathBits, 0, hdr, payload, replica)
		if err != nil {
			f.log.Debug().Err(err).Int("node", dst.n.idx).Msg("fabric: multicast copy lost")
		}
		replica = replica || up && err == nil
	}
	return nil
}
