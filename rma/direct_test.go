package rma_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// TestDirectViewShm: over shared memory a blocking Put, Get, PutS/GetS and PutV to a peer go
// through a load/store view of its part (taken at the first use); values are exact, a
// non-blocking put or accumulate issued just before is seen by the Get (program order), bad input
// still fails with ErrOutOfRange and changes nothing, and Free gives the views back. Over tcp
// there is no view.
func TestDirectViewShm(t *testing.T) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		t.Run(string(tr), func(t *testing.T) {
			rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				directBody(ctx, t, rt, tr == rma.TransportShm)
			}, rmatest.Transport(tr))
		})
	}
}

func directBody(ctx context.Context, t testing.TB, rt *rma.Runtime, shm bool) {
	const part = 1 << 16
	seg, err := rt.Malloc(ctx, part)
	require.NoError(t, err)
	me, peer := rt.Rank(), 1-rt.Rank()
	base := me * (part / 2) // each origin writes its own half of the peer's part
	require.False(t, seg.HasView(peer), "no view before the first operation")

	data := pattern(me, 1000)
	require.NoError(t, rt.Put(ctx, data, seg, peer, base+8))
	require.Equal(t, shm, seg.HasView(peer), "view after a blocking Put")
	got := make([]byte, 1000)
	require.NoError(t, rt.Get(ctx, seg, peer, base+8, got))
	require.Equal(t, data, got)

	// a non-blocking put (through the view on shm: complete at issue), then a non-blocking
	// accumulate (a work request) and at once a get of the same range: the new data
	d2 := pattern(me+7, 4096)
	h, err := rt.NbPut(ctx, d2, seg, peer, base+2048)
	require.NoError(t, err)
	g2 := make([]byte, 4096)
	hg, err := rt.NbGet(ctx, seg, peer, base+2048, g2)
	require.NoError(t, err)
	require.NoError(t, hg.Wait(ctx))
	require.NoError(t, h.Wait(ctx))
	require.Equal(t, d2, g2, "get after a non-blocking put returns the new data")
	ones := make([]byte, 8*64)
	for i := 0; i < 64; i++ {
		ones[8*i] = 1
	}
	require.NoError(t, rt.Put(ctx, make([]byte, 8*64), seg, peer, base+4096))
	ha, err := rt.NbAcc(ctx, rma.AccInt64, 2, ones, seg, peer, base+4096)
	require.NoError(t, err)
	g3 := make([]byte, 8*64)
	require.NoError(t, rt.Get(ctx, seg, peer, base+4096, g3))
	require.NoError(t, ha.Wait(ctx))
	for i := 0; i < 64; i++ {
		require.Equal(t, byte(2), g3[8*i], "element %d: get after a non-blocking accumulate", i)
	}

	// strided: 4 rows of 100 bytes, 256 apart at the target, packed at the origin
	src := pattern(me+3, 400)
	require.NoError(t, rt.PutS(ctx, src, []int{100}, seg, peer, base+8192, []int{256}, []int{100, 4}))
	back := make([]byte, 400)
	require.NoError(t, rt.GetS(ctx, seg, peer, base+8192, []int{256}, back, []int{100}, []int{100, 4}))
	require.Equal(t, src, back)
	// vector
	require.NoError(t, rt.PutV(ctx, []rma.Vec{{Local: []byte{1, 2}, Off: base + 20000}, {Local: []byte{3}, Off: base + 20010}}, seg, peer))
	v := make([]byte, 11)
	require.NoError(t, rt.Get(ctx, seg, peer, base+20000, v))
	require.Equal(t, []byte{1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 3}, v)

	// out of range: an error, nothing written
	before := make([]byte, 16)
	require.NoError(t, rt.Get(ctx, seg, peer, part-16, before))
	require.ErrorIs(t, rt.Put(ctx, make([]byte, 32), seg, peer, part-16), rma.ErrOutOfRange)
	require.ErrorIs(t, rt.Get(ctx, seg, peer, -1, make([]byte, 4)), rma.ErrOutOfRange)
	require.ErrorIs(t, rt.Put(ctx, make([]byte, 4), seg, peer, -4), rma.ErrOutOfRange)
	require.ErrorIs(t, rt.Put(ctx, nil, seg, peer, part+1), rma.ErrOutOfRange)
	require.ErrorIs(t, rt.Put(ctx, nil, seg, 2, 0), rma.ErrBadRank)
	require.ErrorIs(t, rt.Get(ctx, seg, -1, 0, make([]byte, 4)), rma.ErrBadRank)
	after := make([]byte, 16)
	require.NoError(t, rt.Get(ctx, seg, peer, part-16, after))
	require.True(t, bytes.Equal(before, after))
	// the last byte of the part, and an empty transfer at its end
	require.NoError(t, rt.Put(ctx, nil, seg, peer, part))
	require.NoError(t, rt.Get(ctx, seg, peer, part-1, after[:1]))
	require.Equal(t, before[15], after[0])

	require.NoError(t, rt.Barrier(ctx))
	// what the peer wrote into my part, read locally
	require.Equal(t, pattern(peer, 1000), seg.Local()[peer*(part/2)+8:peer*(part/2)+1008])
	require.NoError(t, rt.Barrier(ctx))
	require.NoError(t, seg.Free(ctx))
	require.False(t, seg.HasView(peer), "Free gives the views back")
	require.ErrorIs(t, rt.Put(ctx, data, seg, peer, 0), rma.ErrFreed)
}
