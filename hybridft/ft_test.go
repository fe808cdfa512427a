package hybridft

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider/tcp"
	"github.com/goarmci/goarmci/ibv/wire"
	"github.com/goarmci/goarmci/internal/testutil"
)

// node is one pretend process: a Manager, a tcp device with one port per rail, a memory region.
type node struct {
	m     *Manager
	dev   *ibv.Context
	ep    *Endpoint
	mr    *ibv.MR
	buf   []byte
	conns []*Conn
}

func testOptions() Options {
	return Options{APM: true, AckTimeout: 10 * time.Millisecond, RetryCount: 3, Resend: 20 * time.Millisecond,
		Probe: 20 * time.Millisecond, Backoff: 200 * time.Millisecond}
}

func newNode(t *testing.T, o Options, rails, size int) *node {
	t.Helper()
	return newNodeTCP(t, o, rails, size, nil)
}

func newNodeTCP(t *testing.T, o Options, rails, size int, drop func(uint8, []byte) bool) *node {
	t.Helper()
	var pcs []tcp.PortConfig
	for i := 0; i < rails; i++ {
		pcs = append(pcs, tcp.PortConfig{Listen: "127.0.0.1:0"})
	}
	dev, err := tcp.Open(tcp.Config{Ports: pcs, DialTimeout: 500 * time.Millisecond, DropInbound: drop})
	require.NoError(t, err)
	m, err := NewManager(o)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, m.Close())
		require.NoError(t, dev.Close())
	})
	ep, err := m.NewEndpoint(dev, 1, 1<<16)
	require.NoError(t, err)
	n := &node{m: m, dev: dev, ep: ep, buf: make([]byte, size)}
	n.mr, err = ep.PD.RegMR(n.buf, ibv.AccessAll)
	require.NoError(t, err)
	return n
}

// link connects a and b with one connection per rail (rail r: port r to port r).
func link(t *testing.T, a, b *node, rails int, o ConnectOptions) {
	t.Helper()
	for r := 1; r <= rails; r++ {
		ca, err := a.ep.WithPort(uint8(r)).NewConn()
		require.NoError(t, err)
		cb, err := b.ep.WithPort(uint8(r)).NewConn()
		require.NoError(t, err)
		require.NoError(t, ca.ConnectWith(cb.Local(), o))
		require.NoError(t, cb.Connect(ca.Local()))
		a.conns, b.conns = append(a.conns, ca), append(b.conns, cb)
		t.Cleanup(func() { _ = ca.Close(); _ = cb.Close() })
	}
}

func waitArmed(t *testing.T, cs ...*Conn) {
	t.Helper()
	for _, c := range cs {
		require.Eventually(t, func() bool { return c.QP().Query().PathMigState == ibv.Armed }, 20*time.Second,
			time.Millisecond, "alternate path of qp %d not armed", c.QP().Num())
	}
}

// collector drives an endpoint's completion filter until the wanted work requests completed.
type collector struct {
	ep  *Endpoint
	got map[uint64]ibv.WC
	wcs [64]ibv.WC
}

func newCollector(ep *Endpoint) *collector { return &collector{ep: ep, got: map[uint64]ibv.WC{}} }

func (cl *collector) poll(t *testing.T) {
	n := cl.ep.Poll(cl.wcs[:])
	for _, wc := range cl.wcs[:n] {
		_, dup := cl.got[wc.WRID]
		require.False(t, dup, "work request %d completed twice", wc.WRID)
		cl.got[wc.WRID] = wc
	}
}

func (cl *collector) waitAll(t *testing.T, ids int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(cl.got) < ids {
		cl.poll(t)
		if len(cl.got) >= ids {
			break
		}
		wctx, wc := context.WithTimeout(ctx, 5*time.Millisecond)
		err := cl.ep.Wait(wctx)
		wc()
		require.NoError(t, ctx.Err(), "%d of %d completions", len(cl.got), ids)
		_ = err
	}
}

