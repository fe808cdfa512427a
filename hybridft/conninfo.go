package hybridft

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed: a ConnInfo blob that does not decode.
var ErrMalformed = errors.New("hybridft: malformed connection info")

// PortPath is how a peer reaches one port of a device: its provider address and base LID
// (alternate paths of APM and recovery paths, [Vishnu07 §9.2.1]).
type PortPath struct {
	Addr string
	LID  uint16
	LMC  uint8
}

// ConnInfo is what a peer needs to connect to a queue pair: the port's address and LID, the QP
// number and the first PSN. It travels through the bootstrap exchange (or, later, the UD
// connection manager). Version 2 adds what fault tolerance needs: the connection's identifier
// and home port, every port of the device (alternate paths) and the UD connection manager's
// addresses (one per rail) and queue pair number.
type ConnInfo struct {
	Addr string
	LID  uint16
	QPN  uint32
	PSN  uint32

	// Version 2 (all zero in version 1).
	ID    uint64     // connection identifier, unique within its process (CM demultiplexing)
	Port  uint8      // home port (rail) of the connection, 1-based
	Paths []PortPath // every port of the device, index port-1
	CM    []string   // UD connection manager addresses, one per rail
	CMQPN uint32     // UD connection manager queue pair number
}

const (
	connInfoV1 = 1
	connInfoV2 = 2
)

func (ci *ConnInfo) v2() bool {
	return ci.ID != 0 || ci.Port != 0 || len(ci.Paths) != 0 || len(ci.CM) != 0 || ci.CMQPN != 0
}

func appendStr(b []byte, s string) []byte { return append(append(b, byte(len(s))), s...) }

// Marshal encodes the info: version 1 (version byte, fields, address) when it has no version-2
// field, else version 2. Addresses longer than 255 bytes are cut (they are never that long).
func (ci ConnInfo) Marshal() []byte {
	v := byte(connInfoV1)
	if ci.v2() {
		v = connInfoV2
	}
	b := make([]byte, 0, 12+len(ci.Addr))
	b = append(b, v)
	b = binary.LittleEndian.AppendUint16(b, ci.LID)
	b = binary.LittleEndian.AppendUint32(b, ci.QPN)
	b = binary.LittleEndian.AppendUint32(b, ci.PSN)
	b = appendStr(b, clip(ci.Addr))
	if v == connInfoV1 {
		return b
	}
	b = binary.LittleEndian.AppendUint64(b, ci.ID)
	b = append(b, ci.Port, byte(min(len(ci.Paths), 255)))
	for _, p := range ci.Paths[:min(len(ci.Paths), 255)] {
		b = binary.LittleEndian.AppendUint16(b, p.LID)
		b = append(b, p.LMC)
		b = appendStr(b, clip(p.Addr))
	}
	b = binary.LittleEndian.AppendUint32(b, ci.CMQPN)
	b = append(b, byte(min(len(ci.CM), 255)))
	for _, a := range ci.CM[:min(len(ci.CM), 255)] {
		b = appendStr(b, clip(a))
	}
	return b
}

func clip(s string) string { return s[:min(len(s), 255)] }

type reader struct {
	b   []byte
	bad bool
}

func (r *reader) n(k int) []byte {
	if r.bad || len(r.b) < k {
		r.bad = true
		return make([]byte, k)
	}
	x := r.b[:k]
	r.b = r.b[k:]
	return x
}
func (r *reader) u8() uint8   { return r.n(1)[0] }
func (r *reader) u16() uint16 { return binary.LittleEndian.Uint16(r.n(2)) }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.n(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.n(8)) }
func (r *reader) str() string { return string(r.n(int(r.u8()))) }

// UnmarshalConnInfo decodes Marshal's output (version 1 or 2); errors wrap ErrMalformed.
func UnmarshalConnInfo(b []byte) (ConnInfo, error) {
	if len(b) < 12 || (b[0] != connInfoV1 && b[0] != connInfoV2) {
		return ConnInfo{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	r := reader{b: b[1:]}
	ci := ConnInfo{LID: r.u16(), QPN: r.u32(), PSN: r.u32()}
	ci.Addr = r.str()
	if b[0] == connInfoV2 {
		ci.ID = r.u64()
		ci.Port = r.u8()
		np := int(r.u8())
		for i := 0; i < np && !r.bad; i++ {
			p := PortPath{LID: r.u16(), LMC: r.u8()}
			p.Addr = r.str()
			ci.Paths = append(ci.Paths, p)
		}
		ci.CMQPN = r.u32()
		nc := int(r.u8())
		for i := 0; i < nc && !r.bad; i++ {
			ci.CM = append(ci.CM, r.str())
		}
		if !r.bad && !ci.v2() {
			r.bad = true // version 2 without version-2 content is not canonical
		}
	}
	if r.bad || len(r.b) != 0 {
		return ConnInfo{}, fmt.Errorf("%w: version %d in %d bytes", ErrMalformed, b[0], len(b))
	}
	return ci, nil
}
