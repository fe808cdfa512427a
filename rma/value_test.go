package rma_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// TestPutGetValue stores one value of each type into the next rank's part and reads it back from
// every rank (ARMCI_PutValue*/GetValue*), and checks the bytes little-endian at the target.
func TestPutGetValue(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		seg, err := rt.Malloc(ctx, 32)
		require.NoError(t, err)
		me, n := rt.Rank(), rt.Size()
		to := (me + 1) % n
		require.NoError(t, rma.PutValue(ctx, rt, int32(-7-me), seg, to, 0))
		require.NoError(t, rma.PutValue(ctx, rt, int64(1)<<40+int64(me), seg, to, 8))
		require.NoError(t, rma.PutValue(ctx, rt, float32(1.5)+float32(me), seg, to, 16))
		require.NoError(t, rma.PutValue(ctx, rt, math.Pi*float64(me+1), seg, to, 24))
		require.NoError(t, rt.Barrier(ctx))
		from := (me - 1 + n) % n
		loc := seg.Local()
		require.Equal(t, uint32(int32(-7-from)), binary.LittleEndian.Uint32(loc))
		require.Equal(t, uint64(1<<40+from), binary.LittleEndian.Uint64(loc[8:]))
		for p := 0; p < n; p++ {
			src := (p - 1 + n) % n
			i, err := rma.GetValue[int32](ctx, rt, seg, p, 0)
			require.NoError(t, err)
			require.Equal(t, int32(-7-src), i)
			l, err := rma.GetValue[int64](ctx, rt, seg, p, 8)
			require.NoError(t, err)
			require.Equal(t, int64(1)<<40+int64(src), l)
			f, err := rma.GetValue[float32](ctx, rt, seg, p, 16)
			require.NoError(t, err)
			require.Equal(t, float32(1.5)+float32(src), f)
			d, err := rma.GetValue[float64](ctx, rt, seg, p, 24)
			require.NoError(t, err)
			require.Equal(t, math.Pi*float64(src+1), d)
		}
		_, err = rma.GetValue[float64](ctx, rt, seg, to, 28)
		require.True(t, errors.Is(err, rma.ErrOutOfRange), "%v", err)
		require.True(t, errors.Is(rma.PutValue(ctx, rt, int64(1), seg, n, 0), rma.ErrBadRank))
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, seg.Free(ctx))
	})
}

// TestTryLock: a free mutex is taken; while it is held every TryLock fails and changes nothing
// (a later Lock/Unlock cycle still works); after Unlock it is free again. Then every rank spins
// on TryLock to increment a counter under the mutex: the count is exact.
func TestTryLock(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		require.NoError(t, rt.CreateMutexes(ctx, 1))
		seg, err := rt.Malloc(ctx, 8)
		require.NoError(t, err)
		me, owner := rt.Rank(), rt.Size()-1 // the mutex lives on the last rank
		if me == 0 {
			ok, err := rt.TryLock(ctx, 0, owner)
			require.NoError(t, err)
			require.True(t, ok, "a free mutex")
		}
		require.NoError(t, rt.Barrier(ctx))
		if me != 0 {
			for i := 0; i < 5; i++ {
				ok, err := rt.TryLock(ctx, 0, owner)
				require.NoError(t, err)
				require.False(t, ok, "a held mutex")
			}
		}
		require.NoError(t, rt.Barrier(ctx))
		if me == 0 {
			require.NoError(t, rt.Unlock(ctx, 0, owner))
		}
		require.NoError(t, rt.Barrier(ctx))
		const rounds = 20
		buf := make([]byte, 8)
		for i := 0; i < rounds; i++ {
			for {
				ok, err := rt.TryLock(ctx, 0, owner)
				require.NoError(t, err)
				if ok {
					break
				}
			}
			require.NoError(t, rt.Get(ctx, seg, 0, 0, buf))
			binary.LittleEndian.PutUint64(buf, binary.LittleEndian.Uint64(buf)+1)
			require.NoError(t, rt.Put(ctx, buf, seg, 0, 0))
			require.NoError(t, rt.Unlock(ctx, 0, owner))
		}
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, rt.Lock(ctx, 0, owner)) // the ticket queue is consistent after all that
		require.NoError(t, rt.Get(ctx, seg, 0, 0, buf))
		require.NoError(t, rt.Unlock(ctx, 0, owner))
		require.Equal(t, uint64(rounds*rt.Size()), binary.LittleEndian.Uint64(buf))
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, seg.Free(ctx))
		require.NoError(t, rt.DestroyMutexes(ctx))
	})
}

