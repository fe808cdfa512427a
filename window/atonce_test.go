package window

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// TestAtOnceOrdering mixes operations that run at issue (one element, or a small Put/Get, to a
// same-node rank with nothing queued for it) with queued ones (arrays) to the same target in one
// epoch, in every atomicity domain, under shared and exclusive locks and in a fence epoch: the
// accumulates apply in program order with exact results, and an operation behind a queued one
// waits in the queue with it. Over tcp nothing runs at issue; the values are the same.
func TestAtOnceOrdering(t *testing.T) {
	for _, d := range domains {
		t.Run(d.name, func(t *testing.T) {
			each(t, []int{2}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				me, tg := rt.Rank(), 1
				w, err := Allocate(ctx, rt, 128, 4, d.opts...) // displacements in 4-byte units
				require.NoError(t, err)
				direct := rt.TransportTo(tg) == "shm" || me == tg
				require.Equal(t, direct, w.tgt[tg].direct)
				epochs := []string{"shared", "exclusive", "fence"}
				for _, ep := range epochs {
					if ep == "fence" {
						require.NoError(t, w.Fence(ctx, 0))
					}
					if me == 0 {
						open := func() {
							switch ep {
							case "shared":
								require.NoError(t, w.Lock(ctx, LockShared, tg, 0))
							case "exclusive":
								require.NoError(t, w.Lock(ctx, LockExclusive, tg, 0))
							}
						}
						flush := func() {
							if ep == "fence" {
								require.NoError(t, w.Fence(ctx, 0))
							} else {
								require.NoError(t, w.Flush(ctx, tg))
							}
						}
						open()
						// words 0,1 (bytes 0..15): int64; byte 16: int32; byte 24: float64
						require.NoError(t, w.Put(ctx, make([]byte, 32), tg, 0))
						flush()
						arr := append(i64(10), i64(20)...)
						require.NoError(t, w.Accumulate(ctx, arr, Int64, tg, 0, OpSum)) // queued (array)
						res := make([]byte, 8)
						require.NoError(t, w.FetchAndOp(ctx, i64(1), res, Int64, tg, 0, OpSum)) // behind it
						if direct {
							require.Equal(t, 2, w.tgt[tg].queued, "the one-element op waits behind the queued array")
						}
						flush()
						require.Equal(t, int64(10), geti64(res, 0))
						require.Zero(t, w.tgt[tg].queued)

						// at issue (shm): results are there before any flush
						require.NoError(t, w.FetchAndOp(ctx, i64(5), res, Int64, tg, 0, OpSum))
						if direct {
							require.Empty(t, w.q, "one element to a same-node rank runs at issue")
							require.Equal(t, int64(11), geti64(res, 0))
						}
						require.NoError(t, w.Accumulate(ctx, i64(100), Int64, tg, 2, OpMax))
						require.NoError(t, w.Accumulate(ctx, i64(7), Int64, tg, 2, OpMin))
						res32 := make([]byte, 4)
						require.NoError(t, w.FetchAndOp(ctx, le.AppendUint32(nil, 3), res32, Int32, tg, 4, OpSum))
						require.NoError(t, w.FetchAndOp(ctx, le.AppendUint32(nil, math.MaxUint32), res32, Int32, tg, 4, OpReplace)) // -1
						f := func(v float64) []byte { return le.AppendUint64(nil, math.Float64bits(v)) }
						resF := make([]byte, 8)
						require.NoError(t, w.Accumulate(ctx, f(1.5), Float64, tg, 6, OpSum))
						require.NoError(t, w.FetchAndOp(ctx, f(4), resF, Float64, tg, 6, OpProd))
						require.NoError(t, w.Accumulate(ctx, f(2.25), Float64, tg, 6, OpReplace))
						flush()
						require.Equal(t, int32(3), int32(le.Uint32(res32)))
						require.Equal(t, 1.5, math.Float64frombits(le.Uint64(resF)))

						// a queued array, then one element, a CAS and a NO_OP behind it: program order
						all := make([]byte, 32)
						require.NoError(t, w.GetAccumulate(ctx, nil, all, Int64, tg, 0, OpNoOp))
						require.NoError(t, w.FetchAndOp(ctx, i64(1), res, Int64, tg, 0, OpSum))
						cas := make([]byte, 8)
						require.NoError(t, w.CompareAndSwap(ctx, i64(42), i64(17), cas, Int64, tg, 0))
						last := make([]byte, 8)
						require.NoError(t, w.FetchAndOp(ctx, nil, last, Int64, tg, 0, OpNoOp))
						flush()
						require.Equal(t, int64(16), geti64(all, 0))
						require.Equal(t, int64(7), geti64(all, 1))
						require.Equal(t, int64(-1), int64(int32(le.Uint32(all[16:]))))
						require.Equal(t, 2.25, math.Float64frombits(le.Uint64(all[24:])))
						require.Equal(t, int64(16), geti64(res, 0))
						require.Equal(t, int64(17), geti64(cas, 0))
						require.Equal(t, int64(42), geti64(last, 0))

						// a small Put and Get (at issue on shm), then a one-element op
						require.NoError(t, w.Put(ctx, i64(1000), tg, 0))
						flush()
						got := make([]byte, 8)
						require.NoError(t, w.Get(ctx, got, tg, 0))
						flush()
						require.Equal(t, int64(1000), geti64(got, 0))
						require.NoError(t, w.CompareAndSwap(ctx, i64(1), i64(1000), cas, Int64, tg, 0))
						flush()
						require.Equal(t, int64(1000), geti64(cas, 0))
						if ep != "fence" {
							require.NoError(t, w.Unlock(ctx, tg))
						}
					} else if ep == "fence" {
						for range 7 { // the origin's fences
							require.NoError(t, w.Fence(ctx, 0))
						}
					}
					if ep == "fence" {
						require.NoError(t, w.Fence(ctx, ModeNoSucceed))
					}
					require.NoError(t, rt.Barrier(ctx))
					if me == tg {
						require.Equal(t, int64(1), geti64(w.Local(), 0), "%s epoch", ep)
						require.Equal(t, int64(7), geti64(w.Local(), 1))
					}
					require.NoError(t, rt.Barrier(ctx))
				}
				require.NoError(t, w.Free(ctx))
			})
		})
	}
}

