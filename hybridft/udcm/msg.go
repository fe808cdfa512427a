package udcm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/goarmci/goarmci/internal/secret"
)

// ErrMalformed: a datagram that is not a connection manager message of this version.
var ErrMalformed = errors.New("udcm: malformed message")

// ErrBadMAC: a datagram whose MAC is not the job's (Seal): sent by a process outside the job,
// or changed on the way.
var ErrBadMAC = errors.New("udcm: bad message authentication code")

// MACLen is the length of the MAC that follows every message in its datagram: the first 16
// bytes of HMAC-SHA256 keyed by the job's secret over the encoded message.
const MACLen = 16

const labelCM = "goarmci/udcm/2"

// seal appends to b, an encoded message, its MAC under key (the job's secret; the zero key
// authenticates nothing, see internal/secret).
func seal(key secret.Key, b []byte) []byte {
	var buf [secret.MACSize]byte
	return append(b, key.AppendMAC(buf[:0], labelCM, b)[:MACLen]...)
}

// unseal checks the MAC at the end of the datagram b and returns the message before it (a view
// of b). Errors wrap ErrMalformed (shorter than a MAC) or ErrBadMAC. The MAC authenticates the
// message, not its freshness: a captured datagram sent again is a duplicate, which the
// protocols already tell apart by their sequence ids and nonces.
func unseal(key secret.Key, b []byte) ([]byte, error) {
	if len(b) < MACLen {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	msg, mac := b[:len(b)-MACLen], b[len(b)-MACLen:]
	if !key.Verify(mac, labelCM, msg) {
		return nil, fmt.Errorf("%w: %d-byte datagram", ErrBadMAC, len(b))
	}
	return msg, nil
}

// Version is the version byte of the message format. Version 2 is version 1 followed, in the
// datagram, by a MAC of the job's secret (Seal); a version-1 datagram is malformed.
const Version = 2

// Type is a message of the re-establishment protocol [Vishnu09 §IV.C, Fig. 8].
type Type uint8

const (
	// REQ asks the peer to recycle its queue pair of the connection and reconnect it.
	REQ Type = iota + 1
	// REP answers a REQ: the peer recycled its queue pair (Status OK) or cannot use the proposed
	// path (Status PathDown).
	REP
	// ACK confirms a REP: the requester's queue pair is in RTS, the peer may send.
	ACK

	// The on-demand connection setup (hybridft.OnDemand, [Vishnu09 §IV.B.2]): the same UD queue
	// pair also creates RC connections the first time a peer is used, as the InfiniBand CM's
	// REQ/REP/RTU/REJ exchange, and tears them down by agreement of both ends, as its DREQ/DREP
	// exchange (IBA §12.6). On these types Src and Dst are the sender's and the
	// receiver's process ids (ranks), Seq the job id, Inc the dialer's attempt nonce, and
	// Payload the connection data (hybridft's encoding of its ConnInfos); they carry no Atomics.

	// ConnREQ asks the receiver to create and connect queue pairs to the sender's (Payload).
	ConnREQ
	// ConnREP accepts a ConnREQ: the receiver's queue pairs are connected (Payload).
	ConnREP
	// ConnRTU (ready to use) confirms a ConnREP: the dialer's queue pairs are connected too.
	ConnRTU
	// ConnREJ refuses a ConnREQ (or a ConnREP the dialer cannot use); Status says why.
	ConnREJ
	// ConnDREQ asks the receiver to tear down the connection of attempt Inc (the IBA CM's
	// DREQ): Payload is the sender's on-demand address, so that a receiver that has forgotten
	// the connection can still answer.
	ConnDREQ
	// ConnDREP answers a ConnDREQ (the IBA CM's DREP): the receiver has closed its end of the
	// connection of attempt Inc, or never had it.
	ConnDREP
)

// Conn reports whether t is one of the on-demand connection types (with a Payload).
func (t Type) Conn() bool { return t >= ConnREQ && t <= ConnDREP }

func (t Type) String() string {
	switch t {
	case REQ:
		return "REQ"
	case REP:
		return "REP"
	case ACK:
		return "ACK"
	case ConnREQ:
		return "CONN_REQ"
	case ConnREP:
		return "CONN_REP"
	case ConnRTU:
		return "CONN_RTU"
	case ConnREJ:
		return "CONN_REJ"
	case ConnDREQ:
		return "CONN_DREQ"
	case ConnDREP:
		return "CONN_DREP"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Status bits of a message.
const (
	StatusOK       = 0
	StatusPathDown = 1 // REP: the proposed port of the receiver is down; Ports says which are up
	// RecNone: the sender's queue pair never reached incarnation Inc: none of the receiver's
	// requests of that incarnation was executed.
	RecNone = 2
	// RecUnknown: the sender no longer knows how far it executed incarnation Inc.
	RecUnknown = 4
	// RejResources (ConnREJ): the receiver could not create or connect its queue pairs.
	RejResources = 8
	// RejMalformed (ConnREJ): the receiver could not decode the Payload.
	RejMalformed = 16
	// RejStale (ConnREJ): the receiver knows no attempt of that nonce (a ConnREP of an attempt
	// its dialer abandoned).
	RejStale = 32
	// RejRefused (ConnREJ): the receiver's admission refused the connection (its bound of
	// connections is reached).
	RejRefused = 64
	// DREQProbe (ConnDREQ): a probe, not a request: the receiver answers ConnDREP only if it does
	// not hold the connection of attempt Inc, and then the sender releases its end; a receiver
	// that holds it ignores the probe.
	DREQProbe = 128
)

// MaxAtomics bounds the atomic results a message carries.
const MaxAtomics = 255

// Atomic is one atomic result the responder executed: request PSN and original value.
type Atomic struct {
	PSN   uint32
	Value uint64
}

// Msg is one connection manager message. Dst and Src are the connection identifiers of the
// receiver's and the sender's end; Seq is the recovery generation of the connection (the
// per-pair sequence ID of [Vishnu09 §IV.D]: it tells one fault from the previous one and a
// duplicate from a new request).
type Msg struct {
	Type   Type
	Status uint8
	Dst    uint64
	Src    uint64
	Seq    uint32
	// Port is the sender's local port (1-based) of the proposed path; PeerPort the receiver's.
	Port, PeerPort uint8
	// Ports is the bit mask of the sender's ports that are up (bit p-1 for port p).
	Ports uint32
	// QPN is the sender's queue pair number; PSN the first PSN it will send on the recycled
	// queue pair (REQ, REP).
	QPN, PSN uint32
	// Inc is the incarnation of the sender's queue pair that EPSN and Atomics describe (the Seq
	// of the recovery that established it; 0 for the first connection).
	Inc uint32
	// EPSN is the sender's responder expected PSN on incarnation Inc: every request of the
	// receiver before it was executed. Atomics are the atomic results it remembers.
	EPSN    uint32
	Atomics []Atomic
	// Need is the incarnation whose responder record the sender needs from the receiver (that
	// of its failed, not yet re-issued requests); the answer (REP, ACK) carries it.
	Need uint32
	// Payload is the opaque data of the on-demand connection types (Type.Conn), at most
	// MaxPayload bytes; empty on the other types. Decode reuses its backing array: copy it to
	// keep it past the Handler call.
	Payload []byte
}

const headerLen = 1 + 1 + 1 + 8 + 8 + 4 + 1 + 1 + 4 + 4 + 4 + 4 + 4 + 4 + 1

// MaxLen is the largest encoded message in bytes: a REQ/REP/ACK with MaxAtomics atomic results
// or a Conn type with a MaxPayload payload (3110 bytes; with its MAC, 3126, within the CM's
// receive buffers and the 4096-byte UD MTU of its udp device and of ibv/fabric).
const MaxLen = headerLen + MaxAtomics*12

// MaxPayload bounds Payload in bytes: a Conn type carries it, after a 2-byte length, in place of
// the atomic results, so MaxLen is unchanged.
const MaxPayload = MaxAtomics*12 - 2

// Append encodes m after b. Errors wrap ErrMalformed (unknown type, too many atomics, 24-bit
// fields out of range, atomics on a Conn type, a payload on another type or over MaxPayload).
// The Conn types append a 2-byte payload length and the payload after the (empty) atomics.
func (m *Msg) Append(b []byte) ([]byte, error) {
	conn := m.Type.Conn()
	if m.Type < REQ || m.Type > ConnDREP || len(m.Atomics) > MaxAtomics || m.QPN>>24 != 0 || m.PSN>>24 != 0 ||
		m.EPSN>>24 != 0 || conn && len(m.Atomics) != 0 || !conn && len(m.Payload) != 0 || len(m.Payload) > MaxPayload {
		return b, fmt.Errorf("%w: %v with %d atomics, %d bytes of payload", ErrMalformed, m.Type, len(m.Atomics),
			len(m.Payload))
	}
	b = append(b, Version, byte(m.Type), m.Status)
	b = binary.LittleEndian.AppendUint64(b, m.Dst)
	b = binary.LittleEndian.AppendUint64(b, m.Src)
	b = binary.LittleEndian.AppendUint32(b, m.Seq)
	b = append(b, m.Port, m.PeerPort)
	b = binary.LittleEndian.AppendUint32(b, m.Ports)
	b = binary.LittleEndian.AppendUint32(b, m.QPN)
	b = binary.LittleEndian.AppendUint32(b, m.PSN)
	b = binary.LittleEndian.AppendUint32(b, m.Inc)
	b = binary.LittleEndian.AppendUint32(b, m.EPSN)
	b = binary.LittleEndian.AppendUint32(b, m.Need)
	b = append(b, byte(len(m.Atomics)))
	for _, a := range m.Atomics {
		b = binary.LittleEndian.AppendUint32(b, a.PSN)
		b = binary.LittleEndian.AppendUint64(b, a.Value)
	}
	if conn {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(m.Payload)))
		b = append(b, m.Payload...)
	}
	return b, nil
}

// Decode parses one message; errors wrap ErrMalformed and leave m unspecified.
func (m *Msg) Decode(b []byte) error {
	if len(b) < headerLen || b[0] != Version {
		return fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	m.Type, m.Status = Type(b[1]), b[2]
	if m.Type < REQ || m.Type > ConnDREP {
		return fmt.Errorf("%w: type %d", ErrMalformed, b[1])
	}
	m.Dst = binary.LittleEndian.Uint64(b[3:])
	m.Src = binary.LittleEndian.Uint64(b[11:])
	m.Seq = binary.LittleEndian.Uint32(b[19:])
	m.Port, m.PeerPort = b[23], b[24]
	m.Ports = binary.LittleEndian.Uint32(b[25:])
	m.QPN = binary.LittleEndian.Uint32(b[29:])
	m.PSN = binary.LittleEndian.Uint32(b[33:])
	m.Inc = binary.LittleEndian.Uint32(b[37:])
	m.EPSN = binary.LittleEndian.Uint32(b[41:])
	m.Need = binary.LittleEndian.Uint32(b[45:])
	n := int(b[49])
	m.Payload = m.Payload[:0]
	if m.QPN>>24 != 0 || m.PSN>>24 != 0 || m.EPSN>>24 != 0 {
		return fmt.Errorf("%w: 24-bit field out of range", ErrMalformed)
	}
	if m.Type.Conn() {
		if n != 0 || len(b) < headerLen+2 {
			return fmt.Errorf("%w: %v: %d bytes, %d atomics", ErrMalformed, m.Type, len(b), n)
		}
		pl := int(binary.LittleEndian.Uint16(b[headerLen:]))
		if pl > MaxPayload || len(b) != headerLen+2+pl {
			return fmt.Errorf("%w: %v: %d bytes for a %d-byte payload", ErrMalformed, m.Type, len(b), pl)
		}
		m.Atomics = m.Atomics[:0]
		m.Payload = append(m.Payload, b[headerLen+2:]...)
		return nil
	}
	if len(b) != headerLen+12*n {
		return fmt.Errorf("%w: %d bytes for %d atomics", ErrMalformed, len(b), n)
	}
	m.Atomics = m.Atomics[:0]
	for i := 0; i < n; i++ {
		o := headerLen + 12*i
		m.Atomics = append(m.Atomics, Atomic{PSN: binary.LittleEndian.Uint32(b[o:]), Value: binary.LittleEndian.Uint64(b[o+4:])})
	}
	return nil
}
