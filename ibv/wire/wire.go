// Package wire is the packet codec of goarmci's network providers: InfiniBand-style transport
// headers (IBA vol. 1 ch. 9; the RC/UD background of [Vishnu07 §2.2]) carried in packets that the
// engine (ibv/internal/engine) builds and the tcp/udp providers move.
//
// A packet is a base transport header (BTH) followed by the extension headers its opcode and flags
// call for, then the payload:
//
//	BTH        20 B: version, opcode, flags, reserved, dest QPN, PSN, src QPN, payload length
//	RETH       16 B: virtual address, rkey, DMA length (RDMA write/read, accumulate)
//	AtomicETH  29 B: virtual address, rkey, swap/add, compare, atomic variant
//	AccETH     17 B: element type, scale (complex128) — goarmci's accumulate extension
//	AETH        4 B: syndrome (ACK, RNR NAK, NAK codes), 24-bit MSN
//	AtomicAck   8 B: original value
//	DETH        8 B: Q_Key, src QPN (UD)
//	ImmDt       4 B: immediate data
//
// All integers are little-endian. The first byte is the format version; Decode rejects any other.
// Decode never panics and returns views into its input; AppendHeader/Append append to a caller
// buffer and allocate only when it lacks capacity.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Version is the format version this codec writes and accepts (first byte of every packet).
const Version = 1

// ErrMalformed is wrapped by every decode error: a short packet, an unknown version, opcode, flag
// or syndrome, a header combination the opcode does not allow, or a length field that lies.
var ErrMalformed = errors.New("wire: malformed packet")

// Opcode is the packet kind (the BTH opcode; the segment position is in Flags).
type Opcode uint8

const (
	OpSend       Opcode = iota + 1 // RC SEND (first/middle/last/only)
	OpWrite                        // RDMA WRITE (first carries RETH)
	OpReadReq                      // RDMA READ request (RETH)
	OpReadResp                     // RDMA READ response (AETH)
	OpAtomic                       // atomic request (AtomicETH)
	OpAccumulate                   // accumulate extension (first carries RETH + AccETH)
	OpAck                          // ACK / NAK (AETH)
	OpAtomicAck                    // atomic ACK (AETH + AtomicAckETH)
	OpUDSend                       // UD SEND (DETH)
	opMax
)

var opNames = [...]string{"", "SEND", "WRITE", "READ_REQ", "READ_RESP", "ATOMIC", "ACCUMULATE", "ACK", "ATOMIC_ACK", "UD_SEND"}

