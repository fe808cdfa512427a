package ibv

import (
	"encoding/hex"
	"fmt"
)

// Multicast: UD queue pairs attach to multicast groups, and a UD send addressed to a group
// reaches every attached queue pair ([IBA] vol. 1 §10.5, ibv_attach_mcast / ibv_detach_mcast).
//
// A group is named by its multicast GID (MGID, first byte 0xFF) and its multicast LID (MLID,
// MulticastLIDMin..MulticastLIDMax), the LID switches replicate by. A send to the group is a UD
// send whose address handle has the MLID as DLID and the MGID as DGID, with RemoteQPN
// MulticastQPN (0xFFFFFF, [IBA] §9.8.2.3). Software providers ignore AHAttr.Addr for it.
//
// Delivery semantics (as IB without IBV_QP_CREATE_BLOCK_SELF_MCAST_LB): one copy goes to every
// UD queue pair attached to the MGID on every port that joined the group, on every node
// including the sender's, and to the sending queue pair itself when it is attached. Each copy
// is unreliable, as any UD datagram: lost copies are not sent again, a receiver without a posted
// receive or with another Q_Key drops its copy, and copies to different receivers may be lost
// independently. The completion's SrcQP and SrcAddr name the sender.

// GID is a 128-bit global identifier (union ibv_gid); a multicast GID begins with 0xFF.
type GID [16]byte

// IsMulticast reports whether g is a multicast GID (its first byte is 0xFF).
func (g GID) IsMulticast() bool { return g[0] == 0xff }

// IsZero reports whether g is all zeros (no GID).
func (g GID) IsZero() bool { return g == GID{} }

// String is the GID in hexadecimal, 16-bit groups separated by colons (as IPv6, unshortened).
func (g GID) String() string {
	b := make([]byte, 0, 39)
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b = append(b, ':')
		}
		b = hex.AppendEncode(b, g[i:i+2])
	}
	return string(b)
}

// Multicast addressing constants ([IBA] §4.1.1 for the LID ranges, §9.8.2.3 for the QPN).
const (
	// MulticastLIDMin and MulticastLIDMax bound the multicast LIDs (0xC000..0xFFFE; 0xFFFF is
	// the permissive LID).
	MulticastLIDMin uint16 = 0xC000
	MulticastLIDMax uint16 = 0xFFFE
	// MulticastQPN is the destination QP number of every multicast send (0xFFFFFF).
	MulticastQPN uint32 = 0xFFFFFF
)

// IsMulticastLID reports whether lid is a multicast LID (MulticastLIDMin..MulticastLIDMax).
func IsMulticastLID(lid uint16) bool { return lid >= MulticastLIDMin && lid <= MulticastLIDMax }

// McastDriver is implemented by the QP drivers of providers that carry UD multicast (the udp
// provider and the in-process fabric); DeviceAttr.MaxMcastGrp is not 0 on their devices.
type McastDriver interface {
	// AttachMcast attaches the UD QP to group (gid, lid) on its port; attaching twice is one
	// attachment.
	AttachMcast(gid GID, lid uint16) error
	// DetachMcast detaches it; detaching a group not attached is an error wrapping
	// ErrInvalidArgument.
	DetachMcast(gid GID, lid uint16) error
}

// AttachMcast attaches a UD queue pair to the multicast group (gid, lid) (ibv_attach_mcast): from
// now on its port receives the group's datagrams and the QP gets a copy of each (see the
// delivery semantics above). The QP must be past RESET (its port is known). A QP's attachments
// end when it is destroyed. Errors wrap ErrInvalidArgument (not a UD QP, not a multicast GID or
// LID), ErrInvalidState (RESET), ErrUnsupported (the provider has no multicast: shm, tcp),
// ErrClosed, or the provider's error (e.g. the IP group could not be joined).
func (qp *QP) AttachMcast(gid GID, lid uint16) error {
	m, err := qp.mcastDriver("AttachMcast", gid, lid)
	if err != nil {
		return err
	}
	if err := m.AttachMcast(gid, lid); err != nil {
		return fmt.Errorf("ibv: AttachMcast %s lid %#x: %w", gid, lid, err)
	}
	return nil
}

// DetachMcast detaches a UD queue pair from the multicast group (gid, lid) (ibv_detach_mcast).
// Errors are those of AttachMcast, and ErrInvalidArgument for a group the QP is not attached to.
func (qp *QP) DetachMcast(gid GID, lid uint16) error {
	m, err := qp.mcastDriver("DetachMcast", gid, lid)
	if err != nil {
		return err
	}
	if err := m.DetachMcast(gid, lid); err != nil {
		return fmt.Errorf("ibv: DetachMcast %s lid %#x: %w", gid, lid, err)
	}
	return nil
}

func (qp *QP) mcastDriver(op string, gid GID, lid uint16) (McastDriver, error) {
	if qp.dead.Load() {
		return nil, fmt.Errorf("ibv: %s: %w", op, ErrClosed)
	}
	if qp.typ != UD {
		return nil, fmt.Errorf("%w: %s on a %v QP", ErrInvalidArgument, op, qp.typ)
	}
	if !gid.IsMulticast() || !IsMulticastLID(lid) {
		return nil, fmt.Errorf("%w: %s: GID %s / LID %#x is not a multicast group", ErrInvalidArgument, op, gid, lid)
	}
	if st := qp.State(); st == StateReset {
		return nil, fmt.Errorf("%w: %s in %v", ErrInvalidState, op, st)
	}
	m, ok := qp.drv.(McastDriver)
	if !ok {
		return nil, fmt.Errorf("ibv: %s: %w: %s provider has no multicast", op, ErrUnsupported, qp.ctx.drv.Attr().Provider)
	}
	return m, nil
}

// checkMcastSend checks a UD send to a multicast LID: the DGID must be a multicast GID and the
// remote QPN MulticastQPN.
func checkMcastSend(wr *SendWR) error {
	a := &wr.AH.Attr
	if !IsMulticastLID(a.DLID) {
		return nil
	}
	if !a.DGID.IsMulticast() {
		return fmt.Errorf("%w: send to multicast LID %#x without a multicast DGID", ErrInvalidArgument, a.DLID)
	}
	if wr.RemoteQPN != MulticastQPN {
		return fmt.Errorf("%w: send to multicast LID %#x with remote QPN %#x (want %#x)", ErrInvalidArgument, a.DLID, wr.RemoteQPN, MulticastQPN)
	}
	return nil
}
