package hybridft

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
)

// Failover scenarios on the in-process fabric (ibv/fabric) under testing/synctest: ACK
// timeouts, retries, the connection manager's resend timers, APM probes and partition timeouts
// all run on virtual time, so the faults land exactly where the seeded plan puts them and no test
// sleeps for real. Every scenario runs with each seed of fabSeeds; the seed drives the fabric's
// background loss and latency and where the fault hits. Fabric, devices, managers and
// connections live inside the bubble and are closed before it ends (synctest fails on a leaked
// goroutine).

var fabSeeds = []uint64{1, 2, 3, 0x5eed, 0xdecafbad}

// fabNode is one pretend process on a fabric node: a Manager whose UD connection manager runs
// on the node's device, an endpoint and a memory region.
type fabNode struct {
	idx   int
	m     *Manager
	dev   *ibv.Context
	ep    *Endpoint
	mr    *ibv.MR
	buf   []byte
	conns []*Conn
	logs  eventLog // failover and recovery events of its connections (ConnectOptions.Log)
}

// eventLog collects log lines written from several goroutines.
type eventLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *eventLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// events returns the decoded log events whose message contains msg.
func (l *eventLog) events(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(l.b.Bytes()), []byte("\n")) {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(line, &ev), "log line %q", line)
		if m, _ := ev["message"].(string); strings.Contains(m, msg) {
			out = append(out, ev)
		}
	}
	return out
}

type fabNet struct {
	f    *fabric.Fabric
	a, b *fabNode
}

// noise is the background of every scenario: 0.2% loss and 10-100 µs latency per link.
func noise(seed uint64, rails int) fabric.Plan {
	p := fabric.Plan{Seed: seed}
	p.Noise(2, uint8(rails), 0.002, fabric.Range{Min: 10 * time.Microsecond, Max: 100 * time.Microsecond})
	return p
}

// newFabNet builds two nodes with rails ports each and one connection per rail between them
// (rail r: port r to port r). Call it inside the bubble.
func newFabNet(t *testing.T, o Options, rails, size int, plan fabric.Plan) *fabNet {
	t.Helper()
	f, err := fabric.New(fabric.Config{Name: "ft", Nodes: 2, Ports: rails, Plan: plan})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	mk := func(i int) *fabNode {
		dev, err := f.Open(i)
		require.NoError(t, err)
		oo := o
		oo.CMDevice = dev
		m, err := NewManager(oo)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, m.Close()) })
		ep, err := m.NewEndpoint(dev, 1, 1<<16)
		require.NoError(t, err)
		n := &fabNode{idx: i, m: m, dev: dev, ep: ep, buf: make([]byte, size)}
		n.mr, err = ep.PD.RegMR(n.buf, ibv.AccessAll)
		require.NoError(t, err)
		return n
	}
	nw := &fabNet{f: f, a: mk(0), b: mk(1)}
	for r := 1; r <= rails; r++ {
		ca, err := nw.a.ep.WithPort(uint8(r)).NewConn()
		require.NoError(t, err)
		cb, err := nw.b.ep.WithPort(uint8(r)).NewConn()
		require.NoError(t, err)
		la := zerolog.New(&nw.a.logs).With().Int("peer", 1).Int("rail", r-1).Logger()
		lb := zerolog.New(&nw.b.logs).With().Int("peer", 0).Int("rail", r-1).Logger()
		require.NoError(t, ca.ConnectWith(cb.Local(), ConnectOptions{Log: &la}))
		require.NoError(t, cb.ConnectWith(ca.Local(), ConnectOptions{Log: &lb}))
		nw.a.conns, nw.b.conns = append(nw.a.conns, ca), append(nw.b.conns, cb)
		t.Cleanup(func() { _ = ca.Close(); _ = cb.Close() })
	}
	return nw
}

// armed waits (virtual time) until every connection's queue pair has its alternate loaded.
func (nw *fabNet) armed(t *testing.T) {
	t.Helper()
	for _, c := range append(append([]*Conn(nil), nw.a.conns...), nw.b.conns...) {
		for i := 0; c.QP().Query().PathMigState != ibv.Armed; i++ {
			require.Less(t, i, 10000, "alternate path of qp %d not armed", c.QP().Num())
			time.Sleep(time.Millisecond)
		}
	}
}