func (o Opcode) String() string {
	if o > 0 && o < opMax {
		return opNames[o]
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

// IsRequest reports whether o travels requester → responder.
func (o Opcode) IsRequest() bool {
	return o == OpSend || o == OpWrite || o == OpReadReq || o == OpAtomic || o == OpAccumulate
}

// Flags are the BTH flag bits.
type Flags uint8

const (
	FlagFirst  Flags = 1 << 0 // first packet of a message
	FlagLast   Flags = 1 << 1 // last packet of a message (First|Last: "only")
	FlagAckReq Flags = 1 << 2 // the requester asks for an ACK of this PSN
	FlagImm    Flags = 1 << 3 // an ImmDt header follows (last packet of SEND/WRITE, UD SEND)
	FlagMigReq Flags = 1 << 4 // sent on a newly migrated path (APM, IBA MigReq bit)
	// FlagPathMTU, on an RDMA read request, asks for the responses in path-MTU packets instead
	// of segments (a read shorter than one segment; not in the IBA, whose packets are always
	// path-MTU sized).
	FlagPathMTU Flags = 1 << 5
	flagsAll          = FlagFirst | FlagLast | FlagAckReq | FlagImm | FlagMigReq | FlagPathMTU

	// FlagOnly marks a single-packet message.
	FlagOnly = FlagFirst | FlagLast
)

// Syndrome is the AETH syndrome: an ACK or one of the NAK kinds.
type Syndrome uint8

const (
	SynAck          Syndrome = iota // ACK
	SynRNR                          // receiver not ready (no receive posted)
	SynNakPSNSeq                    // PSN sequence error: PSN is the responder's expected PSN
	SynNakInvReq                    // invalid request (bad opcode sequence, length)
	SynNakRemAccess                 // remote access error (rkey, bounds, access flags)
	SynNakRemOp                     // remote operational error
	synMax
)

var synNames = [...]string{"ACK", "RNR_NAK", "NAK_PSN_SEQ", "NAK_INV_REQ", "NAK_REM_ACCESS", "NAK_REM_OP"}

func (s Syndrome) String() string {
	if s < synMax {
		return synNames[s]
	}
	return fmt.Sprintf("Syndrome(%d)", uint8(s))
}

// AtomicOp is the variant of an atomic request (IB's fetch-add and compare-swap plus the
// software extensions of ibv.Opcode).
type AtomicOp uint8

const (
	AtomicFetchAdd64 AtomicOp = iota + 1
	AtomicCmpSwap64
	AtomicFetchAdd32
	AtomicSwap64
	AtomicSwap32
	AtomicCmpSwap32
	atomicMax
)

// Size is the operand size in bytes.
func (a AtomicOp) Size() int {
	switch a {
	case AtomicFetchAdd32, AtomicSwap32, AtomicCmpSwap32:
		return 4
	}
	return 8
}

// Header sizes in bytes.
const (
	BTHLen       = 20
	RETHLen      = 16
	AtomicETHLen = 29
	AccETHLen    = 17
	AETHLen      = 4
	AtomicAckLen = 8
	DETHLen      = 8
	ImmLen       = 4
	// MaxHeaderLen bounds HeaderLen over all packet kinds.
	MaxHeaderLen = BTHLen + RETHLen + AccETHLen + ImmLen + AtomicETHLen
	// MaxQPN is the largest 24-bit QP number / PSN.
	MaxQPN  = 1<<24 - 1
	PSNMask = 1<<24 - 1
)

// RETH is the RDMA extended transport header.
type RETH struct {
	VAddr  uint64
	RKey   uint32
	DMALen uint32 // bytes of the whole message
}

// AtomicETH is the atomic extended transport header.
type AtomicETH struct {
	VAddr   uint64
	RKey    uint32
	SwapAdd uint64 // addend of fetch-add, new value of swap and compare-swap
	Compare uint64 // compare value of compare-swap
	Op      AtomicOp
}

// AccETH is goarmci's accumulate extension header: remote[i] += Scale·payload[i].
type AccETH struct {
	Type  uint8 // accum.Type (1..6)
	Scale complex128
}

// AETH is the ACK extended transport header.
type AETH struct {
	Syndrome Syndrome
	MSN      uint32 // 24-bit message sequence number
}

// DETH is the datagram extended transport header (UD).
type DETH struct {
	QKey   uint32
	SrcQPN uint32
}

// Header is a decoded or to-be-encoded set of headers. Which extension headers are present
// follows from Opcode and Flags (see Has*).
type Header struct {
	Opcode  Opcode
	Flags   Flags
	DestQPN uint32
	PSN     uint32
	SrcQPN  uint32

	RETH      RETH
	Atomic    AtomicETH
	Acc       AccETH
	AETH      AETH
	AtomicAck uint64 // AtomicAckETH: the original value
	DETH      DETH
	Imm       uint32
}

// Packet is a decoded packet: headers and a view of the payload.
type Packet struct {
	Header
	Payload []byte
}

// HasRETH reports whether h carries a RETH.
func (h *Header) HasRETH() bool {
	switch h.Opcode {
	case OpReadReq:
		return true
	case OpWrite, OpAccumulate:
		return h.Flags&FlagFirst != 0
	}
	return false
}

// HasAETH reports whether h carries an AETH.
func (h *Header) HasAETH() bool {
	return h.Opcode == OpAck || h.Opcode == OpAtomicAck || h.Opcode == OpReadResp
}

// HasImm reports whether h carries immediate data.
func (h *Header) HasImm() bool { return h.Flags&FlagImm != 0 }

// HeaderLen is the encoded length of h's headers in bytes.
func (h *Header) HeaderLen() int {
	n := BTHLen
	if h.HasRETH() {
		n += RETHLen
	}
	switch h.Opcode {
	case OpAtomic:
		n += AtomicETHLen
	case OpAccumulate:
		if h.Flags&FlagFirst != 0 {
			n += AccETHLen
		}
	case OpAtomicAck:
		n += AtomicAckLen
	case OpUDSend:
		n += DETHLen
	}
	if h.HasAETH() {
		n += AETHLen
	}
	if h.HasImm() {
		n += ImmLen
	}
	return n
}

// check validates the opcode/flag combination and the payload length for it.
func (h *Header) check(payloadLen int) error {
	if h.Opcode == 0 || h.Opcode >= opMax {
		return fmt.Errorf("%w: unknown opcode %d", ErrMalformed, uint8(h.Opcode))
	}
	if h.Flags&^flagsAll != 0 {
		return fmt.Errorf("%w: unknown flags %#x", ErrMalformed, uint8(h.Flags))
	}
	if h.DestQPN > MaxQPN || h.PSN > PSNMask || h.SrcQPN > MaxQPN {
		return fmt.Errorf("%w: QPN/PSN beyond 24 bits", ErrMalformed)
	}
	seg := h.Flags & FlagOnly
	switch h.Opcode {
	case OpSend, OpWrite, OpReadResp, OpAccumulate:
		// any segment position
	default:
		if seg != FlagOnly {
			return fmt.Errorf("%w: %v must be a single-packet message", ErrMalformed, h.Opcode)
		}
	}
	if h.Flags&FlagImm != 0 {
		if h.Opcode != OpSend && h.Opcode != OpWrite && h.Opcode != OpUDSend {
			return fmt.Errorf("%w: immediate data on %v", ErrMalformed, h.Opcode)
		}
		if h.Flags&FlagLast == 0 {
			return fmt.Errorf("%w: immediate data before the last packet", ErrMalformed)
		}
	}
	switch h.Opcode {
	case OpReadReq, OpAtomic, OpAck, OpAtomicAck:
		if payloadLen != 0 {
			return fmt.Errorf("%w: %v with a %d-byte payload", ErrMalformed, h.Opcode, payloadLen)
		}
	}
	if h.Opcode == OpAtomic && (h.Atomic.Op == 0 || h.Atomic.Op >= atomicMax) {
		return fmt.Errorf("%w: unknown atomic variant %d", ErrMalformed, uint8(h.Atomic.Op))
	}
	if h.Opcode == OpAccumulate && h.Flags&FlagFirst != 0 && (h.Acc.Type == 0 || h.Acc.Type > 6) {
		return fmt.Errorf("%w: unknown accumulate type %d", ErrMalformed, h.Acc.Type)
	}
	if h.HasAETH() && (h.AETH.Syndrome >= synMax || h.AETH.MSN > PSNMask) {
		return fmt.Errorf("%w: AETH syndrome %d MSN %#x", ErrMalformed, uint8(h.AETH.Syndrome), h.AETH.MSN)
	}
	if h.HasRETH() && uint64(payloadLen) > uint64(h.RETH.DMALen) && h.Opcode != OpReadReq {
		return fmt.Errorf("%w: payload %d > DMA length %d", ErrMalformed, payloadLen, h.RETH.DMALen)
	}
	if h.Opcode == OpUDSend && h.DETH.SrcQPN > MaxQPN {
		return fmt.Errorf("%w: DETH source QPN beyond 24 bits", ErrMalformed)
	}
	return nil
}

var le = binary.LittleEndian

// AppendHeader appends the encoding of h's headers for a payload of payloadLen bytes to dst and
// returns the extended buffer; the caller appends the payload itself. It allocates only when dst
// lacks capacity. An invalid header (one Decode would reject) returns an error wrapping
// ErrMalformed and dst unchanged.
func AppendHeader(dst []byte, h *Header, payloadLen int) ([]byte, error) {
	if payloadLen < 0 || uint64(payloadLen) > math.MaxUint32 {
		return dst, fmt.Errorf("%w: payload length %d", ErrMalformed, payloadLen)
	}
	if err := h.check(payloadLen); err != nil {
		return dst, err
	}
	dst = append(dst, Version, byte(h.Opcode), byte(h.Flags), 0)
	dst = le.AppendUint32(dst, h.DestQPN)
	dst = le.AppendUint32(dst, h.PSN)
	dst = le.AppendUint32(dst, h.SrcQPN)
	dst = le.AppendUint32(dst, uint32(payloadLen))
	if h.HasRETH() {
		dst = le.AppendUint64(dst, h.RETH.VAddr)
		dst = le.AppendUint32(dst, h.RETH.RKey)
		dst = le.AppendUint32(dst, h.RETH.DMALen)
	}
	switch h.Opcode {
	case OpAtomic:
		a := &h.Atomic
		dst = le.AppendUint64(dst, a.VAddr)
		dst = le.AppendUint32(dst, a.RKey)
		dst = le.AppendUint64(dst, a.SwapAdd)
		dst = le.AppendUint64(dst, a.Compare)
		dst = append(dst, byte(a.Op))
	case OpAccumulate:
		if h.Flags&FlagFirst != 0 {
			dst = append(dst, h.Acc.Type)
			dst = le.AppendUint64(dst, math.Float64bits(real(h.Acc.Scale)))
			dst = le.AppendUint64(dst, math.Float64bits(imag(h.Acc.Scale)))
		}
	case OpUDSend:
		dst = le.AppendUint32(dst, h.DETH.QKey)
		dst = le.AppendUint32(dst, h.DETH.SrcQPN)
	}
	if h.HasAETH() {
		dst = le.AppendUint32(dst, uint32(h.AETH.Syndrome)|h.AETH.MSN<<8)
	}
	if h.Opcode == OpAtomicAck {
		dst = le.AppendUint64(dst, h.AtomicAck)
	}
	if h.HasImm() {
		dst = le.AppendUint32(dst, h.Imm)
	}
	return dst, nil
}

// Append appends the whole packet (headers and payload) to dst; see AppendHeader.
func Append(dst []byte, h *Header, payload []byte) ([]byte, error) {
	out, err := AppendHeader(dst, h, len(payload))
	if err != nil {
		return dst, err
	}
	return append(out, payload...), nil
}

// Decode parses b into p. p.Payload is a view into b (valid while b is). Any bad input — short,
// unknown version/opcode/flags/syndrome/variant, a header combination the opcode does not allow,
// a payload length field that disagrees with the packet — returns an error wrapping ErrMalformed.
// Decode never panics and does not allocate on success.
func Decode(b []byte, p *Packet) error {
	if len(b) < BTHLen {
		return fmt.Errorf("%w: %d bytes, shorter than a BTH", ErrMalformed, len(b))
	}
	if b[0] != Version {
		return fmt.Errorf("%w: version %d, want %d", ErrMalformed, b[0], Version)
	}
	if b[3] != 0 {
		return fmt.Errorf("%w: reserved BTH byte %#x", ErrMalformed, b[3])
	}
	*p = Packet{}
	h := &p.Header
	h.Opcode = Opcode(b[1])
	h.Flags = Flags(b[2])
	h.DestQPN = le.Uint32(b[4:])
	h.PSN = le.Uint32(b[8:])
	h.SrcQPN = le.Uint32(b[12:])
	plen := le.Uint32(b[16:])
	if h.Opcode == 0 || h.Opcode >= opMax {
		return fmt.Errorf("%w: unknown opcode %d", ErrMalformed, b[1])
	}
	hl := h.HeaderLen()
	if len(b) < hl {
		return fmt.Errorf("%w: %d bytes, %v headers need %d", ErrMalformed, len(b), h.Opcode, hl)
	}
	if uint64(plen) != uint64(len(b)-hl) {
		return fmt.Errorf("%w: payload length field %d, packet carries %d", ErrMalformed, plen, len(b)-hl)
	}
	o := BTHLen
	if h.HasRETH() {
		h.RETH = RETH{VAddr: le.Uint64(b[o:]), RKey: le.Uint32(b[o+8:]), DMALen: le.Uint32(b[o+12:])}
		o += RETHLen
	}
	switch h.Opcode {
	case OpAtomic:
		h.Atomic = AtomicETH{VAddr: le.Uint64(b[o:]), RKey: le.Uint32(b[o+8:]), SwapAdd: le.Uint64(b[o+12:]),
			Compare: le.Uint64(b[o+20:]), Op: AtomicOp(b[o+28])}
		o += AtomicETHLen
	case OpAccumulate:
		if h.Flags&FlagFirst != 0 {
			h.Acc = AccETH{Type: b[o], Scale: complex(math.Float64frombits(le.Uint64(b[o+1:])),
				math.Float64frombits(le.Uint64(b[o+9:])))}
			o += AccETHLen
		}
	case OpUDSend:
		h.DETH = DETH{QKey: le.Uint32(b[o:]), SrcQPN: le.Uint32(b[o+4:])}
		o += DETHLen
	}
	if h.HasAETH() {
		v := le.Uint32(b[o:])
		h.AETH = AETH{Syndrome: Syndrome(v & 0xff), MSN: v >> 8}
		o += AETHLen
	}
	if h.Opcode == OpAtomicAck {
		h.AtomicAck = le.Uint64(b[o:])
		o += AtomicAckLen
	}
	if h.HasImm() {
		h.Imm = le.Uint32(b[o:])
		o += ImmLen
	}
	p.Payload = b[o:len(b):len(b)]
	if err := h.check(len(p.Payload)); err != nil {
		return err
	}
	return nil
}

// PSNAdd returns psn+n modulo 2^24.
func PSNAdd(psn uint32, n uint32) uint32 { return (psn + n) & PSNMask }

// PSNDiff returns a−b as a signed distance in the 24-bit PSN space (in [−2^23, 2^23)).
func PSNDiff(a, b uint32) int32 { return int32((a-b)<<8) >> 8 }
