package ibv_test

import (
	"math"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newMR(t *testing.T, n int, acc ibv.Access) (*ibv.Context, *ibv.PD, *ibv.MR, *stubDriver) {
	t.Helper()
	c, d := newStub(t)
	pd, err := c.AllocPD()
	require.NoError(t, err)
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(i)
	}
	mr, err := pd.RegMR(buf, acc)
	require.NoError(t, err)
	return c, pd, mr, d
}

func TestRegMRChecks(t *testing.T) {
	c, d := newStub(t)
	pd, err := c.AllocPD()
	require.NoError(t, err)
	_, err = pd.RegMR(nil, ibv.AccessAll)
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument, "empty")
	_, err = pd.RegMR(make([]byte, 8), ibv.AccessRemoteWrite)
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument, "remote write without local write")
	_, err = pd.RegMR(make([]byte, 8), ibv.AccessRemoteAtomic|ibv.AccessRemoteRead)
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument, "remote atomic without local write")
	_, err = pd.RegMR(make([]byte, 8), 1<<7)
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument, "unknown flag")
	mr, err := pd.RegMR(make([]byte, 8), ibv.AccessRemoteRead)
	require.NoError(t, err, "read-only region needs no local write")
	assert.Equal(t, 1, d.regs)

	d.refuseMR = true
	_, err = pd.RegMR(make([]byte, 8), ibv.AccessAll)
	assert.ErrorIs(t, err, errStubRefused)
	d.refuseMR = false
	require.NoError(t, mr.Dereg())
	assert.NoError(t, pd.Dealloc(), "the refused MR left no reference behind")
}

func TestMRKeysAndLookup(t *testing.T) {
	c, d := newStub(t)
	pd, err := c.AllocPD()
	require.NoError(t, err)
	seen := map[uint32]bool{}
	var mrs []*ibv.MR
	for i := 0; i < 100; i++ {
		buf := make([]byte, 16)
		mr, err := pd.RegMR(buf, ibv.AccessAll)
		require.NoError(t, err)
		assert.False(t, seen[mr.LKey], "lkey reused")
		assert.False(t, seen[mr.RKey], "rkey reused")
		seen[mr.LKey], seen[mr.RKey] = true, true
		assert.Same(t, mr, provider.LookupLKey(c, mr.LKey))
		assert.Same(t, mr, provider.LookupRKey(c, mr.RKey))
		assert.Equal(t, uint64(16), mr.Length)
		assert.Same(t, pd, mr.PD())
		assert.Equal(t, &buf[0], &mr.Buf()[0])
		mrs = append(mrs, mr)
	}
	for _, mr := range mrs {
		require.NoError(t, mr.Dereg())
		assert.Nil(t, provider.LookupLKey(c, mr.LKey))
		assert.Nil(t, provider.LookupRKey(c, mr.RKey))
	}
	assert.Equal(t, 100, d.deregs)
}

func TestMRSliceBounds(t *testing.T) {
	_, _, mr, _ := newMR(t, 64, ibv.AccessAll)
	a, n := mr.Addr, mr.Length
	cases := []struct {
		name string
		addr uint64
		len  uint64
		ok   bool
	}{
		{"whole", a, n, true},
		{"first byte", a, 1, true},
		{"last byte", a + n - 1, 1, true},
		{"empty at start", a, 0, true},
		{"empty at end", a + n, 0, true},
		{"middle", a + 10, 20, true},
		{"one past end", a + n - 7, 8, false},
		{"starts at end", a + n, 1, false},
		{"one below start", a - 1, 1, false},
		{"below start spanning in", a - 1, 2, false},
		{"too long", a, n + 1, false},
		{"empty past end", a + n + 1, 0, false},
		{"length wraps", a + 1, math.MaxUint64, false},
		{"length wraps from start", a, math.MaxUint64, false},
		{"addr+len wraps to inside", a + 8, math.MaxUint64 - 7, false},
		{"address at top", math.MaxUint64, 1, false},
		{"address 0", 0, 1, false},
		{"address 0 huge length", 0, math.MaxUint64, false},
	}
	for _, c := range cases {
		b, err := mr.Slice(c.addr, c.len)
		if !c.ok {
			assert.ErrorIs(t, err, ibv.ErrOutOfBounds, c.name)
			assert.Nil(t, b, c.name)
			continue
		}
		require.NoError(t, err, c.name)
		require.Len(t, b, int(c.len), c.name)
		assert.Equal(t, int(c.len), cap(b), "%s: the slice may not reach beyond the request", c.name)
		if c.len > 0 {
			assert.Equal(t, byte(c.addr-a), b[0], c.name)
		}
	}
	sge := mr.SGE(5, 9)
	assert.Equal(t, ibv.SGE{Addr: a + 5, Length: 9, LKey: mr.LKey}, sge)
}

func TestMRDeregTwice(t *testing.T) {
	c, pd, mr, d := newMR(t, 32, ibv.AccessAll)
	assert.ErrorIs(t, pd.Dealloc(), ibv.ErrBusy)
	require.NoError(t, mr.Dereg())
	err := mr.Dereg()
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument)
	assert.Equal(t, 1, d.deregs, "the driver hears of it once")
	assert.NoError(t, pd.Dealloc(), "the PD reference is dropped once")
	_, st := provider.RemoteSlice(c, pd, mr.RKey, mr.Addr, 1, ibv.AccessRemoteRead)
	assert.Equal(t, ibv.WCRemAccessErr, st)
}