// write posts write i of chunk bytes from a's buffer to the same offset at b, on connection
// i mod the rails.
func (nw *fabNet) write(t *testing.T, cl *collector, i, chunk int) {
	t.Helper()
	a, b := nw.a, nw.b
	off := (i * chunk) % (len(a.buf) - chunk + 1)
	postRetry(t, a.conns[i%len(a.conns)], cl, &ibv.SendWR{ID: uint64(i), Opcode: ibv.OpRDMAWrite,
		SGL: []ibv.SGE{a.mr.SGE(off, chunk)}, RemoteAddr: b.mr.Addr + uint64(off), RKey: b.mr.RKey})
	cl.poll(t)
}

func requireAllOK(t *testing.T, cl *collector) {
	t.Helper()
	for id, wc := range cl.got {
		require.Equal(t, ibv.WCSuccess, wc.Status, "work request %d: %v", id, CompletionError(&wc))
	}
}

func forSeeds(t *testing.T, fn func(t *testing.T, seed uint64)) {
	for _, seed := range fabSeeds {
		t.Run(fmt.Sprintf("seed=%#x", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { fn(t, seed) })
		})
	}
}

// (a) The primary rail of one connection goes down in the middle of a stream of writes striped
// over two rails: APM migrates that queue pair (exactly one PATH_MIG), the other is untouched,
// no software recovery runs, and the target's checksum equals the origin's.
func TestFabricAPMRailDown(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		const size, chunk = 4 << 20, 32 << 10
		nw := newFabNet(t, testOptions(), 2, size, noise(seed, 2))
		a, b := nw.a, nw.b
		nw.armed(t)
		for i := range a.buf {
			a.buf[i] = byte(i*7 + i>>12 + int(seed))
		}
		n := size / chunk
		at := n/4 + rand.New(rand.NewPCG(seed, 0xa)).IntN(n/2) // where the cable is pulled
		cl := newCollector(a.ep)
		for i := 0; i < n; i++ {
			if i == at {
				require.NoError(t, nw.f.SetPortDown(a.idx, 1, true))
			}
			nw.write(t, cl, i, chunk)
		}
		cl.waitAll(t, n)
		requireAllOK(t, cl)
		require.Equal(t, crc32.ChecksumIEEE(a.buf), crc32.ChecksumIEEE(b.buf), "checksum at the target")
		require.True(t, bytes.Equal(a.buf, b.buf))
		require.Equal(t, int64(1), a.conns[0].Stats().PathMigrations, "one PATH_MIG on the affected QP")
		require.Equal(t, int64(0), a.conns[1].Stats().PathMigrations, "the other rail's QP")
		// the responder's end migrated at the first request from its alternate path
		synctest.Wait()
		require.Equal(t, int64(1), b.conns[0].Stats().PathMigrations, "one PATH_MIG at the responder's end")
		require.Equal(t, int64(0), b.conns[1].Stats().PathMigrations)
		require.Equal(t, uint8(2), b.conns[0].Port())
		require.Equal(t, uint8(2), a.conns[0].Port())
		require.Equal(t, uint8(2), a.conns[0].QP().Query().AV.PortNum)
		for _, c := range a.conns {
			require.Equal(t, int64(0), c.Stats().Recoveries, "APM handled it")
		}
		// the migration is an info event naming the peer, the rail and the queue pair
		mig := a.logs.events(t, "path migrated")
		require.Len(t, mig, 1)
		require.Equal(t, "info", mig[0]["level"])
		require.Equal(t, float64(1), mig[0]["peer"])
		require.Equal(t, float64(0), mig[0]["rail"])
		require.Equal(t, float64(a.conns[0].QP().Num()), mig[0]["qpn"])
		require.Equal(t, float64(1), mig[0]["from_port"])
		require.Equal(t, float64(2), mig[0]["port"])
		require.Empty(t, a.logs.events(t, "recovery"))
	})
}

