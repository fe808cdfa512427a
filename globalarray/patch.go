package globalarray

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/globalarray/dist"
	"github.com/goarmci/goarmci/rma"
)

// op is the direction of a patch transfer.
type op uint8

const (
	opPut op = iota
	opGet
	opAcc
)

var opNames = [...]string{"NGA_Put", "NGA_Get", "NGA_Acc"}
var nbNames = [...]string{"NGA_NbPut", "NGA_NbGet", "NGA_NbAcc"}

// Handle is a non-blocking patch operation in flight (ga_nbhdl_t): one rma handle per owner
// block the patch touches.
type Handle struct {
	hs     []*rma.Handle
	inline [4]*rma.Handle // storage for patches over few owners (one allocation per handle)
}

// Test reports whether every part of the operation has completed (NGA_NbTest), making progress
// once; a completed operation still needs no Wait, but Wait returns its error.
func (h *Handle) Test() bool {
	if h == nil {
		return true
	}
	for _, x := range h.hs {
		if !x.Test() {
			return false
		}
	}
	return true
}

// Wait blocks until every part of the operation has completed (NGA_NbWait): for NbPut and
// NbAcc the buffer may be reused, for NbGet it holds the patch. Waiting again returns nil.
//
// Errors: the first error of the parts (transport, context); all parts are waited for.
func (h *Handle) Wait(ctx context.Context) error {
	if h == nil {
		return nil
	}
	err := waitAll(ctx, h.hs)
	h.hs = nil
	if err != nil {
		return fmt.Errorf("ga: NGA_NbWait: %w", err)
	}
	return nil
}

// waitAll waits for every handle, clearing them, and returns the first error.
func waitAll(ctx context.Context, hs []*rma.Handle) error {
	var first error
	for i, x := range hs {
		if x == nil {
			continue
		}
		if err := x.Wait(ctx); err != nil && first == nil {
			first = err
		}
		hs[i] = nil
	}
	return first
}

// Put copies buf into the patch [lo, hi] (NGA_Put). buf holds the patch row-major with leading
// dimensions ld (len ndim-1, ld[d] = buffer extent along dimension d+1; nil = packed). Returns
// when buf may be reused; the data is at its owners after a Sync (or a Get from this rank).
//
// Errors: ErrShape, ErrOutOfBounds, ErrDestroyed (nothing changed); rma transport errors.
func (a *Array[T]) Put(ctx context.Context, lo, hi []int, buf []T, ld []int) error {
	_, err := a.patch(ctx, opPut, lo, hi, buf, ld, 0, true)
	return err
}

// Get copies the patch [lo, hi] into buf (NGA_Get), laid out as for Put. Returns when buf holds
// the data.
//
// Errors: ErrShape, ErrOutOfBounds, ErrDestroyed (nothing changed); rma transport errors.
func (a *Array[T]) Get(ctx context.Context, lo, hi []int, buf []T, ld []int) error {
	_, err := a.patch(ctx, opGet, lo, hi, buf, ld, 0, true)
	return err
}

// Acc adds alpha·buf element-wise into the patch [lo, hi] (NGA_Acc), atomically per element with
// respect to other accumulates; buf is laid out as for Put. Returns when buf may be reused. For
// integer arrays alpha is applied as a float64 (exact below 2^53).
//
// Errors: ErrShape, ErrOutOfBounds, ErrDestroyed (nothing changed); rma transport errors.
func (a *Array[T]) Acc(ctx context.Context, lo, hi []int, buf []T, ld []int, alpha T) error {
	_, err := a.patch(ctx, opAcc, lo, hi, buf, ld, alpha, true)
	return err
}

// NbPut is the non-blocking Put (NGA_NbPut): buf must not change until the handle's Wait.
func (a *Array[T]) NbPut(ctx context.Context, lo, hi []int, buf []T, ld []int) (*Handle, error) {
	return a.patch(ctx, opPut, lo, hi, buf, ld, 0, false)
}

// NbGet is the non-blocking Get (NGA_NbGet): buf holds the patch after the handle's Wait.
func (a *Array[T]) NbGet(ctx context.Context, lo, hi []int, buf []T, ld []int) (*Handle, error) {
	return a.patch(ctx, opGet, lo, hi, buf, ld, 0, false)
}

// NbAcc is the non-blocking Acc (NGA_NbAcc): buf must not change until the handle's Wait.
func (a *Array[T]) NbAcc(ctx context.Context, lo, hi []int, buf []T, ld []int, alpha T) (*Handle, error) {
	return a.patch(ctx, opAcc, lo, hi, buf, ld, alpha, false)
}