func TestRemoteSlice(t *testing.T) {
	c, pd, mr, _ := newMR(t, 64, ibv.AccessLocalWrite|ibv.AccessRemoteWrite)
	otherPD, err := c.AllocPD()
	require.NoError(t, err)
	b, st := provider.RemoteSlice(c, pd, mr.RKey, mr.Addr+8, 8, ibv.AccessRemoteWrite)
	require.Equal(t, ibv.WCSuccess, st)
	assert.Equal(t, []byte{8, 9, 10, 11, 12, 13, 14, 15}, b)
	b, st = provider.RemoteSlice(c, nil, mr.RKey, mr.Addr, 64, ibv.AccessRemoteWrite)
	assert.Equal(t, ibv.WCSuccess, st, "nil PD: no PD check")
	assert.Len(t, b, 64)

	bad := []struct {
		name string
		pd   *ibv.PD
		key  uint32
		addr uint64
		n    uint64
		need ibv.Access
	}{
		{"wrong rkey", pd, mr.RKey ^ 0xff, mr.Addr, 8, ibv.AccessRemoteWrite},
		{"lkey as rkey", pd, mr.LKey, mr.Addr, 8, ibv.AccessRemoteWrite},
		{"other PD", otherPD, mr.RKey, mr.Addr, 8, ibv.AccessRemoteWrite},
		{"no remote read", pd, mr.RKey, mr.Addr, 8, ibv.AccessRemoteRead},
		{"no remote atomic", pd, mr.RKey, mr.Addr, 8, ibv.AccessRemoteAtomic},
		{"one byte past end", pd, mr.RKey, mr.Addr + 57, 8, ibv.AccessRemoteWrite},
		{"below start", pd, mr.RKey, mr.Addr - 1, 8, ibv.AccessRemoteWrite},
		{"wrapping length", pd, mr.RKey, mr.Addr + 1, math.MaxUint64, ibv.AccessRemoteWrite},
	}
	for _, c2 := range bad {
		b, st := provider.RemoteSlice(c, c2.pd, c2.key, c2.addr, c2.n, c2.need)
		assert.Equal(t, ibv.WCRemAccessErr, st, c2.name)
		assert.Nil(t, b, c2.name)
	}
}

func TestLocalSlices(t *testing.T) {
	c, pd, mr, _ := newMR(t, 64, ibv.AccessLocalWrite)
	ro, err := pd.RegMR(make([]byte, 16), ibv.AccessRemoteRead)
	require.NoError(t, err)
	otherPD, err := c.AllocPD()
	require.NoError(t, err)

	bufs, st := provider.LocalSlices(c, pd, []ibv.SGE{mr.SGE(0, 4), mr.SGE(60, 4), ro.SGE(0, 16)}, false, nil)
	require.Equal(t, ibv.WCSuccess, st)
	require.Len(t, bufs, 3)
	assert.Equal(t, []byte{0, 1, 2, 3}, bufs[0])
	assert.Equal(t, []byte{60, 61, 62, 63}, bufs[1])
	assert.Len(t, bufs[2], 16)

	bad := []struct {
		name  string
		pd    *ibv.PD
		sgl   []ibv.SGE
		write bool
	}{
		{"bad lkey", pd, []ibv.SGE{{Addr: mr.Addr, Length: 4, LKey: mr.LKey ^ 0xff}}, false},
		{"rkey as lkey", pd, []ibv.SGE{{Addr: mr.Addr, Length: 4, LKey: mr.RKey}}, false},
		{"past end", pd, []ibv.SGE{mr.SGE(61, 4)}, false},
		{"second SGE bad", pd, []ibv.SGE{mr.SGE(0, 4), mr.SGE(64, 1)}, false},
		{"other PD", otherPD, []ibv.SGE{mr.SGE(0, 4)}, false},
		{"write into read-only", pd, []ibv.SGE{ro.SGE(0, 4)}, true},
	}
	for _, b := range bad {
		_, st := provider.LocalSlices(c, b.pd, b.sgl, b.write, nil)
		assert.Equal(t, ibv.WCLocProtErr, st, b.name)
	}

	lb := []byte{7, 7}
	bufs, st = provider.LocalBuffers(c, pd, &ibv.SendWR{LocalBuf: lb}, true, nil)
	require.Equal(t, ibv.WCSuccess, st)
	require.Len(t, bufs, 1)
	assert.Equal(t, &lb[0], &bufs[0][0], "LocalBuf is used in place")
	_, st = provider.LocalBuffers(c, pd, &ibv.SendWR{SGL: []ibv.SGE{ro.SGE(0, 1)}}, true, nil)
	assert.Equal(t, ibv.WCLocProtErr, st)

	require.NoError(t, mr.Dereg())
	_, st = provider.LocalSlices(c, pd, []ibv.SGE{mr.SGE(0, 4)}, false, nil)
	assert.Equal(t, ibv.WCLocProtErr, st, "deregistered")
}