// (b) The primary rail goes down and the armed alternate is down too (a fault inside rail 2,
// both ways, for a seeded 100-300 ms): APM migrates onto a dead path, the queue pairs fail and
// the software recovery re-establishes them once rail 2 works again. A storm of accumulates and
// fetch-and-adds posted across the fault is applied exactly once: the fetch-and-add results are
// 0..n-1 without gap or duplicate and every accumulated element equals the number of
// accumulates.
func TestFabricAlternateDownExactlyOnce(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		nw := newFabNet(t, testOptions(), 2, 1<<20, noise(seed, 2))
		nw.armed(t)
		rng := rand.New(rand.NewPCG(seed, 0xb))
		at := 100 + rng.IntN(200)
		outage := time.Duration(100+rng.IntN(200)) * time.Millisecond
		nw.storm(t, 150, 250, at, func() {
			now := nw.f.Now()
			require.NoError(t, nw.f.Apply(fabric.Plan{Rules: []fabric.Rule{
				{Src: []int{0}, Dst: []int{1}, Port: 2, Down: true, Until: now + outage},
				{Src: []int{1}, Dst: []int{0}, Port: 2, Down: true, Until: now + outage}}}))
			require.NoError(t, nw.f.SetPortDown(nw.a.idx, 1, true))
		})
		a := nw.a
		st := a.conns[0].Stats()
		require.GreaterOrEqual(t, st.Recoveries, int64(1), "software recovery of the rail-1 connection")
		require.Positive(t, st.Reposted+st.Completed+a.conns[1].Stats().Reposted+a.conns[1].Stats().Completed,
			"failed requests were re-issued or completed from the responder's record")
		require.Equal(t, uint8(2), a.conns[0].Port(), "rail 1 is still down")
		// the recovery is told at info level, start and end, with the peer and the rail
		for _, msg := range []string{"software recovery starts", "re-established"} {
			evs := a.logs.events(t, msg)
			require.NotEmpty(t, evs, msg)
			for _, ev := range evs {
				require.Equal(t, "info", ev["level"])
				require.Equal(t, float64(1), ev["peer"])
				require.Contains(t, []any{float64(0), float64(1)}, ev["rail"])
			}
		}
	})
}

// (c) Rail 1 of the origin flaps 20 times on a seeded schedule (down 20-60 ms, up 80-200 ms)
// under a steady stream of writes: every write completes once with the right data, the flaps
// happened exactly at their planned virtual times, every flap moved the rail-1 connection away
// and gave it back, and once the rail stays up that connection is on it and carries the
// traffic again.
func TestFabricRailFlaps(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		const size, chunk = 512 << 10, 8 << 10
		plan := noise(seed, 2)
		start := 20 * time.Millisecond
		end := plan.Flaps(0, 1, 20, start, fabric.Range{Min: 20 * time.Millisecond, Max: 60 * time.Millisecond},
			fabric.Range{Min: 80 * time.Millisecond, Max: 200 * time.Millisecond})
		nw := newFabNet(t, testOptions(), 2, size, plan)
		a, b := nw.a, nw.b
		for i := range a.buf {
			a.buf[i] = byte(i ^ i>>9 ^ int(seed))
		}
		cl := newCollector(a.ep)
		n := 0
		for nw.f.Now() < end+50*time.Millisecond {
			// a steady stream that does not wait for completions: each connection gets a write
			// every 4 ms, so every down period (at least 20 ms) finds writes on rail 1
			nw.write(t, cl, n, chunk)
			n++
			time.Sleep(2 * time.Millisecond)
		}
		cl.waitAll(t, n)
		requireAllOK(t, cl)
		require.True(t, bytes.Equal(a.buf, b.buf), "data at the target")
		require.Equal(t, plan.Events, nw.f.PortLog(), "the flaps at their planned virtual times")
		for i := 0; a.conns[0].Port() != 1; i++ {
			require.Less(t, i, 10000, "rail 1 never given back")
			cl.poll(t)
			time.Sleep(time.Millisecond)
		}
		before := nw.f.Stats(0, 1, 1)
		for k := 0; k < 64; k++ {
			nw.write(t, cl, n, chunk)
			n++
		}
		cl.waitAll(t, n)
		requireAllOK(t, cl)
		after := nw.f.Stats(0, 1, 1)
		require.GreaterOrEqual(t, after.Delivered-before.Delivered, uint64(32*chunk/4096), "rail 1 carries traffic again")
		require.Equal(t, uint8(1), a.conns[0].Port(), "no fault: it stays on its home rail")
		require.Equal(t, uint8(1), a.conns[0].QP().Query().AV.PortNum)
		st := a.conns[0].Stats()
		require.GreaterOrEqual(t, st.PathMigrations+st.Recoveries, int64(20), "every flap moved the connection")
		require.Equal(t, int64(20), st.GiveBacks, "rail 1 given back after every flap")
		t.Logf("seed %#x: %d writes, stats %+v", seed, n, st)
	})
}