// postRetry posts, driving the filter while the log is full.
func postRetry(t *testing.T, c *Conn, cl *collector, wr *ibv.SendWR) {
	t.Helper()
	for {
		err := c.Post(wr)
		if err == nil {
			return
		}
		require.ErrorIs(t, err, ibv.ErrQueueFull)
		cl.poll(t)
		time.Sleep(100 * time.Microsecond)
	}
}

func TestConnInfoV2RoundTrip(t *testing.T) {
	ci := ConnInfo{Addr: "127.0.0.1:5", LID: 3, QPN: 9, PSN: 77, ID: 1 << 40, Port: 2,
		Paths: []PortPath{{Addr: "a:1", LID: 1}, {Addr: "b:2", LID: 2, LMC: 1}}, CM: []string{"c:3", "d:4"}, CMQPN: 5}
	got, err := UnmarshalConnInfo(ci.Marshal())
	require.NoError(t, err)
	require.Equal(t, ci, got)
	b := ci.Marshal()
	_, err = UnmarshalConnInfo(b[:len(b)-1])
	require.ErrorIs(t, err, ErrMalformed)
}

// One of two rails goes down in the middle of a stream of writes striped over both: APM
// migrates the affected queue pair (one PATH_MIG), every write completes once, data intact.
func TestAPMRailDownStream(t *testing.T) {
	testutil.CheckGoroutines(t)
	const size, chunk = 16 << 20, 64 << 10
	// The port going down is reported at once (the provider fails the port's streams: early
	// detection), so the ACK timeout can be generous: with the 10 ms of testOptions a loaded
	// machine (-race, 2 cores) stalls the healthy rail's ACKs long enough to migrate it too.
	o := testOptions()
	o.AckTimeout, o.RetryCount = 100*time.Millisecond, 7
	a, b := newNode(t, o, 2, size), newNode(t, o, 2, size)
	link(t, a, b, 2, ConnectOptions{})
	waitArmed(t, a.conns...)
	waitArmed(t, b.conns...)
	for i := range a.buf {
		a.buf[i] = byte(i*7 + i>>12)
	}
	cl := newCollector(a.ep)
	n := size / chunk
	for i := 0; i < n; i++ {
		if i == n/3 {
			require.NoError(t, tcp.SetPortDown(a.dev, 1, true))
		}
		off := i * chunk
		wr := &ibv.SendWR{ID: uint64(i), Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{a.mr.SGE(off, chunk)},
			RemoteAddr: b.mr.Addr + uint64(off), RKey: b.mr.RKey}
		postRetry(t, a.conns[i%2], cl, wr)
		cl.poll(t)
	}
	cl.waitAll(t, n)
	for id, wc := range cl.got {
		require.Equal(t, ibv.WCSuccess, wc.Status, "write %d", id)
	}
	require.Equal(t, a.buf, b.buf, "data at the target")
	require.Equal(t, int64(1), a.conns[0].Stats().PathMigrations, "one PATH_MIG on the affected QP")
	require.Equal(t, int64(0), a.conns[1].Stats().PathMigrations)
	require.Equal(t, uint8(2), a.conns[0].Port())
	require.Equal(t, int64(0), a.conns[0].Stats().Recoveries, "APM handled it")
}

// APM off: the rail failure is recovered in software; accumulates and fetch-adds posted while
// it happens are applied exactly once.
func TestSoftwareRecoveryExactlyOnce(t *testing.T) {
	testutil.CheckGoroutines(t)
	o := testOptions()
	o.APM = false
	exactlyOnceStorm(t, o, 2, ConnectOptions{}, nil, func(a, b *node) { require.NoError(t, tcp.SetPortDown(a.dev, 1, true)) })
}

