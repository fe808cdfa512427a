package rma_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/hybridft/udcm"
	"github.com/goarmci/goarmci/ibv/wire"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// forgeHello runs the dialer's side of the tcp provider's stream hello (version 2) on c without
// the job's secret: its address claim, a nonce, then a proof of random bytes.
func forgeHello(t testing.TB, c net.Conn, claim string) {
	var nonce [32]byte
	_, _ = rand.Read(nonce[:])
	h := binary.LittleEndian.AppendUint32(nil, uint32(2+1+len(claim)+32))
	h = append(append(append(h, 2, 1, byte(len(claim))), claim...), nonce[:]...)
	_, err := c.Write(h)
	require.NoError(t, err)
	var n [4]byte
	_, err = io.ReadFull(c, n[:])
	require.NoError(t, err)
	_, err = io.CopyN(io.Discard, c, int64(binary.LittleEndian.Uint32(n[:]))) // the acceptor's hello
	require.NoError(t, err)
	proof := make([]byte, 32)
	_, _ = rand.Read(proof)
	_, err = c.Write(append(binary.LittleEndian.AppendUint32(nil, 34), append([]byte{2, 3}, proof...)...))
	require.NoError(t, err)
}

// awaitClose reads c until the peer closes it (EOF or reset), never until a deadline.
func awaitClose(t testing.TB, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, c); !errors.Is(err, syscall.ECONNRESET) {
		require.NoError(t, err)
	}
}

// TestForgedTrafficLeavesJobUntouched: a running 2-rank tcp job (hybridft manager on, so its UD
// connection manager listens too) gets forged traffic on every listening port of rank 1 from
// outside the job: garbage, a truncated hello, a valid-format hello without the job's secret
// followed by RDMA WRITEs aimed at rank 1's segment with the right QPN, rkey and address and
// the PSNs of the window starting at the connection's first PSN, a plain engine frame without
// any hello, and on the CM port garbage, a well-formed CONN_REQ without a MAC and one with
// another key's MAC. After each: rank 1's segment checksum is unchanged, nothing panicked, the
// rejection counter moved; then the job's Put and Get still work.
func TestForgedTrafficLeavesJobUntouched(t *testing.T) {
	const size = 4096
	type surface struct {
		rt            *rma.Runtime
		tcp, cm       []string
		cmQPN, dstQPN uint32
	}
	var mu sync.Mutex
	var target surface
	rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		seg, err := rt.Malloc(ctx, size)
		require.NoError(t, err)
		me := rt.Rank()
		pattern := bytes.Repeat([]byte{byte(0x10 + me)}, size)
		copy(seg.Local(), pattern)
		if me == 1 {
			tcpAddrs, cm, cmQPN := rt.Ports()
			require.NotEmpty(t, tcpAddrs)
			require.NotEmpty(t, cm, "the hybridft manager's CM")
			mu.Lock()
			target = surface{rt: rt, tcp: tcpAddrs, cm: cm, cmQPN: cmQPN, dstQPN: rt.NetConn(0).QP().Num()}
			mu.Unlock()
		}
		require.NoError(t, rt.Barrier(ctx))
		if me == 0 {
			mu.Lock()
			tg := target
			mu.Unlock()
			addr, rkey := seg.RemoteKey(1)
			local := rt.NetConn(1).Local()
			writes := func() []byte { // forged RDMA WRITEs over the PSN window from the first PSN
				var out []byte
				for i := range uint32(64) {
					h := wire.Header{Opcode: wire.OpWrite, Flags: wire.FlagOnly | wire.FlagAckReq, DestQPN: tg.dstQPN,
						PSN: wire.PSNAdd(local.PSN, i), SrcQPN: local.QPN, RETH: wire.RETH{VAddr: addr, RKey: rkey, DMALen: 64}}
					p, err := wire.Append(nil, &h, bytes.Repeat([]byte{0xee}, 64))
					require.NoError(t, err)
					out = append(binary.LittleEndian.AppendUint32(out, uint32(len(p))), p...)
				}
				return out
			}
			dial := func() net.Conn {
				c, err := net.Dial("tcp", tg.tcp[0])
				require.NoError(t, err)
				return c
			}
			tcpAttacks := map[string]func(){
				"garbage": func() {
					c := dial()
					defer c.Close()
					_, _ = c.Write([]byte("\x16\x03\x01 not a goarmci stream"))
					awaitClose(t, c)
				},
				"truncated hello": func() {
					c := dial()
					defer c.Close()
					_, _ = c.Write([]byte{40, 0, 0, 0, 2, 1, 9})
					_ = c.(*net.TCPConn).CloseWrite()
					awaitClose(t, c)
				},
				"hello without the secret, forged writes": func() {
					c := dial()
					defer c.Close()
					forgeHello(t, c, local.Addr)
					_, _ = c.Write(writes())
					awaitClose(t, c)
				},
				"engine frames without a hello": func() {
					c := dial()
					defer c.Close()
					_, _ = c.Write(writes())
					awaitClose(t, c)
				},
			}
			req, err := (&udcm.Msg{Type: udcm.ConnREQ, Src: 0, Dst: 1, Seq: 1, Payload: []byte("forged")}).Append(nil)
			require.NoError(t, err)
			var other [32]byte
			_, _ = rand.Read(other[:])
			ud := func(payload []byte) []byte {
				h := wire.Header{Opcode: wire.OpUDSend, Flags: wire.FlagOnly, DestQPN: tg.cmQPN, PSN: 1,
					DETH: wire.DETH{QKey: udcm.QKey, SrcQPN: 1}}
				p, err := wire.Append(nil, &h, payload)
				require.NoError(t, err)
				return p
			}
			cmAttacks := map[string][]byte{
				"CONN_REQ without a MAC":             ud(req),
				"CONN_REQ with a MAC of another key": ud(append(bytes.Clone(req), other[:udcm.MACLen]...)),
			}
			ua, err := net.ResolveUDPAddr("udp", tg.cm[0])
			require.NoError(t, err)
			uc, err := net.DialUDP("udp", nil, ua)
			require.NoError(t, err)
			defer uc.Close()

			check := func(name string, before int64) {
				require.Eventually(t, func() bool { return tg.rt.Rejected() > before }, 20*time.Second, time.Millisecond, name)
			}
			for name, attack := range tcpAttacks {
				before := tg.rt.Rejected()
				attack()
				check(name, before)
			}
			_, _ = uc.Write([]byte("garbage datagram")) // dropped by the udp engine, not counted
			for name, d := range cmAttacks {
				before := tg.rt.Rejected()
				_, err := uc.Write(d)
				require.NoError(t, err)
				check(name, before)
			}
		}
		require.NoError(t, rt.Barrier(ctx))
		// No forged byte landed: every rank's part is as it wrote it.
		require.Equal(t, sha256.Sum256(pattern), sha256.Sum256(seg.Local()), "rank %d's memory", me)
		require.NoError(t, rt.Barrier(ctx))
		// The job goes on: Put to the other rank, Get it back.
		peer := 1 - me
		msg := bytes.Repeat([]byte{byte(0xa0 + me)}, 256)
		require.NoError(t, rt.Put(ctx, msg, seg, peer, 1024*(1+me)))
		require.NoError(t, rt.Fence(ctx, peer))
		got := make([]byte, 256)
		require.NoError(t, rt.Get(ctx, seg, peer, 1024*(1+me), got))
		require.Equal(t, msg, got)
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, seg.Free(ctx))
	}, rmatest.Transport(rma.TransportTCP))
}
