package tcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
	"github.com/goarmci/goarmci/ibv/wire"
	"github.com/goarmci/goarmci/internal/secret"
)

func TestHelloCodec(t *testing.T) {
	n1, n2 := secret.Nonce(), secret.Nonce()
	mac := make([]byte, secret.MACSize)
	for _, h := range []helloMsg{{typ: hDial, addr: "127.0.0.1:5", nonce: n1}, {typ: hAccept, addr: "x", nonce: n2, mac: mac},
		{typ: hProof, mac: mac}} {
		b := appendHello(nil, &h)
		got, err := readHello(bytes.NewReader(b), h.typ)
		require.NoError(t, err)
		require.Equal(t, h, got)
		// every truncation is an error, never a panic; only the empty stream is io.EOF
		for i := range b {
			_, err := readHello(bytes.NewReader(b[:i]), h.typ)
			require.Error(t, err)
			if i == 0 {
				require.ErrorIs(t, err, io.EOF)
			} else {
				require.NotErrorIs(t, err, io.EOF)
			}
		}
		// another type, the old version
		_, err = readHello(bytes.NewReader(b), h.typ%3+1)
		require.ErrorIs(t, err, ErrProtocol)
		b[4] = 1
		_, err = readHello(bytes.NewReader(b), h.typ)
		require.ErrorIs(t, err, ErrProtocol)
	}
	// version 1 (length, version 1, address length, address)
	old := []byte{11, 0, 0, 0, 1, 9, '1', '.', '2', '.', '3', '.', '4', ':', '5'}
	_, err := readHello(bytes.NewReader(old), hDial)
	require.ErrorIs(t, err, ErrProtocol)
	_, err = readHello(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0x7f}), hDial)
	require.ErrorIs(t, err, ErrProtocol)

	k, _ := secret.New()
	o, _ := secret.New()
	m := streamMAC(k, labelTCPAccept, "d", "a", n1, n2)
	require.NoError(t, checkStreamMAC(k, m, labelTCPAccept, "d", "a", n1, n2))
	require.ErrorIs(t, checkStreamMAC(o, m, labelTCPAccept, "d", "a", n1, n2), ErrAuth)
	require.ErrorIs(t, checkStreamMAC(k, m, labelTCPDial, "d", "a", n1, n2), ErrAuth, "a reflected proof")
	require.ErrorIs(t, checkStreamMAC(k, m, labelTCPAccept, "e", "a", n1, n2), ErrAuth)
	require.ErrorIs(t, checkStreamMAC(k, m, labelTCPAccept, "d", "a", n2, n1), ErrAuth)
	require.ErrorIs(t, checkStreamMAC(k, m[:16], labelTCPAccept, "d", "a", n1, n2), ErrAuth)
}

// attacker dials the port at addr and runs the dialer's hello claiming address claim, proving
// key when prove is set (else sending a proof of the right size made with a random key). It
// returns the stream after its proof.
func attacker(t *testing.T, addr, claim string, key secret.Key, prove bool) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	nD := secret.Nonce()
	_, err = c.Write(appendHello(nil, &helloMsg{typ: hDial, addr: claim, nonce: nD}))
	require.NoError(t, err)
	h, err := readHello(c, hAccept)
	require.NoError(t, err)
	if !prove {
		key, _ = secret.New()
	}
	_, err = c.Write(appendHello(nil, &helloMsg{typ: hProof, mac: streamMAC(key, labelTCPDial, claim, h.addr, nD, h.nonce)}))
	require.NoError(t, err)
	return c
}

// forgedWrite is the frame of an RDMA WRITE ONLY of data from x's QP to y's at y's MR, with
// the PSN y expects.
func forgedWrite(t *testing.T, x, y *side, psn uint32, data []byte) []byte {
	h := wire.Header{Opcode: wire.OpWrite, Flags: wire.FlagOnly | wire.FlagAckReq, DestQPN: y.qp.Num(), PSN: psn,
		SrcQPN: x.qp.Num(), RETH: wire.RETH{VAddr: y.mr.Addr, RKey: y.mr.RKey, DMALen: uint32(len(data))}}
	pkt, err := wire.Append(nil, &h, data)
	require.NoError(t, err)
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(pkt))), pkt...)
}

// waitClosed reads c until the peer closes it.
func waitClosed(t *testing.T, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if !errors.Is(err, syscall.ECONNRESET) { // closed with unread bytes
		require.NoError(t, err, "the device closes the stream (EOF), not the deadline")
	}
}