// TestTransferDirections: Transfer moves the same bytes as PutS/GetS/AccS (and Put for a
// contiguous descriptor), and refuses an unknown direction.
func TestTransferDirections(t *testing.T) {
	transports(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		seg, err := rt.Malloc(ctx, 64)
		require.NoError(t, err)
		peer := 1 - rt.Rank()
		one := make([]byte, 8)
		binary.LittleEndian.PutUint64(one, math.Float64bits(1))
		src := append(append(append([]byte{}, one...), one...), one...) // three float64 1.0
		if rt.Rank() == 0 {
			// rows of 8 bytes at remote stride 16: bytes 0, 16, 32
			_, err := rt.Transfer(ctx, rma.DirPut, 0, 0, src, []int{8}, seg, peer, 0, []int{16}, []int{8, 3}, true)
			require.NoError(t, err)
			h, err := rt.Transfer(ctx, rma.DirAcc, rma.AccFloat64, 2, src, []int{8}, seg, peer, 0, []int{16}, []int{8, 3}, false)
			require.NoError(t, err)
			require.NoError(t, h.Wait(ctx))
			_, err = rt.Transfer(ctx, rma.DirPut, 0, 0, one, nil, seg, peer, 56, nil, []int{8}, true)
			require.NoError(t, err)
			require.NoError(t, rt.Fence(ctx, peer))
			got := make([]byte, 24)
			_, err = rt.Transfer(ctx, rma.DirGet, 0, 0, got, []int{8}, seg, peer, 0, []int{16}, []int{8, 3}, true)
			require.NoError(t, err)
			for i := 0; i < 3; i++ {
				require.Equal(t, 3.0, math.Float64frombits(binary.LittleEndian.Uint64(got[8*i:])))
			}
			_, err = rt.Transfer(ctx, rma.Dir(9), 0, 0, one, nil, seg, peer, 0, nil, []int{8}, true)
			require.True(t, errors.Is(err, rma.ErrBadOp), "%v", err)
		}
		require.NoError(t, rt.Barrier(ctx))
		if rt.Rank() == 1 {
			require.Equal(t, 1.0, math.Float64frombits(binary.LittleEndian.Uint64(seg.Local()[56:])))
			require.Zero(t, binary.LittleEndian.Uint64(seg.Local()[8:]), "a gap of the stride stays untouched")
		}
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, seg.Free(ctx))
	})
}

// TestCollectivesBackToBack runs many AllReduce and Broadcast calls in a row, each rank's values
// changing every call, so a rank that wrote a call's scratch slot before another had read the
// previous one (the two sets of slots alternate between calls) would show as a wrong sum.
func TestCollectivesBackToBack(t *testing.T) {
	transports(t, 4, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me, n := rt.Rank(), rt.Size()
		b := make([]byte, 16)
		for k := 0; k < 150; k++ {
			binary.LittleEndian.PutUint64(b, uint64(k*1000+me))
			binary.LittleEndian.PutUint64(b[8:], uint64(me*k))
			require.NoError(t, rt.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, b))
			require.Equal(t, uint64(n*k*1000+n*(n-1)/2), binary.LittleEndian.Uint64(b), "call %d", k)
			require.Equal(t, uint64(k*n*(n-1)/2), binary.LittleEndian.Uint64(b[8:]), "call %d", k)
			if k%3 == 0 {
				msg := make([]byte, 8)
				if me == k%n {
					binary.LittleEndian.PutUint64(msg, uint64(k))
				}
				require.NoError(t, rt.Broadcast(ctx, k%n, msg))
				require.Equal(t, uint64(k), binary.LittleEndian.Uint64(msg), "broadcast %d", k)
			}
		}
	})
}