// Responses on rail 1 are lost from some point on (the responder executes, the requester never
// hears): the queue pair fails after its retries, and the recovery completes the executed
// accumulates and fetch-adds from the responder's record instead of applying them again.
func TestLostAcksExactlyOnce(t *testing.T) {
	testutil.CheckGoroutines(t)
	o := testOptions()
	o.APM = false
	var lose atomic.Bool
	drop := func(port uint8, pkt []byte) bool {
		if port != 1 || !lose.Load() {
			return false
		}
		var p wire.Packet
		return wire.Decode(pkt, &p) == nil && !p.Opcode.IsRequest()
	}
	completed := exactlyOnceStorm(t, o, 2, ConnectOptions{}, drop, func(a, b *node) { lose.Store(true) })
	require.Positive(t, completed, "some requests were executed before the fault and completed from the record")
}

// [Vishnu09 §V.B]'s emulation: a wrong destination at QP setup, one rail, APM on but without an
// alternate: every request fails and the software path re-establishes the connection.
func TestWrongDestinationEmulation(t *testing.T) {
	testutil.CheckGoroutines(t)
	exactlyOnceStorm(t, testOptions(), 1, ConnectOptions{PrimaryAddr: "127.0.0.1:9"}, nil, nil)
}

func exactlyOnceStorm(t *testing.T, o Options, rails int, co ConnectOptions, drop func(uint8, []byte) bool,
	fault func(a, b *node)) int64 {
	const accElems, accs, fadds = 2048, 200, 300 // 16 KiB accumulates: 4 packets each
	a, b := newNodeTCP(t, o, rails, 1<<20, drop), newNode(t, o, rails, 1<<20)
	link(t, a, b, rails, co)
	ones := a.buf[:accElems*8]
	for i := 0; i < accElems; i++ {
		binary.LittleEndian.PutUint64(ones[i*8:], 1)
	}
	results := make([]byte, 8*(accs+fadds))
	cl := newCollector(a.ep)
	id := uint64(0)
	for i := 0; i < accs+fadds; i++ {
		if i == (accs+fadds)/3 && fault != nil {
			fault(a, b)
		}
		c := a.conns[i%rails]
		var wr ibv.SendWR
		if i%5 < 2 {
			wr = ibv.SendWR{Opcode: ibv.OpAccumulate, LocalBuf: ones, RemoteAddr: b.mr.Addr + 4096,
				RKey: b.mr.RKey, AccType: ibv.AccInt64, Scale: 1}
		} else {
			k := int(id) // distinct result slot per request
			wr = ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: results[8*k : 8*k+8],
				RemoteAddr: b.mr.Addr, RKey: b.mr.RKey, CompareAdd: 1}
		}
		wr.ID = id
		id++
		postRetry(t, c, cl, &wr)
		cl.poll(t)
	}
	cl.waitAll(t, int(id))
	nacc, nfadd := 0, 0
	for i := uint64(0); i < id; i++ {
		wc := cl.got[i]
		require.Equal(t, ibv.WCSuccess, wc.Status, "request %d: %v", i, CompletionError(&wc))
		if wc.Opcode == ibv.WCFetchAdd {
			nfadd++
		} else {
			nacc++
		}
	}
	// fetch-add values: 0..nfadd-1 each once (no gap, no duplicate)
	var vals []uint64
	for i := uint64(0); i < id; i++ {
		if cl.got[i].Opcode == ibv.WCFetchAdd {
			vals = append(vals, binary.LittleEndian.Uint64(results[8*int(i):]))
		}
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for i, v := range vals {
		require.Equal(t, uint64(i), v, "fetch-add results must be gap-free and unique")
	}
	require.Equal(t, uint64(nfadd), binary.LittleEndian.Uint64(b.buf[0:]), "fetch-add total")
	for i := 0; i < accElems; i++ {
		require.Equal(t, uint64(nacc), binary.LittleEndian.Uint64(b.buf[4096+8*i:]), "element %d", i)
	}
	var rec, completed int64
	for _, c := range a.conns {
		rec += c.Stats().Recoveries
		completed += c.Stats().Completed
	}
	require.GreaterOrEqual(t, rec, int64(1), "the software recovery ran")
	t.Logf("accumulates %d, fetch-adds %d, stats %+v", nacc, nfadd, a.conns[0].Stats())
	return completed
}

var _ = fmt.Sprintf
