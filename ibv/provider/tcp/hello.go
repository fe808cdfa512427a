package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
	"github.com/goarmci/goarmci/internal/secret"
)

// ErrAuth: a stream's peer did not prove the job's secret (Config.Secret) in the hello.
var ErrAuth = errors.New("tcp: stream authentication failed")

// The stream hello (version 2): a challenge-response in which both ends prove the job's secret
// (Config.Secret) over a fresh nonce of each and both port addresses, so a stream opened by a
// process outside the job never reaches the engine, and a captured hello cannot be replayed:
//
//	dialer → acceptor  hDial    addr_D, nonce_D
//	acceptor → dialer  hAccept  addr_A, nonce_A, MAC_K("accept", addr_D, addr_A, nonce_D, nonce_A)
//	dialer → acceptor  hProof   MAC_K("dial", addr_D, addr_A, nonce_D, nonce_A)
//
// Each message is a frame: length u32 little-endian, version u8, type u8, then for hDial and
// hAccept the address (length u8 + bytes) and the nonce, then for hAccept and hProof the MAC.
// The dialer sends packets right after its proof; the acceptor hands the stream to the engine
// only once the proof checks. A stream whose hello fails is closed, counted (Rejected) and
// logged at most once per secret.LogEvery; its claimed address is never used (no path fault is
// reported for it). Version 1 (address only) gets ErrProtocol.
const (
	helloVersion = 2
	hDial        = 1
	hAccept      = 2
	hProof       = 3
	maxHello     = 2 + 1 + 255 + secret.NonceSize + secret.MACSize

	labelTCPAccept = "goarmci/tcp/2/accept"
	labelTCPDial   = "goarmci/tcp/2/dial"
)

// helloMsg is one decoded hello message.
type helloMsg struct {
	typ   byte
	addr  string
	nonce []byte
	mac   []byte
}

func appendHello(b []byte, h *helloMsg) []byte {
	n := 2
	if h.typ != hProof {
		n += 1 + len(h.addr) + len(h.nonce)
	}
	if h.typ != hDial {
		n += len(h.mac)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, helloVersion, h.typ)
	if h.typ != hProof {
		b = append(b, byte(len(h.addr)))
		b = append(b, h.addr...)
		b = append(b, h.nonce...)
	}
	if h.typ != hDial {
		b = append(b, h.mac...)
	}
	return b
}

// parseHello decodes the body (after the length) of a hello of type want. Errors wrap
// ErrProtocol.
func parseHello(want byte, p []byte) (helloMsg, error) {
	if len(p) < 2 || p[0] != helloVersion || p[1] != want {
		v, t := -1, -1
		if len(p) >= 2 {
			v, t = int(p[0]), int(p[1])
		}
		return helloMsg{}, fmt.Errorf("%w: hello version %d type %d, want version %d type %d", ErrProtocol, v, t,
			helloVersion, want)
	}
	h := helloMsg{typ: want}
	p = p[2:]
	if want != hProof {
		if len(p) < 1 || len(p) < 1+int(p[0])+secret.NonceSize {
			return helloMsg{}, fmt.Errorf("%w: truncated hello", ErrProtocol)
		}
		n := int(p[0])
		h.addr = string(p[1 : 1+n])
		h.nonce = p[1+n : 1+n+secret.NonceSize]
		p = p[1+n+secret.NonceSize:]
	}
	if want != hDial {
		if len(p) != secret.MACSize {
			return helloMsg{}, fmt.Errorf("%w: hello proof of %d bytes", ErrProtocol, len(p))
		}
		h.mac = p
		p = nil
	}
	if len(p) != 0 {
		return helloMsg{}, fmt.Errorf("%w: %d trailing hello bytes", ErrProtocol, len(p))
	}
	return h, nil
}

// readHello reads one hello message of type want. Errors: ErrProtocol, or the read's (io.EOF
// only when the peer closed before sending a byte).
func readHello(r io.Reader, want byte) (helloMsg, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return helloMsg{}, err
	}
	n := binary.LittleEndian.Uint32(h[:])
	if n < 2 || n > maxHello {
		return helloMsg{}, fmt.Errorf("%w: hello of %d bytes", ErrProtocol, n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return helloMsg{}, err
	}
	return parseHello(want, p)
}

// streamMAC is the proof of one end (label) over both addresses and nonces.
func streamMAC(key secret.Key, label, dialAddr, accAddr string, nD, nA []byte) []byte {
	return key.MAC(label, []byte(dialAddr), []byte(accAddr), nD, nA)
}

// checkStreamMAC checks the other end's proof. Errors wrap ErrAuth.
func checkStreamMAC(key secret.Key, mac []byte, label, dialAddr, accAddr string, nD, nA []byte) error {
	if len(mac) != secret.MACSize || !key.Verify(mac, label, []byte(dialAddr), []byte(accAddr), nD, nA) {
		return fmt.Errorf("%w: the peer did not prove the job's secret", ErrAuth)
	}
	return nil
}

// refused closes a stream whose hello failed; unless the peer closed before its first byte (a
// probe, Transport.Probe) or the device is closing, the stream is counted and logged.
func (c *conn) refused(peer net.Addr, err error) {
	if !errors.Is(err, io.EOF) && c.d.stop.Err() == nil {
		if log, sup := c.d.rejects.Add(time.Now()); log {
			from := ""
			if peer != nil {
				from = peer.String()
			}
			c.d.log.Warn().Err(err).Str("local", c.port.addr).Str("from", from).Uint64("refused", c.d.rejects.Count()).
				Uint64("not_logged", sup).Msg("tcp: refused a stream")
		}
	}
	c.fail(err)
}

// Rejected is the number of streams the tcp device dev refused in their hello: garbage,
// truncated or old-version hellos, proofs without the job's secret (Config.Secret). Errors
// wrap ibv.ErrInvalidArgument (not a tcp device).
func Rejected(dev *ibv.Context) (uint64, error) {
	d, err := engine.DriverOf[*driver]("tcp", dev)
	if err != nil {
		return 0, err
	}
	return d.rejects.Count(), nil
}