// TestBadRailIsAnErrorOnOneNode: a rail that names neither an address nor an interface fails
// Init with ErrConfig even when every rank shares one node (no network device is opened).
func TestBadRailIsAnErrorOnOneNode(t *testing.T) {
	g := rmatest.NewGroup(1)
	defer g.Close()
	_, err := rma.Init(context.Background(), &rma.Config{Bootstrap: g.Member(0), Transport: rma.TransportShm,
		Rails: []string{"no-such-interface0"}, HostID: "one", Job: "badrail"})
	require.True(t, errors.Is(err, rma.ErrConfig), "%v", err)
}

// TestNotify: in rounds, every rank puts a round-stamped block into the next rank's part and
// notifies it; each rank waits for its predecessor's notify and must then see that round's data
// (armci_notify / armci_notify_wait). The counts returned grow by one per round.
func TestNotify(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		const size = 4096
		seg, err := rt.Malloc(ctx, size)
		require.NoError(t, err)
		me, n := rt.Rank(), rt.Size()
		next, prev := (me+1)%n, (me-1+n)%n
		sentTo, heardFrom := map[int]int64{}, map[int]int64{} // the counts each call must return
		notify := func(p int) {
			sentTo[p]++
			c, err := rt.Notify(ctx, p)
			require.NoError(t, err)
			require.Equal(t, sentTo[p], c, "notifies sent to rank %d", p)
		}
		wait := func(p int) {
			heardFrom[p]++
			c, err := rt.NotifyWait(ctx, p)
			require.NoError(t, err)
			require.Equal(t, heardFrom[p], c, "notifies waited for from rank %d", p)
		}
		for round := 1; round <= 20; round++ {
			// the predecessor writes my part only after I said I had read the last round
			if round > 1 {
				notify(prev)
				wait(next)
			}
			require.NoError(t, rt.Put(ctx, pattern(round*10+me, size), seg, next, 0))
			notify(next)
			wait(prev)
			require.Equal(t, pattern(round*10+prev, size), seg.Local(), "round %d", round)
		}
		_, err = rt.Notify(ctx, n)
		require.True(t, errors.Is(err, rma.ErrBadRank))
		_, err = rt.NotifyWait(ctx, -1)
		require.True(t, errors.Is(err, rma.ErrBadRank))
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, seg.Free(ctx))
	})
}