// (d) A partition between the two nodes (all paths, both ways, no port event): shorter than
// the partition timeout, the blocked writes complete once it heals; longer, they fail with
// ErrPartition at the virtual partition timeout, and later posts are refused with it.
func TestFabricPartition(t *testing.T) {
	t.Run("short", func(t *testing.T) {
		forSeeds(t, func(t *testing.T, seed uint64) {
			o := testOptions()
			o.PartitionTimeout = 2 * time.Second
			nw := newFabNet(t, o, 2, 1<<20, noise(seed, 2))
			a, b := nw.a, nw.b
			for i := range a.buf {
				a.buf[i] = byte(i*3 + int(seed))
			}
			until := nw.f.Now() + time.Duration(200+rand.New(rand.NewPCG(seed, 0xd)).IntN(400))*time.Millisecond
			var p fabric.Plan
			p.Partition([]int{0}, []int{1}, 0, until)
			require.NoError(t, nw.f.Apply(p))
			cl := newCollector(a.ep)
			for i := 0; i < 16; i++ {
				nw.write(t, cl, i, 8<<10)
			}
			time.Sleep(until - nw.f.Now() - time.Millisecond)
			cl.poll(t)
			require.Empty(t, cl.got, "nothing completes while partitioned")
			cl.waitAll(t, 16)
			require.GreaterOrEqual(t, nw.f.Now(), until)
			requireAllOK(t, cl)
			require.True(t, bytes.Equal(a.buf[:16*(8<<10)], b.buf[:16*(8<<10)]))
			for _, c := range a.conns {
				require.NoError(t, c.Err())
			}
		})
	})
	t.Run("long", func(t *testing.T) {
		forSeeds(t, func(t *testing.T, seed uint64) {
			o := testOptions()
			o.PartitionTimeout = 300 * time.Millisecond
			requirePermanentPartition(t, o, seed, o.PartitionTimeout, time.Second)
		})
	})
}

// requirePermanentPartition cuts the two nodes of a fresh network with options o apart for good
// and checks that 8 writes all fail with ErrPartition after timeout (plus at most slack of
// detection), that every connection then holds ErrPartition and refuses later posts with it.
func requirePermanentPartition(t *testing.T, o Options, seed uint64, timeout, slack time.Duration) {
	t.Helper()
	nw := newFabNet(t, o, 2, 1<<20, noise(seed, 2))
	a, b := nw.a, nw.b
	var p fabric.Plan
	p.Partition([]int{0}, []int{1}, nw.f.Now(), 0)
	require.NoError(t, nw.f.Apply(p))
	start := nw.f.Now()
	cl := newCollector(a.ep)
	for i := 0; i < 8; i++ {
		nw.write(t, cl, i, 4<<10)
	}
	cl.waitAll(t, 8)
	took := nw.f.Now() - start
	for id, wc := range cl.got {
		require.ErrorIs(t, CompletionError(&wc), ErrPartition, "write %d", id)
	}
	// detection (retries on both paths) plus the partition timeout
	require.GreaterOrEqual(t, took, timeout)
	require.Less(t, took, timeout+slack)
	for _, c := range a.conns {
		require.ErrorIs(t, c.Err(), ErrPartition)
		require.ErrorIs(t, c.Post(&ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: a.buf[:8], RemoteAddr: b.mr.Addr,
			RKey: b.mr.RKey}), ErrPartition)
	}
}

