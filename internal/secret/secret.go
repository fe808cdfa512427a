// Package secret holds a job's shared secret and what the connection handshakes build on it:
// fresh nonces, HMAC-SHA256 proofs over labelled fields (challenge-response: each side proves
// it knows the secret over the other side's nonce, so a captured proof cannot be replayed), and
// the counter of refused attempts with its rate-limited log line.
//
// Who makes the secret: `goarmci run` generates one per job and hands it to its ranks in
// GOARMCI_JOB_SECRET (environment, never the command line); under another launcher rank 0's
// rendezvous service generates it and hands it to every rank in its welcome (internal/bootstrap),
// unless the user exported GOARMCI_JOB_SECRET for the whole job. The providers and the UD
// connection manager get it from the runtime (rma) and check it in every handshake and message.
package secret

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Size is the length of a job secret in bytes.
const Size = 32

// NonceSize is the length of a handshake nonce in bytes.
const NonceSize = 32

// MACSize is the length of a full proof (HMAC-SHA256) in bytes.
const MACSize = sha256.Size

// ErrBadSecret: a secret that is not Size bytes (2·Size hex digits).
var ErrBadSecret = errors.New("secret: bad job secret")

// Key is a job secret. The zero Key is "no secret": proofs are computed with an empty key, so
// both ends still agree and the format is the same, but they authenticate nothing (tests, and
// devices opened without a runtime). Its String never shows the bytes.
type Key struct{ b []byte }

// New returns a fresh random secret (crypto/rand).
func New() (Key, error) {
	b := make([]byte, Size)
	if _, err := rand.Read(b); err != nil {
		return Key{}, fmt.Errorf("secret: %w", err)
	}
	return Key{b: b}, nil
}

// FromBytes returns the secret b (copied); nil or empty gives the zero Key. Errors wrap
// ErrBadSecret (another length).
func FromBytes(b []byte) (Key, error) {
	if len(b) == 0 {
		return Key{}, nil
	}
	if len(b) != Size {
		return Key{}, fmt.Errorf("%w: %d bytes, want %d", ErrBadSecret, len(b), Size)
	}
	return Key{b: append([]byte(nil), b...)}, nil
}

// Parse reads a secret written by Hex. Errors wrap ErrBadSecret and never quote the text.
func Parse(s string) (Key, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != Size {
		return Key{}, fmt.Errorf("%w: want %d hex digits", ErrBadSecret, 2*Size)
	}
	return Key{b: b}, nil
}

// IsZero reports whether k is the zero Key (no secret).
func (k Key) IsZero() bool { return len(k.b) == 0 }

// Hex is the secret in hex (for GOARMCI_JOB_SECRET; "" for the zero Key).
func (k Key) Hex() string { return hex.EncodeToString(k.b) }

// Bytes returns a copy of the secret (nil for the zero Key).
func (k Key) Bytes() []byte {
	if k.IsZero() {
		return nil
	}
	return append([]byte(nil), k.b...)
}

// Equal reports whether k and o are the same secret (in constant time).
func (k Key) Equal(o Key) bool { return hmac.Equal(k.b, o.b) }

// String hides the secret.
func (k Key) String() string {
	if k.IsZero() {
		return "secret(none)"
	}
	return "secret(redacted)"
}

// GoString hides the secret from %#v too.
func (k Key) GoString() string { return k.String() }

// Nonce returns NonceSize fresh random bytes.
func Nonce() []byte {
	b := make([]byte, NonceSize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux (getrandom)
	return b
}

// MAC is HMAC-SHA256 keyed by k over label and fields, each field preceded by its length, so
// no two different field lists give the same input. The label names the protocol, its version
// and the role of the sender, so a proof made for one purpose is worth nothing in another.
func (k Key) MAC(label string, fields ...[]byte) []byte {
	return k.AppendMAC(nil, label, fields...)
}

// AppendMAC appends MAC(label, fields...) to b.
func (k Key) AppendMAC(b []byte, label string, fields ...[]byte) []byte {
	h := hmac.New(sha256.New, k.b)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(label)))
	h.Write(n[:])
	h.Write([]byte(label))
	for _, f := range fields {
		binary.BigEndian.PutUint32(n[:], uint32(len(f)))
		h.Write(n[:])
		h.Write(f)
	}
	return h.Sum(b)
}

// Verify reports whether mac is MAC(label, fields...) or its first len(mac) bytes; a mac
// shorter than 16 bytes never verifies. Constant time in the MAC's bytes.
func (k Key) Verify(mac []byte, label string, fields ...[]byte) bool {
	if len(mac) < 16 || len(mac) > MACSize {
		return false
	}
	var buf [MACSize]byte
	want := k.AppendMAC(buf[:0], label, fields...)
	return hmac.Equal(mac, want[:len(mac)])
}

// LogEvery is the interval of Rejections' log line.
const LogEvery = 10 * time.Second

// Rejections counts refused attempts (a handshake without the job's proof, a message whose MAC
// fails, garbage on a listening port) and paces their log line: one per LogEvery at most. The
// zero value is ready; safe for concurrent use.
type Rejections struct {
	n       atomic.Uint64
	lastLog atomic.Int64 // unix ns of the last log line; 0: none yet
	logged  atomic.Uint64
}

// Add counts one refused attempt at now; log reports whether this one should be logged, and
// suppressed how many were counted without a line since the last one.
func (r *Rejections) Add(now time.Time) (log bool, suppressed uint64) {
	n := r.n.Add(1)
	t := now.UnixNano()
	last := r.lastLog.Load()
	if last != 0 && t-last < int64(LogEvery) {
		return false, 0
	}
	if !r.lastLog.CompareAndSwap(last, t) {
		return false, 0
	}
	prev := r.logged.Swap(n)
	return true, n - prev - 1
}

// Count is the number of refused attempts so far.
func (r *Rejections) Count() uint64 { return r.n.Load() }