// patch validates a patch transfer completely, then issues one non-blocking rma operation per
// owner block and, when block is set, waits for all of them. A patch inside one block with
// block set is issued as a single blocking operation (no handle allocated).
func (a *Array[T]) patch(ctx context.Context, o op, lo, hi []int, buf []T, ld []int, alpha T, block bool) (*Handle, error) {
	name := opNames[o]
	if !block {
		name = nbNames[o]
	}
	if a.destroyed.Load() {
		return nil, fmt.Errorf("ga: %s %q: %w", name, a.name, ErrDestroyed)
	}
	var c dist.Cursor
	if err := a.d.Region(lo, hi, &c); err != nil {
		return nil, fmt.Errorf("ga: %s %q: %w", name, a.name, err)
	}
	var bs [dist.MaxDims]int
	if _, err := dist.BufStrides(lo, hi, ld, len(buf), bs[:]); err != nil {
		return nil, fmt.Errorf("ga: %s %q: %w", name, a.name, err)
	}
	n := a.d.NDim()
	bytes := asBytes(buf)
	var scale complex128
	if o == opAcc {
		scale = toScale(a.typ, alpha)
	}
	var s dist.Strided
	if block && c.Count() == 1 {
		c.Next()
		a.describe(&c, lo, bs[:n], &s)
		if _, err := a.issue(ctx, o, &s, c.Rank, bytes, scale, true); err != nil {
			return nil, fmt.Errorf("ga: %s %q: %w", name, a.name, err)
		}
		return nil, nil
	}
	// Blocking: the handles live on the stack (up to 8 owners). Non-blocking: in the Handle.
	if block {
		var stack [8]*rma.Handle
		hs, err := a.issueAll(ctx, o, &c, lo, bs[:n], bytes, scale, stack[:0])
		if err == nil {
			err = waitAll(ctx, hs)
		}
		if err != nil {
			return nil, fmt.Errorf("ga: %s %q: %w", name, a.name, err)
		}
		return nil, nil
	}
	h := &Handle{}
	hs, err := a.issueAll(ctx, o, &c, lo, bs[:n], bytes, scale, h.inline[:0])
	if err != nil {
		return nil, fmt.Errorf("ga: %s %q: %w", name, a.name, err)
	}
	h.hs = hs
	return h, nil
}

// issueAll issues the parts of a patch for every block of c, non-blocking, appending their
// handles to hs. On an issue error it waits for what was issued, so no buffer stays in use (as
// rma does), and returns the error.
func (a *Array[T]) issueAll(ctx context.Context, o op, c *dist.Cursor, lo, bs []int, buf []byte, scale complex128, hs []*rma.Handle) ([]*rma.Handle, error) {
	var s dist.Strided
	for c.Next() {
		a.describe(c, lo, bs, &s)
		x, err := a.issue(ctx, o, &s, c.Rank, buf, scale, false)
		if err != nil {
			_ = waitAll(context.WithoutCancel(ctx), hs)
			return nil, err
		}
		if x != nil {
			hs = append(hs, x)
		}
	}
	return hs, nil
}

// describe fills s with the transfer of the cursor's current part of the patch starting at lo
// (buffer strides bs): against the block's storage box (ghost cells included), from its base.
func (a *Array[T]) describe(c *dist.Cursor, lo, bs []int, s *dist.Strided) {
	var slo, shi [dist.MaxDims]int
	bl, bh := a.storage(c.StoreLo(), c.StoreHi(), &slo, &shi)
	dist.Describe(bl, bh, c.Lo(), c.Hi(), lo, bs, a.es, s)
	s.RemoteOff += c.Base * a.es
}

// issue starts one owner's part of a patch transfer: one rma.Transfer of the descriptor
// (contiguous when it has no stride levels; ARMCI_NbPut/NbPutS and kin) to block rank's owner.
func (a *Array[T]) issue(ctx context.Context, o op, s *dist.Strided, rank int, buf []byte, scale complex128, block bool) (*rma.Handle, error) {
	local := buf[s.BufOff : s.BufOff+s.BufExtent()]
	return a.rt.Transfer(ctx, dirs[o], a.typ, scale, local, s.BufStrides(), a.seg, a.owner(rank), s.RemoteOff, s.RemoteStrides(), s.Counts(), block)
}

// dirs maps a patch operation to its rma transfer direction.
var dirs = [...]rma.Dir{opPut: rma.DirPut, opGet: rma.DirGet, opAcc: rma.DirAcc}

// ReadInc atomically adds inc to the integer element at subscript and returns its previous
// value (NGA_Read_inc, on ARMCI_Rmw's FETCH_AND_ADD / FETCH_AND_ADD_LONG). For int32 arrays inc
// and the result are 32-bit (inc is truncated, the sum wraps).
//
// Errors: ErrType for non-integer arrays, ErrShape, ErrOutOfBounds, ErrDestroyed (nothing
// changed); rma transport errors.
func (a *Array[T]) ReadInc(ctx context.Context, subscript []int, inc int64) (int64, error) {
	if err := a.alive("NGA_Read_inc"); err != nil {
		return 0, err
	}
	var rop rma.RmwOp
	switch a.typ {
	case rma.AccInt32:
		rop = rma.FetchAndAdd
	case rma.AccInt64:
		rop = rma.FetchAndAddLong
	default:
		return 0, fmt.Errorf("ga: NGA_Read_inc %q of %v elements: %w", a.name, a.typ, ErrType)
	}
	rank, elem, err := a.offset(subscript)
	if err != nil {
		return 0, fmt.Errorf("ga: NGA_Read_inc %q: %w", a.name, err)
	}
	old, err := a.rt.Rmw(ctx, rop, a.seg, a.owner(rank), elem*a.es, inc)
	if err != nil {
		return 0, fmt.Errorf("ga: NGA_Read_inc %q: %w", a.name, err)
	}
	return old, nil
}