// TestStatsExactCounts: after a known pattern of operations from rank 0 to rank 1 (and to
// itself), Stats holds exactly its operation and byte counts; the barriers in between (the
// runtime's own segment) are not counted. Without Config.Stats, Stats is nil.
func TestStatsExactCounts(t *testing.T) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		t.Run(string(tr), func(t *testing.T) {
			rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				seg, err := rt.Malloc(ctx, 1024)
				require.NoError(t, err)
				require.NoError(t, rt.Barrier(ctx))
				if rt.Rank() == 0 {
					buf := make([]byte, 256)
					for i := 0; i < 3; i++ {
						require.NoError(t, rt.Put(ctx, buf[:100], seg, 1, 0))
					}
					require.NoError(t, rt.PutS(ctx, buf, []int{8}, seg, 1, 0, []int{16}, []int{8, 3}))
					require.NoError(t, rt.PutV(ctx, []rma.Vec{{Local: buf[:5], Off: 0}, {Local: buf[:7], Off: 64}}, seg, 1))
					h, err := rt.NbGet(ctx, seg, 1, 0, buf[:50])
					require.NoError(t, err)
					require.NoError(t, h.Wait(ctx))
					require.NoError(t, rt.Get(ctx, seg, 1, 0, buf[:50]))
					require.NoError(t, rt.Acc(ctx, rma.AccFloat64, 1, buf[:16], seg, 1, 0))
					for i := 0; i < 4; i++ {
						_, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 1, 8, 1)
						require.NoError(t, err)
					}
					require.NoError(t, rt.Put(ctx, buf[:10], seg, 0, 0)) // to itself
					require.Error(t, rt.Put(ctx, buf, seg, 1, 1000))     // refused: not counted
				}
				require.NoError(t, rt.Barrier(ctx))
				st := rt.Stats()
				if rt.Rank() == 1 {
					for _, p := range st { // rails may count the barriers' work requests over tcp
						require.Zero(t, p.Puts+p.Gets+p.Accs+p.Atomics+p.BytesIn+p.BytesOut, "rank 1 issued nothing but barriers: %+v", p)
					}
				} else {
					require.Len(t, st, 2, "%+v", st)
					self, peer := st[0], st[1]
					require.Equal(t, rma.PeerStats{Rank: 0, Transport: "self", Puts: 1, BytesOut: 10}, self)
					require.Equal(t, 1, peer.Rank)
					require.Equal(t, string(tr), peer.Transport)
					require.EqualValues(t, 5, peer.Puts)
					require.EqualValues(t, 2, peer.Gets)
					require.EqualValues(t, 1, peer.Accs)
					require.EqualValues(t, 4, peer.Atomics)
					require.EqualValues(t, 300+24+12+16, peer.BytesOut)
					require.EqualValues(t, 100, peer.BytesIn)
					if tr == rma.TransportTCP {
						require.Len(t, peer.Rails, 1)
						require.Positive(t, peer.Rails[0].Posted)
					} else {
						require.Empty(t, peer.Rails, "a node peer has no channel")
					}
					if tr == rma.TransportTCP {
						require.Positive(t, peer.WaitSeconds, "blocking Gets waited for their responses")
					}
					// the record printed at Finalize: the same counts as JSON, and as lines
					var js bytes.Buffer
					rt.WriteStats(&js, true)
					line, ok := strings.CutPrefix(strings.TrimSpace(js.String()), "goarmci stats ")
					require.True(t, ok, js.String())
					var rec struct {
						Rank, Size      int
						SyncWaitSeconds float64 `json:"sync_wait_seconds"`
						Peers           []rma.PeerStats
						Memory          rma.MemoryStats
					}
					require.NoError(t, json.Unmarshal([]byte(line), &rec))
					require.Equal(t, 0, rec.Rank)
					require.Equal(t, 2, rec.Size)
					require.Positive(t, rec.SyncWaitSeconds, "barriers")
					require.Equal(t, st, rec.Peers)
					checkMemory(t, rec.Memory, tr)
					var txt bytes.Buffer
					rt.WriteStats(&txt, false)
					require.Contains(t, txt.String(), "goarmci stats: rank 0 of 2")
					require.Contains(t, txt.String(), fmt.Sprintf("to rank 1 (%s): 5 puts, 2 gets, 1 accs, 4 atomics, 352 out, 100 in", tr))
					require.Contains(t, txt.String(), "memory of the communication objects: "+rma.MemorySize(rec.Memory.Total))
					require.Contains(t, txt.String(), fmt.Sprintf("to rank 1 (%s): 1 queue pairs, %s", rec.Memory.Peers[0].Kind,
						rma.MemorySize(rec.Memory.Peers[0].Bytes)))
				}
				require.NoError(t, seg.Free(ctx))
			}, rmatest.Transport(tr), rmatest.Configure(func(_ int, c *rma.Config) { c.Stats = true }))
		})
	}
	rmatest.Run(t, 1, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		require.Nil(t, rt.Stats(), "statistics off")
	})
}
