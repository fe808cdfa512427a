package engine

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/wire"
)

// UD multicast ([IBA] §10.5; ibv.QP.AttachMcast): the engine keeps which of its UD QPs are
// attached to which multicast GID and which groups each port has joined (the transport joins a
// group on a port when the first QP attaches there and leaves it with the last), wraps a UD send
// to a multicast LID in a multicast envelope and gives it to the transport's SendMcast, and
// delivers an inbound envelope to every QP attached to its MGID.
//
// The envelope is the provider-level stand-in for the GRH of an IB multicast packet:
//
//	magic 1 B (McastMagic) | MGID 16 B | MLID 2 B little-endian | the UD packet (wire format)
//
// whose UD packet's destination QPN is ibv.MulticastQPN. The first byte is never wire.Version,
// so Deliver tells envelopes from unicast packets.

// McastTransport is the extension of a Transport that carries UD multicast (an IP multicast
// group, a simulated switch's replication). A Transport without it has no multicast: AttachMcast
// fails with ibv.ErrUnsupported and multicast sends complete with ibv.WCLocQPOpErr.
type McastTransport interface {
	// JoinMcast makes local port receive the datagrams of group (gid, lid) (first attachment
	// of a QP of the port); LeaveMcast undoes it (last detachment).
	JoinMcast(port uint8, gid ibv.GID, lid uint16) error
	LeaveMcast(port uint8, gid ibv.GID, lid uint16) error
	// SendMcast sends one envelope — hdr followed by payload — from local port path.PortNum to
	// every port that joined group (path.DGID, path.DLID), its own included; Send's rules
	// apply. Copies are unreliable: losing some is no error.
	SendMcast(path ibv.AHAttr, hdr, payload []byte) error
}

// Envelope constants.
const (
	// McastMagic is the first byte of a multicast envelope.
	McastMagic = 0xe1
	// McastEnvelopeLen is the envelope's length in bytes before the UD packet.
	McastEnvelopeLen = 1 + 16 + 2
	// MaxMcastGroups is the number of groups a port joins at most (ibv.DeviceAttr.MaxMcastGrp).
	MaxMcastGroups = 1024
)

// ParseMcastEnvelope returns the group of an envelope and the UD packet it carries; ok is false
// when pkt is no envelope.
func ParseMcastEnvelope(pkt []byte) (gid ibv.GID, lid uint16, inner []byte, ok bool) {
	if len(pkt) < McastEnvelopeLen || pkt[0] != McastMagic {
		return gid, 0, nil, false
	}
	copy(gid[:], pkt[1:17])
	return gid, binary.LittleEndian.Uint16(pkt[17:19]), pkt[McastEnvelopeLen:], true
}

func appendEnvelope(dst []byte, gid ibv.GID, lid uint16) []byte {
	dst = append(dst, McastMagic)
	dst = append(dst, gid[:]...)
	return binary.LittleEndian.AppendUint16(dst, lid)
}

type mcastJoin struct {
	port uint8
	gid  ibv.GID
	lid  uint16
}

// mcastState is the engine's multicast bookkeeping, guarded by Engine.mcMu.
type mcastState struct {
	groups map[ibv.GID][]*QP // attached QPs by MGID
	joins  map[mcastJoin]int // attachments per (port, group)
}

// Multicast reports whether the engine's transport carries UD multicast.
func (e *Engine) Multicast() bool {
	_, ok := e.tr.(McastTransport)
	return ok
}

// AttachMcast attaches a UD QP to a multicast group on its port (ibv.McastDriver).
func (q *QP) AttachMcast(gid ibv.GID, lid uint16) error {
	e := q.e
	mt, ok := e.tr.(McastTransport)
	if !ok {
		return fmt.Errorf("engine: %w: the transport has no multicast", ibv.ErrUnsupported)
	}
	q.sqMu.Lock()
	port := q.sq.a.port
	q.sqMu.Unlock()
	if port == 0 {
		port = 1
	}
	e.mcMu.Lock()
	defer e.mcMu.Unlock()
	if q.dead.Load() {
		return ibv.ErrClosed
	}
	for _, a := range q.mcast {
		if a.gid == gid && a.lid == lid {
			return nil
		}
	}
	if e.mc.groups == nil {
		e.mc.groups, e.mc.joins = map[ibv.GID][]*QP{}, map[mcastJoin]int{}
	}
	j := mcastJoin{port: port, gid: gid, lid: lid}
	if e.mc.joins[j] == 0 {
		n := 0
		for k := range e.mc.joins {
			if k.port == port {
				n++
			}
		}
		if n >= MaxMcastGroups {
			return fmt.Errorf("engine: %w: port %d has joined %d multicast groups", ibv.ErrInvalidArgument, port, n)
		}
		if err := mt.JoinMcast(port, gid, lid); err != nil {
			return err
		}
	}
	e.mc.joins[j]++
	e.mc.groups[gid] = append(slices.Clone(e.mc.groups[gid]), q) // copy on write: delivery reads without the lock held
	q.mcast = append(q.mcast, j)
	return nil
}

// DetachMcast detaches a UD QP from a multicast group (ibv.McastDriver).
func (q *QP) DetachMcast(gid ibv.GID, lid uint16) error {
	e := q.e
	e.mcMu.Lock()
	defer e.mcMu.Unlock()
	for i, a := range q.mcast {
		if a.gid == gid && a.lid == lid {
			q.mcast = slices.Delete(q.mcast, i, i+1)
			return e.detachLocked(q, a)
		}
	}
	return fmt.Errorf("engine: %w: QP %d is not attached to %s", ibv.ErrInvalidArgument, q.num, gid)
}

// detachLocked drops q from group j and leaves the group on the port with the last attachment
// (mcMu held).
func (e *Engine) detachLocked(q *QP, j mcastJoin) error {
	qs := slices.DeleteFunc(slices.Clone(e.mc.groups[j.gid]), func(x *QP) bool { return x == q })
	if len(qs) == 0 {
		delete(e.mc.groups, j.gid)
	} else {
		e.mc.groups[j.gid] = qs
	}
	if e.mc.joins[j]--; e.mc.joins[j] > 0 {
		return nil
	}
	delete(e.mc.joins, j)
	if mt, ok := e.tr.(McastTransport); ok {
		return mt.LeaveMcast(j.port, j.gid, j.lid)
	}
	return nil
}

// detachAll ends every attachment of a QP being destroyed.
func (e *Engine) detachAll(q *QP) {
	e.mcMu.Lock()
	defer e.mcMu.Unlock()
	for _, j := range q.mcast {
		if err := e.detachLocked(q, j); err != nil {
			e.log.Debug().Err(err).Uint32("qp", q.num).Msg("engine: leaving a multicast group")
		}
	}
	q.mcast = nil
}

// deliverMcast hands the UD packet of an envelope to every QP attached to its MGID. A packet
// that is not a UD send to ibv.MulticastQPN is dropped.
func (e *Engine) deliverMcast(pkt []byte, link Link) {
	gid, _, inner, ok := ParseMcastEnvelope(pkt)
	if !ok {
		return
	}
	var p wire.Packet
	if err := wire.Decode(inner, &p); err != nil || p.Opcode != wire.OpUDSend || p.DestQPN != ibv.MulticastQPN {
		e.log.Debug().Err(err).Msg("engine: dropped malformed multicast packet")
		return
	}
	e.mcMu.RLock()
	qs := e.mc.groups[gid]
	e.mcMu.RUnlock()
	for _, q := range qs {
		q.recvUD(&p, link)
	}
}
