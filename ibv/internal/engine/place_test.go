package engine

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/ibv/wire"
)

// writeHeader builds the headers of an RDMA write-only packet from x's QP to y's with PSN psn.
func writeHeader(t *testing.T, x, y *side, psn uint32, off uint64, n int) []byte {
	h := wire.Header{Opcode: wire.OpWrite, Flags: wire.FlagOnly | wire.FlagAckReq, DestQPN: y.qp.Num(), PSN: psn,
		SrcQPN: x.qp.Num(), RETH: wire.RETH{VAddr: y.mr.Addr + off, RKey: y.mr.RKey, DMALen: uint32(n)}}
	hdr, err := wire.AppendHeader(nil, &h, n)
	require.NoError(t, err)
	require.Equal(t, len(hdr), HeaderLen(hdr))
	require.Equal(t, n, PayloadLen(hdr))
	return hdr
}

// TestPlacement: Place grants the in-order write its target memory and nothing else; a placed
// payload is delivered without a second copy; a packet of the same direction on another link, a
// Modify and a move to ERROR revoke a placement in progress, a response on another link does not.
func TestPlacement(t *testing.T) {
	n := newMemNet()
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{})
	e := provider.DeviceDriver(y.ctx).(*Device).Engine()
	yq := provider.QPDriver(y.qp).(*QP)
	linkA := memLink{net: n, from: "nowhere", to: "A"}
	linkB := memLink{net: n, from: "nowhere", to: "B"}
	psn := yq.ResponderState(nil)
	var b Batch

	// out of order, beyond the region, wrong source: no placement
	_, ok := e.Place(&b, writeHeader(t, x, y, psn+1, 0, 5000), linkA)
	require.False(t, ok)
	_, ok = e.Place(&b, writeHeader(t, x, y, psn, 1<<20-100, 5000), linkA)
	require.False(t, ok)
	wrongSrc := writeHeader(t, x, y, psn, 0, 5000)
	wrongSrc[12]++ // the source QPN
	_, ok = e.Place(&b, wrongSrc, linkA)
	require.False(t, ok)

	// in order: the destination is the target memory itself
	data := pattern(5000, 3)
	hdr := writeHeader(t, x, y, psn, 4096, 5000)
	pl, ok := e.Place(&b, hdr, linkA)
	require.True(t, ok)
	require.Len(t, pl.Dst, 5000)
	require.True(t, &pl.Dst[0] == &y.mr.Buf()[4096], "placement points into the MR")
	require.True(t, pl.Begin())
	copy(pl.Dst, data)
	pl.End()
	e.DeliverSplit(&b, hdr, pl.Dst, linkA, &pl)
	e.EndBatch(&b)
	require.Equal(t, psn+1, yq.ResponderState(nil), "the placed packet was executed")
	require.True(t, bytes.Equal(data, y.mr.Buf()[4096:4096+5000]))
	require.False(t, pl.Valid(), "delivery ends the reservation")

	// a packet of the QP on another link revokes a placement in progress
	hdr = writeHeader(t, x, y, psn+1, 0, 5000)
	pl, ok = e.Place(&b, hdr, linkA)
	require.True(t, ok)
	dup := writeHeader(t, x, y, psn, 4096, 5000)
	e.DeliverSplit(&b, dup, data, linkB, nil) // a duplicate on link B
	require.False(t, pl.Begin(), "revoked by a packet on another link")
	require.Equal(t, psn+1, yq.ResponderState(nil), "a duplicate is not executed again")

	// a packet on the placing link does not revoke, nor does a response on another link (the
	// ACK of y's own request on y's other stream: traffic both ways); a Modify does
	pl, ok = e.Place(&b, hdr, linkA)
	require.True(t, ok)
	ack, err := wire.AppendHeader(nil, &wire.Header{Opcode: wire.OpAck, Flags: wire.FlagOnly, DestQPN: y.qp.Num(),
		PSN: 7, SrcQPN: x.qp.Num(), AETH: wire.AETH{Syndrome: wire.SynAck}}, 0)
	require.NoError(t, err)
	e.Deliver(&b, ack, linkB)
	require.True(t, pl.Valid(), "a response on another link revoked a request's placement")
	e.DeliverSplit(&b, dup, data, linkA, nil)
	require.True(t, pl.Valid())
	require.NoError(t, y.qp.Modify(&ibv.QPAttr{MinRNRTimer: 3}, ibv.AttrMinRNRTimer))
	require.False(t, pl.Valid(), "revoked by Modify")

	// a payload that is not in place is copied as usual
	pl, ok = e.Place(&b, hdr, linkA)
	require.True(t, ok)
	other := pattern(5000, 9)
	e.DeliverSplit(&b, hdr, other, linkA, &pl)
	require.Equal(t, psn+2, yq.ResponderState(nil))
	require.True(t, bytes.Equal(other, y.mr.Buf()[:5000]))

	// ERROR revokes
	pl, ok = e.Place(&b, writeHeader(t, x, y, psn+2, 0, 5000), linkA)
	require.True(t, ok)
	require.NoError(t, y.qp.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState))
	require.False(t, pl.Begin(), "revoked by the move to ERROR")
	_, ok = e.Place(&b, writeHeader(t, x, y, psn+2, 0, 5000), linkA)
	require.False(t, ok, "no placement in ERROR")
}

// TestPlacementReadResponse: a read response in order is placed into the local buffer of the
// read; one that straddles two buffers is not.
func TestPlacementReadResponse(t *testing.T) {
	n := newMemNet()
	// the responder never answers: the test plays it
	x, y := connectRC(t, n.open(t, 1, Config{}), n.open(t, 1, Config{}), pairOpts{timeout: 20})
	require.NoError(t, y.qp.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState))
	e := provider.DeviceDriver(x.ctx).(*Device).Engine()
	local := make([]byte, 10000)
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 1, Opcode: ibv.OpRDMARead, Flags: ibv.SendSignaled, LocalBuf: local,
		RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}))
	xq := provider.QPDriver(x.qp).(*QP)
	xq.sqMu.Lock()
	first, mtu := xq.sq.slot(xq.sq.head).firstPSN, xq.sq.a.mtu
	xq.sqMu.Unlock()
	require.Equal(t, 4096, mtu)
	resp := func(k uint32, n int) []byte {
		h := wire.Header{Opcode: wire.OpReadResp, DestQPN: x.qp.Num(), PSN: first + k, SrcQPN: y.qp.Num()}
		if k == 0 {
			h.Flags |= wire.FlagFirst
		}
		if k == 2 {
			h.Flags |= wire.FlagLast
		}
		hdr, err := wire.AppendHeader(nil, &h, n)
		require.NoError(t, err)
		return hdr
	}
	link := memLink{net: n, from: "nowhere", to: "A"}
	var b Batch
	_, ok := e.Place(&b, resp(1, 4096), link)
	require.False(t, ok, "out of order")
	_, ok = e.Place(&b, resp(0, 4000), link)
	require.False(t, ok, "wrong length")
	src := pattern(10000, 5)
	for k := uint32(0); k < 3; k++ {
		off, n := int(k)*4096, min(4096, 10000-int(k)*4096)
		hdr := resp(k, n)
		pl, ok := e.Place(&b, hdr, link)
		require.True(t, ok, "response %d", k)
		require.True(t, &pl.Dst[0] == &local[off])
		require.True(t, pl.Begin())
		copy(pl.Dst, src[off:off+n])
		pl.End()
		e.DeliverSplit(&b, hdr, pl.Dst, link, &pl)
	}
	wc := waitWC(t, x.cq)
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.True(t, bytes.Equal(src, local))
}
