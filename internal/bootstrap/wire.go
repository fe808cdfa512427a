package bootstrap

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
)

// Wire format of the rendezvous service: every message is a frame
//
//	version u8 (= wireVersion) | type u8 | length u32 big-endian | payload (length bytes)
//
// Payload fields are big-endian integers and byte strings (u32 length + bytes); lists are a
// u32 count followed by the items. A frame with another version, an unknown type, a length above
// maxFrame or a payload that does not parse exactly is a protocol error (ErrProtocol), never a
// panic.
//
// Version 2 added peer failure detection: mWelcome carries the failure and partition timeouts, mPing is the
// heartbeat of both directions, mPeerFailed declares a rank failed to the others. Version 3 added
// the job-secret handshake before a rank joins (auth.go): the hello carries a nonce, mChallenge
// and mAuth prove the secret both ways, the welcome hands out the secret of an unkeyed service.
// Version 4: mPeerFailed carries the failed rank's exit status when its launcher reported it, a
// rank's heartbeat carries a token the rendezvous echoes (mPong) while the rank is a member.
const (
	wireVersion = 4
	headerLen   = 6
	// maxFrame bounds one message's payload (bytes); AllGather results are one frame.
	maxFrame = 256 << 20
)

// Message types.
const (
	mHello        byte = 1  // c→s: rank u32, size u32, jobID str, nonce str
	mWelcome      byte = 2  // s→c: jobID str, failure timeout u64, partition timeout u64 (ns; 0 = none), secret str
	mGather       byte = 3  // c→s: id u64, seq u64, data str
	mGatherResult byte = 4  // s→c: id u64, seq u64, parts list of str
	mPut          byte = 5  // c→s: id u64, key str, value str
	mPutAck       byte = 6  // s→c: id u64
	mGet          byte = 7  // c→s: id u64, key str
	mValue        byte = 8  // s→c: id u64, value str
	mStatus       byte = 9  // c→s: id u64, seq u64
	mStatusReply  byte = 10 // s→c: id u64, seq u64, missing list of u32
	mBye          byte = 11 // c→s: id u64
	mByeAck       byte = 12 // s→c: id u64
	mError        byte = 13 // s→c: id u64 (0 = whole connection), kind u8, message str
	mPing         byte = 14 // c→s: token u64, answered by mPong; s→c: id u64 (= 0), no answer; heartbeats
	mPeerFailed   byte = 15 // s→c: id u64 (= 0), rank u32, reason u8, after u64 (ns), exit known u8, code u32, signal u8
	mChallenge    byte = 16 // s→c: keyed u8, nonce str, proof str (auth.go)
	mAuth         byte = 17 // c→s: proof str
	mPong         byte = 18 // s→c: token u64 of the rank's mPing, sent while the rank is a member (not failed)
	mLast              = mPong
)

// Error kinds carried by mError.
const (
	ekProtocol byte = 1
	ekRefused  byte = 2
	ekLost     byte = 3
	ekAuth     byte = 4 // the job-secret handshake failed (ErrAuth)
)

// frame is one decoded message.
type frame struct {
	typ     byte
	payload []byte
}

// writeFrame writes one frame in a single Write.
func writeFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > maxFrame {
		return fmt.Errorf("%w: message of %d bytes exceeds %d", ErrProtocol, len(payload), maxFrame)
	}
	buf := make([]byte, headerLen+len(payload))
	buf[0], buf[1] = wireVersion, typ
	binary.BigEndian.PutUint32(buf[2:], uint32(len(payload)))
	copy(buf[headerLen:], payload)
	_, err := w.Write(buf)
	return err
}

// readFrame reads one frame; malformed headers give ErrProtocol, I/O errors are returned as is.
func readFrame(r io.Reader) (frame, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	if h[0] != wireVersion {
		return frame{}, fmt.Errorf("%w: wire version %d, want %d", ErrProtocol, h[0], wireVersion)
	}
	if h[1] < mHello || h[1] > mLast {
		return frame{}, fmt.Errorf("%w: unknown message type %d", ErrProtocol, h[1])
	}
	n := binary.BigEndian.Uint32(h[2:])
	if n > maxFrame {
		return frame{}, fmt.Errorf("%w: message length %d exceeds %d", ErrProtocol, n, maxFrame)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	return frame{typ: h[1], payload: p}, nil
}

// enc appends payload fields.
type enc struct{ b []byte }

func (e *enc) u8(v byte)      { e.b = append(e.b, v) }
func (e *enc) u32(v uint32)   { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64)   { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *enc) bytes(v []byte) { e.u32(uint32(len(v))); e.b = append(e.b, v...) }
func (e *enc) str(v string)   { e.u32(uint32(len(v))); e.b = append(e.b, v...) }
func (e *enc) list(v [][]byte) {
	e.u32(uint32(len(v)))
	for _, x := range v {
		e.bytes(x)
	}
}

// dec reads payload fields; the first failure sticks and later reads return zero values.
type dec struct {
	b   []byte
	err error
}

func (d *dec) need(n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || len(d.b) < n {
		d.err = fmt.Errorf("%w: truncated message", ErrProtocol)
		return false
	}
	return true
}

func (d *dec) u8() byte {
	if !d.need(1) {
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *dec) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *dec) bytes() []byte {
	n := d.u32()
	if !d.need(int(n)) {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) str() string { return string(d.bytes()) }

func (d *dec) list() [][]byte {
	n := d.u32()
	// Each item takes at least 4 bytes: bound n before allocating.
	if !d.need(int(min(uint64(n)*4, uint64(len(d.b))+1))) {
		return nil
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = d.bytes()
	}
	if d.err != nil {
		return nil
	}
	return out
}

func (d *dec) u32list() []uint32 {
	n := d.u32()
	if !d.need(int(min(uint64(n)*4, uint64(len(d.b))+1))) {
		return nil
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = d.u32()
	}
	return out
}

// done checks the payload was consumed exactly.
func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrProtocol, len(d.b))
	}
	return d.err
}

// checkAddr checks a host:port address with a numeric port.
func checkAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a number in [0, 65535]", port)
	}
	return nil
}