// TestForgedStreams: forged traffic to a listening port of a device with a secret — garbage,
// truncated hellos, the old version, a valid-format hello without the secret, and a forged RDMA
// WRITE with the right QPN, PSN and rkey behind a failed proof — changes nothing in memory,
// panics nothing, is counted, and the devices keep working. The same forged WRITE behind a
// proof made with the secret lands (the control: the forgery itself is right).
func TestForgedStreams(t *testing.T) {
	k, _ := secret.New()
	a, b := open(t, 1, Config{Secret: k.Bytes()}), open(t, 1, Config{Secret: k.Bytes()})
	x, y := connect(t, a, b, 4096, false, 7)
	pa, _ := a.QueryPort(1)
	pb, _ := b.QueryPort(1)
	sum := func() [32]byte { return sha256.Sum256(y.mr.Buf()) }
	clean := sum()
	rejected := func() uint64 { n, err := Rejected(b); require.NoError(t, err); return n }
	evil := bytes.Repeat([]byte{0xee}, 64)

	attacks := map[string]func(){
		"garbage": func() {
			c, err := net.Dial("tcp", pb.Addr)
			require.NoError(t, err)
			defer c.Close()
			_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
			waitClosed(t, c)
		},
		"truncated hello": func() {
			c, err := net.Dial("tcp", pb.Addr)
			require.NoError(t, err)
			defer c.Close()
			full := appendHello(nil, &helloMsg{typ: hDial, addr: pa.Addr, nonce: secret.Nonce()})
			_, _ = c.Write(full[:len(full)-5])
			_ = c.(*net.TCPConn).CloseWrite()
			waitClosed(t, c)
		},
		"version 1 hello": func() {
			c, err := net.Dial("tcp", pb.Addr)
			require.NoError(t, err)
			defer c.Close()
			_, _ = c.Write(append([]byte{byte(2 + len(pa.Addr)), 0, 0, 0, 1, byte(len(pa.Addr))}, pa.Addr...))
			waitClosed(t, c)
		},
		"hello without the secret, then a forged write": func() {
			c := attacker(t, pb.Addr, pa.Addr, k, false)
			_, _ = c.Write(forgedWrite(t, x, y, 77, evil))
			waitClosed(t, c)
		},
		"forged write without any hello": func() {
			c, err := net.Dial("tcp", pb.Addr)
			require.NoError(t, err)
			defer c.Close()
			_, _ = c.Write(forgedWrite(t, x, y, 77, evil))
			waitClosed(t, c)
		},
	}
	for name, attack := range attacks {
		before := rejected()
		attack()
		require.Eventually(t, func() bool { return rejected() == before+1 }, 10*time.Second, time.Millisecond, name)
		require.Equal(t, clean, sum(), name)
	}
	// A probe (connect, close before any byte) is not an attack.
	before := rejected()
	c, err := net.Dial("tcp", pb.Addr)
	require.NoError(t, err)
	c.Close()

	// The job still works.
	src := pattern(4096, 3)
	wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, src, y.mr.Buf())
	got := make([]byte, 4096)
	wc = post(t, y, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: x.mr.Addr, RKey: x.mr.RKey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, before, rejected())

	// The control: with the secret, the same kind of forged write (next PSN) lands.
	c = attacker(t, pb.Addr, pa.Addr, k, true)
	_, err = c.Write(forgedWrite(t, x, y, 78, evil))
	require.NoError(t, err)
	// the responder's ACK comes after the write was placed (and, in race builds, after its
	// RaceRelease: taking the same mutex orders this goroutine after the placement)
	var n [4]byte
	_, err = io.ReadFull(c, n[:])
	require.NoError(t, err)
	ack := make([]byte, binary.LittleEndian.Uint32(n[:]))
	_, err = io.ReadFull(c, ack)
	require.NoError(t, err)
	var p wire.Packet
	require.NoError(t, wire.Decode(ack, &p))
	require.Equal(t, wire.OpAck, p.Opcode)
	engine.RaceRelease()
	require.Equal(t, evil, y.mr.Buf()[:64])
}

// TestSecretMismatch: devices with different secrets (or one without) never open a stream:
// the RC QP exhausts its retries, each refused stream is counted.
func TestSecretMismatch(t *testing.T) {
	k, _ := secret.New()
	o, _ := secret.New()
	for _, other := range [][]byte{o.Bytes(), nil} {
		a, b := open(t, 1, Config{Secret: k.Bytes()}), open(t, 1, Config{Secret: other})
		x, y := connect(t, a, b, 64, false, 1)
		wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
		require.NotEqual(t, ibv.WCSuccess, wc.Status)
		require.Zero(t, y.mr.Buf()[0])
		na, _ := Rejected(a)
		nb, _ := Rejected(b)
		require.Positive(t, na+nb)
	}
	_, err := Open(Config{Secret: []byte{1, 2}, Ports: []PortConfig{{Listen: "127.0.0.1:0"}}})
	require.ErrorIs(t, err, ibv.ErrInvalidArgument)
}
