package udcm

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed: a datagram that is not a connection manager message of this version.
var ErrMalformed = errors.New("udcm: malformed message")

// Version is the version byte of the message format.
const Version = 1

// Type is a message of the re-establishment protocol (seed 003 §IV.C, Fig. 8).
type Type uint8

const (
	// REQ asks the peer to recycle its queue pair of the connection and reconnect it.
	REQ Type = iota + 1
	// REP answers a REQ: the peer recycled its queue pair (Status OK) or cannot use the proposed
	// path (Status PathDown).
	REP
	// ACK confirms a REP: the requester's queue pair is in RTS, the peer may send.
	ACK
)

func (t Type) String() string {
	switch t {
	case REQ:
		return "REQ"
	case REP:
		return "REP"
	case ACK:
		return "ACK"
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
// per-pair sequence ID of seed 003 §IV.D: it tells one fault from the previous one and a
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
}

const headerLen = 1 + 1 + 1 + 8 + 8 + 4 + 1 + 1 + 4 + 4 + 4 + 4 + 4 + 4 + 1

// MaxLen is the largest encoded message in bytes.
const MaxLen = headerLen + MaxAtomics*12

// Append encodes m after b. Errors wrap ErrMalformed (unknown type, too many atomics, 24-bit
// fields out of range).
func (m *Msg) Append(b []byte) ([]byte, error) {
	if m.Type < REQ || m.Type > ACK || len(m.Atomics) > MaxAtomics || m.QPN>>24 != 0 || m.PSN>>24 != 0 ||
		m.EPSN>>24 != 0 {
		return b, fmt.Errorf("%w: %v with %d atomics", ErrMalformed, m.Type, len(m.Atomics))
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
	return b, nil
}

// Decode parses one message; errors wrap ErrMalformed and leave m unspecified.
func (m *Msg) Decode(b []byte) error {
	if len(b) < headerLen || b[0] != Version {
		return fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	m.Type, m.Status = Type(b[1]), b[2]
	if m.Type < REQ || m.Type > ACK {
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
	if len(b) != headerLen+12*n || m.QPN>>24 != 0 || m.PSN>>24 != 0 || m.EPSN>>24 != 0 {
		return fmt.Errorf("%w: %d bytes for %d atomics", ErrMalformed, len(b), n)
	}
	m.Atomics = m.Atomics[:0]
	for i := 0; i < n; i++ {
		o := headerLen + 12*i
		m.Atomics = append(m.Atomics, Atomic{PSN: binary.LittleEndian.Uint32(b[o:]), Value: binary.LittleEndian.Uint64(b[o+4:])})
	}
	return nil
}