// TestAtOnceAllocs: the operations that run at issue, and the epochs around them, allocate
// nothing (a FetchAndOp, CompareAndSwap, Accumulate, Put or Get of 8 bytes to a same-node rank,
// integer and floating, with a Flush; a Lock, Put, Unlock epoch), in both atomicity domains.
func TestAtOnceAllocs(t *testing.T) {
	for _, d := range []struct {
		name string
		opts []Option
	}{{"lock", nil}, {"native", []Option{SingleIntrinsic(true)}}} {
		t.Run(d.name, func(t *testing.T) {
			rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				w, err := Allocate(ctx, rt, 64, 8, d.opts...)
				require.NoError(t, err)
				require.NoError(t, rt.Barrier(ctx))
				if rt.Rank() == 0 {
					one, res, cmp := i64(1), make([]byte, 8), make([]byte, 8)
					var ferr error
					check := func(name string, f func() error) {
						allocs := testing.AllocsPerRun(200, func() {
							if err := f(); err != nil && ferr == nil {
								ferr = err
							}
						})
						require.NoError(t, ferr, name)
						require.Zero(t, allocs, "%s allocates", name)
					}
					require.NoError(t, w.Lock(ctx, LockShared, 1, 0))
					check("FetchAndOp+Flush", func() error {
						if err := w.FetchAndOp(ctx, one, res, Int64, 1, 0, OpSum); err != nil {
							return err
						}
						return w.Flush(ctx, 1)
					})
					check("CompareAndSwap+Flush", func() error {
						if err := w.CompareAndSwap(ctx, one, cmp, res, Int64, 1, 1); err != nil {
							return err
						}
						return w.Flush(ctx, 1)
					})
					check("Accumulate+Flush", func() error {
						if err := w.Accumulate(ctx, one, Int64, 1, 2, OpSum); err != nil {
							return err
						}
						return w.Flush(ctx, 1)
					})
					check("FetchAndOp(Float64 MAX)+Accumulate(Float64 SUM)+Flush", func() error {
						if err := w.FetchAndOp(ctx, one, res, Float64, 1, 5, OpMax); err != nil {
							return err
						}
						if err := w.Accumulate(ctx, one, Float64, 1, 6, OpSum); err != nil {
							return err
						}
						return w.Flush(ctx, 1)
					})
					check("Put+Get+Flush", func() error {
						if err := w.Put(ctx, one, 1, 3); err != nil {
							return err
						}
						if err := w.Get(ctx, res, 1, 4); err != nil {
							return err
						}
						return w.Flush(ctx, 1)
					})
					require.NoError(t, w.Unlock(ctx, 1))
					check("Lock+Put+Unlock", func() error {
						if err := w.Lock(ctx, LockShared, 1, 0); err != nil {
							return err
						}
						if err := w.Put(ctx, one, 1, 3); err != nil {
							return err
						}
						return w.Unlock(ctx, 1)
					})
				}
				require.NoError(t, rt.Barrier(ctx))
				if rt.Rank() == 1 {
					// 201 FetchAndOps of 1 (AllocsPerRun runs f once more to warm up)
					require.Equal(t, int64(201), geti64(w.Local(), 0))
					require.Equal(t, int64(201), geti64(w.Local(), 2))
				}
				require.NoError(t, rt.Barrier(ctx))
				require.NoError(t, w.Free(ctx))
			}, rmatest.Transport(rma.TransportShm), rmatest.Timeout(60*time.Second))
		})
	}
}