// storm posts accs accumulates (16 KiB of int64 ones) and fadds fetch-and-adds from a to b over
// a's connections, calls fault before request at, waits for every completion and checks that
// each was applied exactly once.
func (nw *fabNet) storm(t *testing.T, accs, fadds, at int, fault func()) {
	t.Helper()
	const accElems = 2048
	a, b := nw.a, nw.b
	ones := a.buf[:accElems*8]
	for i := 0; i < accElems; i++ {
		binary.LittleEndian.PutUint64(ones[i*8:], 1)
	}
	results := make([]byte, 8*(accs+fadds))
	resMR, err := a.ep.PD.RegMR(results, ibv.AccessLocalWrite)
	require.NoError(t, err)
	cl := newCollector(a.ep)
	for i := 0; i < accs+fadds; i++ {
		if i == at && fault != nil {
			fault()
		}
		var wr ibv.SendWR
		if i%5 < 2 {
			wr = ibv.SendWR{Opcode: ibv.OpAccumulate, LocalBuf: ones, RemoteAddr: b.mr.Addr + 4096,
				RKey: b.mr.RKey, AccType: ibv.AccInt64, Scale: 1}
		} else {
			wr = ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, SGL: []ibv.SGE{resMR.SGE(8*i, 8)},
				RemoteAddr: b.mr.Addr, RKey: b.mr.RKey, CompareAdd: 1}
		}
		wr.ID = uint64(i)
		postRetry(t, a.conns[i%len(a.conns)], cl, &wr)
		cl.poll(t)
	}
	cl.waitAll(t, accs+fadds)
	requireAllOK(t, cl)
	var vals []uint64
	nacc := 0
	for i := 0; i < accs+fadds; i++ {
		if cl.got[uint64(i)].Opcode == ibv.WCFetchAdd {
			vals = append(vals, binary.LittleEndian.Uint64(results[8*i:]))
		} else {
			nacc++
		}
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for i, v := range vals {
		require.Equal(t, uint64(i), v, "fetch-add results must be gap-free and unique")
	}
	require.Equal(t, uint64(len(vals)), binary.LittleEndian.Uint64(b.buf[0:]), "fetch-add total")
	for i := 0; i < accElems; i++ {
		require.Equal(t, uint64(nacc), binary.LittleEndian.Uint64(b.buf[4096+8*i:]), "element %d", i)
	}
}

// Rail 1 breaks one way only (responses from the target are lost, requests still arrive and
// are executed): the queue pair fails after its retries with executed requests unacknowledged;
// the software recovery completes them from the responder's record and re-issues the rest, each
// exactly once.
func TestFabricOneWayFaultExactlyOnce(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		o := testOptions()
		o.APM = false
		nw := newFabNet(t, o, 2, 1<<20, noise(seed, 2))
		at := 100 + rand.New(rand.NewPCG(seed, 0xe)).IntN(200)
		nw.storm(t, 150, 250, at, func() {
			require.NoError(t, nw.f.Apply(fabric.Plan{Rules: []fabric.Rule{{Src: []int{1}, Dst: []int{0}, Port: 1, Down: true}}}))
		})
		st := nw.a.conns[0].Stats()
		require.GreaterOrEqual(t, st.Recoveries, int64(1))
		// Without APM the home rail is given back while its port is up (the fault is one-way,
		// the port never goes down): the storm may end on rail 1 during such a probe, which
		// fails again later; without a give-back the connection must have left rail 1.
		if st.GiveBacks == 0 {
			require.Equal(t, uint8(2), nw.a.conns[0].Port())
		}
	})
}

// A latency spike far beyond the ACK timeout (but shorter than the retries) on rail 1: the
// requester retransmits while the originals are still on their way; the responder must
// acknowledge the duplicates without applying them again.
func TestFabricDelaySpikeExactlyOnce(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		nw := newFabNet(t, testOptions(), 2, 1<<20, noise(seed, 2))
		nw.armed(t)
		at := 100 + rand.New(rand.NewPCG(seed, 0xf)).IntN(200)
		nw.storm(t, 150, 250, at, func() {
			now := nw.f.Now()
			require.NoError(t, nw.f.Apply(fabric.Plan{Rules: []fabric.Rule{{Port: 1, Delay: 25 * time.Millisecond,
				From: now, Until: now + 100*time.Millisecond}}}))
		})
	})
}
