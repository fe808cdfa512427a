package rma_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// badOp is one malformed call and the sentinel it must fail with.
type badOp struct {
	name string
	want error
	call func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error
}

// wait turns a non-blocking call's result into one error (a handle must not be returned with an
// error, and the handle of a call that should have failed is waited for, so its bytes land).
func wait(ctx context.Context, h *rma.Handle, err error) error {
	if err != nil {
		if h != nil {
			return fmt.Errorf("handle returned with error %w", err)
		}
		return err
	}
	return h.Wait(ctx)
}

// badOps lists malformed transfers that must each be refused before any byte moves: vector
// accumulates with one element that is not a whole number of elements (its alignment but not its
// size), strided transfers whose extent overflows int, vector elements whose end overflows int
// or lies outside the part, and unknown types.
func badOps() []badOp {
	var ops []badOp
	types := []rma.AccType{rma.AccInt32, rma.AccInt64, rma.AccFloat32, rma.AccFloat64, rma.AccComplex64, rma.AccComplex128}
	for _, typ := range types {
		size := typ.Size()
		bad := size / 2 // complex types: the component size, i.e. aligned but not whole
		vecs := func(local []byte) []rma.Vec {
			return []rma.Vec{{Local: local[:2*size], Off: 0}, {Local: local[64 : 64+bad], Off: 64}}
		}
		ops = append(ops,
			badOp{fmt.Sprintf("AccV %v element of %d bytes", typ, bad), rma.ErrType,
				func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
					return rt.AccV(ctx, typ, 1, vecs(local), seg, to)
				}},
			badOp{fmt.Sprintf("NbAccV %v element of %d bytes", typ, bad), rma.ErrType,
				func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
					return waitFn(ctx)(rt.NbAccV(ctx, typ, 1, vecs(local), seg, to))
				}},
			badOp{fmt.Sprintf("AccS %v count[0] of %d bytes", typ, 3*size+bad), rma.ErrType,
				func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
					return rt.AccS(ctx, typ, 1, local, []int{64}, seg, to, 0, []int{64}, []int{3*size + bad, 2})
				}},
			badOp{fmt.Sprintf("Acc %v of %d bytes", typ, 3*size+bad), rma.ErrType,
				func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
					return rt.Acc(ctx, typ, 1, local[:3*size+bad], seg, to, 0)
				}},
		)
	}
	huge := math.MaxInt/2 + 1 // two strides of it overflow int
	ops = append(ops,
		badOp{"Acc of an unknown type", rma.ErrType, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			return rt.Acc(ctx, rma.AccType(99), 1, local[:64], seg, to, 0)
		}},
		badOp{"PutS with an overflowing remote stride", rma.ErrOutOfRange, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			return rt.PutS(ctx, local, []int{8}, seg, to, 0, []int{huge}, []int{8, 3})
		}},
		badOp{"NbPutS with an overflowing remote stride", rma.ErrOutOfRange, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			return waitFn(ctx)(rt.NbPutS(ctx, local, []int{8}, seg, to, 0, []int{huge}, []int{8, 3}))
		}},
		badOp{"PutS with an overflowing stride at level 2", rma.ErrOutOfRange, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			return rt.PutS(ctx, local, []int{8, 16}, seg, to, 0, []int{8, huge}, []int{8, 2, 3})
		}},
		badOp{"GetS with an overflowing local stride", rma.ErrOutOfRange, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			return rt.GetS(ctx, seg, to, 0, []int{8}, local, []int{huge}, []int{8, 3})
		}},
		badOp{"AccS with an overflowing stride", rma.ErrOutOfRange, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			return rt.AccS(ctx, rma.AccFloat64, 1, local, []int{8}, seg, to, 0, []int{huge - huge%8}, []int{8, 3})
		}},
		badOp{"PutV whose second element's end overflows", rma.ErrOutOfRange, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			return rt.PutV(ctx, []rma.Vec{{Local: local[:8], Off: 0}, {Local: local[8:16], Off: math.MaxInt - 3}}, seg, to)
		}},
		badOp{"PutV whose second element is past the part", rma.ErrOutOfRange, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			return rt.PutV(ctx, []rma.Vec{{Local: local[:8], Off: 0}, {Local: local[8:16], Off: 1 << 20}}, seg, to)
		}},
		badOp{"GetV whose second element is negative", rma.ErrOutOfRange, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			return rt.GetV(ctx, []rma.Vec{{Local: local[:8], Off: 0}, {Local: local[8:16], Off: -8}}, seg, to)
		}},
		badOp{"Put past the part", rma.ErrOutOfRange, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			return rt.Put(ctx, local[:16], seg, to, partBytes-8)
		}},
		badOp{"Rmw misaligned", rma.ErrType, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			_, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, to, 4, 1)
			return err
		}},
		badOp{"CompareSwap past the part", rma.ErrOutOfRange, func(ctx context.Context, rt *rma.Runtime, seg *rma.Segment, to int, local []byte) error {
			_, err := rt.CompareSwap(ctx, seg, to, partBytes, 0, 1)
			return err
		}},
	)
	return ops
}

// wait adapts a non-blocking call's two results to one error.
func waitFn(ctx context.Context) func(*rma.Handle, error) error {
	return func(h *rma.Handle, err error) error { return wait(ctx, h, err) }
}

const partBytes = 4096

// TestMalformedTransfersChangeNothing issues every malformed call of badOps to the next rank (to itself
// with one rank), over shm and tcp: each fails with its sentinel, and neither the target's part
// nor the origin's local buffer changes (checksum).
func TestMalformedTransfersChangeNothing(t *testing.T) {
	for _, np := range []int{1, 2} {
		transports(t, np, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			seg, err := rt.Malloc(ctx, partBytes)
			require.NoError(t, err)
			me, n := rt.Rank(), rt.Size()
			want := pattern(me, partBytes)
			copy(seg.Local(), want)
			require.NoError(t, rt.Barrier(ctx))
			to := (me + 1) % n
			for _, op := range badOps() {
				local := pattern(100+me, partBytes)
				err := op.call(ctx, rt, seg, to, local)
				require.Error(t, err, op.name)
				require.True(t, errors.Is(err, op.want), "%s: got %v, want %v", op.name, err, op.want)
				require.Equal(t, pattern(100+me, partBytes), local, "%s changed the origin's buffer", op.name)
				require.NoError(t, rt.Barrier(ctx))
				require.True(t, bytes.Equal(want, seg.Local()), "%s changed rank %d's part", op.name, me)
			}
			require.NoError(t, seg.Free(ctx))
		})
	}
}