// TestSyncAllocs: a fence epoch and a PSCW epoch pair with an 8-byte Put each allocate nothing
// (Start and Post reuse their group lists). Rank 0 counts (AllocsPerRun runs f 1+runs times);
// rank 1 runs the matching calls.
func TestSyncAllocs(t *testing.T) {
	rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		const runs = 100
		me := rt.Rank()
		peer := 1 - me
		g := []int{peer}
		w, err := Allocate(ctx, rt, 64, 8)
		require.NoError(t, err)
		src := i64(int64(me) + 1)
		var ferr error
		keep := func(err error) {
			if err != nil && ferr == nil {
				ferr = err
			}
		}
		fenceEpoch := func() {
			keep(w.Put(ctx, src, peer, me))
			keep(w.Fence(ctx, 0))
		}
		pscw := func() { // rank 0 accesses then exposes, rank 1 the other way round
			access := func() {
				keep(w.Start(ctx, g, 0))
				keep(w.Put(ctx, src, peer, 2+me))
				keep(w.Complete(ctx))
			}
			expose := func() {
				keep(w.Post(ctx, g, 0))
				keep(w.Wait(ctx))
			}
			if me == 0 {
				access()
				expose()
			} else {
				expose()
				access()
			}
		}
		for _, c := range []struct {
			name string
			f    func()
		}{{"fence", fenceEpoch}, {"pscw", pscw}} {
			if c.name == "fence" {
				require.NoError(t, w.Fence(ctx, 0))
			}
			if me == 0 {
				allocs := testing.AllocsPerRun(runs, c.f)
				require.NoError(t, ferr, c.name)
				require.Zero(t, allocs, "%s epoch allocates", c.name)
			} else {
				for range runs + 1 {
					c.f()
				}
				require.NoError(t, ferr, c.name)
			}
			if c.name == "fence" {
				require.NoError(t, w.Fence(ctx, ModeNoSucceed))
			}
			require.NoError(t, rt.Barrier(ctx))
		}
		require.Equal(t, int64(peer)+1, geti64(w.Local(), peer))
		require.Equal(t, int64(peer)+1, geti64(w.Local(), 2+peer))
		require.NoError(t, w.Free(ctx))
	}, rmatest.Transport(rma.TransportShm), rmatest.Timeout(60*time.Second))
}
