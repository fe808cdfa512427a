package bootstrap

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/secret"
)

func TestFrameRoundTrip(t *testing.T) {
	var e enc
	e.u64(7)
	e.u64(3)
	e.list([][]byte{[]byte("a"), nil, []byte("ccc")})
	var buf bytes.Buffer
	require.NoError(t, writeFrame(&buf, mGatherResult, e.b))
	f, err := readFrame(&buf)
	require.NoError(t, err)
	assert.Equal(t, mGatherResult, f.typ)
	d := dec{b: f.payload}
	assert.Equal(t, uint64(7), d.u64())
	assert.Equal(t, uint64(3), d.u64())
	parts := d.list()
	require.NoError(t, d.done())
	require.Len(t, parts, 3)
	assert.Equal(t, "a", string(parts[0]))
	assert.Empty(t, parts[1])
	assert.Equal(t, "ccc", string(parts[2]))
}

func TestReadFrameMalformed(t *testing.T) {
	hdr := func(ver, typ byte, n uint32) []byte {
		b := []byte{ver, typ, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[2:], n)
		return b
	}
	cases := map[string][]byte{
		"bad version":  hdr(9, mHello, 0),
		"unknown type": hdr(wireVersion, 200, 0),
		"zero type":    hdr(wireVersion, 0, 0),
		"huge length":  hdr(wireVersion, mHello, maxFrame+1),
	}
	for name, b := range cases {
		_, err := readFrame(bytes.NewReader(b))
		assert.ErrorIs(t, err, ErrProtocol, name)
	}
	_, err := readFrame(bytes.NewReader(append(hdr(wireVersion, mHello, 10), 1, 2)))
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestDecoderMalformed(t *testing.T) {
	// A list claiming 2^32-1 items in a short payload must fail without allocating them.
	d := dec{b: []byte{0xff, 0xff, 0xff, 0xff, 0, 0}}
	assert.Nil(t, d.list())
	assert.ErrorIs(t, d.done(), ErrProtocol)
	d = dec{b: []byte{0, 0, 0, 9, 'a'}}
	d.bytes()
	assert.ErrorIs(t, d.done(), ErrProtocol)
	d = dec{b: []byte{1, 2}}
	d.u8()
	assert.ErrorIs(t, d.done(), ErrProtocol, "trailing bytes")
	assert.ErrorIs(t, decodeError([]byte{1}), ErrProtocol)
}

// rawConn dials the server and returns a connection speaking raw frames.
func rawConn(t *testing.T, s *Server) net.Conn {
	c, err := net.Dial("tcp", s.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func TestServerSurvivesMalformedPeers(t *testing.T) {
	s := startServer(t, 2)
	// 1. Garbage bytes: the server answers a protocol error and hangs up.
	c := rawConn(t, s)
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	f, err := readFrame(c)
	require.NoError(t, err)
	require.Equal(t, mError, f.typ)
	assert.ErrorIs(t, decodeError(f.payload), ErrProtocol)
	_, err = readFrame(c)
	assert.Error(t, err, "connection closed")

	// 2. A message before hello.
	c = rawConn(t, s)
	require.NoError(t, writeFrame(c, mGather, make([]byte, 20)))
	f, err = readFrame(c)
	require.NoError(t, err)
	assert.Equal(t, mError, f.typ)

	// 3. A truncated hello payload.
	c = rawConn(t, s)
	require.NoError(t, writeFrame(c, mHello, []byte{0, 0}))
	f, err = readFrame(c)
	require.NoError(t, err)
	assert.Equal(t, mError, f.typ)

	// 4. A joined rank sending a malformed gather fails the job for the others: it left
	// without goodbye.
	c = rawConn(t, s)
	f = rawJoin(t, c, 0, 2, secret.Key{})
	require.Equal(t, mWelcome, f.typ)
	require.NoError(t, writeFrame(c, mGather, []byte{1, 2, 3}))
	f, err = readFrame(c)
	require.NoError(t, err)
	assert.Equal(t, mError, f.typ)
	require.Eventually(t, func() bool { return s.Err() != nil }, 5*time.Second, time.Millisecond)
	assert.ErrorIs(t, s.Err(), ErrPeerLost)

	// The server still answers: a new rank is refused with the job's failure, not a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Connect(ctx, rankInfo(s, 1, 2))
	assert.ErrorIs(t, err, ErrPeerLost)
}

// TestClientSurvivesMalformedServer: a "server" answering garbage gives an error, not a panic.
func TestClientSurvivesMalformedServer(t *testing.T) {
	answers := [][]byte{
		[]byte("garbage!"),
		{wireVersion, mWelcome, 0, 0, 0, 1, 0},       // truncated job id
		{wireVersion, mGatherResult, 0, 0, 0, 0},     // wrong answer type
		{wireVersion, mError, 0, 0, 0, 3, 0, 0, 0},   // truncated error
		{1, mWelcome, 0, 0, 0, 0},                    // the older version
		{wireVersion, mWelcome, 0xff, 0xff, 0xff, 0}, // too long
	}
	for i, ans := range answers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = readFrame(c)
			_, _ = c.Write(ans)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = Connect(ctx, Info{Launcher: LauncherGoarmci, Rank: 0, Size: 2, RDV: ln.Addr().String()})
		cancel()
		ln.Close()
		assert.Error(t, err, "answer %d", i)
		assert.NotErrorIs(t, err, ErrStartupTimeout, "answer %d: %v", i, err)
	}
}

func FuzzReadFrame(f *testing.F) {
	var e enc
	e.u64(1)
	e.u64(0)
	e.list([][]byte{[]byte("x")})
	var buf bytes.Buffer
	_ = writeFrame(&buf, mGatherResult, e.b)
	f.Add(buf.Bytes())
	f.Add([]byte{wireVersion, mError, 0, 0, 0, 3, 1, 2, 3})
	buf.Reset()
	_ = writeFrame(&buf, mPeerFailed, encodePeerFailed(&PeerFailure{Rank: 2, Reason: FailSilent, After: time.Second}))
	f.Add(buf.Bytes())
	buf.Reset()
	_ = writeFrame(&buf, mPing, pingPayload)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := readFrame(bytes.NewReader(b))
		if err != nil {
			return
		}
		// Every decoder must cope with any payload.
		d := dec{b: fr.payload}
		d.u64()
		d.u64()
		d.list()
		_ = d.done()
		d = dec{b: fr.payload}
		d.u32list()
		_ = decodeError(fr.payload)
		if pf, err := decodePeerFailed(fr.payload, 1<<20); err == nil && (pf.Rank < 0 || pf.Rank >= 1<<20) {
			t.Fatalf("peer failure of rank %d accepted", pf.Rank)
		}
		// Round trip.
		var out bytes.Buffer
		if err := writeFrame(&out, fr.typ, fr.payload); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), b[:headerLen+len(fr.payload)]) {
			t.Fatalf("round trip differs")
		}
	})
}
