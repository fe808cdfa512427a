package globalarray

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync/atomic"

	"github.com/goarmci/goarmci/globalarray/dist"
	"github.com/goarmci/goarmci/rma"
)

// Block is one owner's part of a patch, as NGA_Locate_region reports it: the rank and the
// inclusive sub-patch [Lo, Hi] it holds.
type Block = dist.Block

// Array is a global array of T: an N-d array distributed in blocks over the ranks of a runtime,
// or over the members of a process group (OnGroup) (a GA handle, g_a). Its methods may be called
// from several goroutines of one rank; the collective ones (Create, Destroy, Duplicate, Fill,
// Zero, Scale, Copy, Dot, Add, Sync) must be called by every rank (every member of the array's
// group) in the same order.
type Array[T Elem] struct {
	rt    *rma.Runtime
	pg    *Pgroup // the group the array lives on (World without OnGroup)
	abs   []int   // block (group rank) → rank of rt; nil on the world group, where they are equal
	name  string
	d     *dist.Dist
	seg   *rma.Segment
	typ   rma.AccType
	es    int   // element size, bytes
	me    int   // this rank's group rank: the number of its block
	local []T   // this rank's block from its first interior element, row-major with leading dimensions ld (a view of seg.Local())
	lo    []int // this rank's block bounds (0 / -1 when it owns nothing)
	hi    []int
	ld    []int       // leading dimensions of the local storage, len ndim-1 (ghost cells included)
	gw    []int       // ghost cell widths per dimension (nil: no ghost cells)
	raw   []T         // the whole local storage, ghost cells included (== local without ghosts)
	parts []*Array[T] // this rank's blocks as views (blockcyclic.go); {a} with one block per rank

	destroyed atomic.Bool
	accessed  atomic.Int32 // outstanding Access without Release
}

// Option configures Create.
type Option func(*options)

type options struct {
	chunk  []int
	irreg  [][]int
	ghosts []int
	pg     *Pgroup
	layout layoutOptions // block-cyclic, tiled, restricted (blockcyclic.go)
}

// Chunk asks for blocks of at least chunk[d] elements along dimension d (NGA_Create's chunk
// array; chunk[d] <= 0 means no preference, GA's -1). One entry per dimension.
func Chunk(chunk ...int) Option {
	c := append([]int(nil), chunk...)
	return func(o *options) { o.chunk = c }
}

// Irregular distributes the array by the given block start indices per dimension, as
// NGA_Create_irreg's map and nblock split by dimension: starts[d] lists the first index of each
// block along d (starting at 0, strictly increasing). Blocks are numbered row-major and block k
// belongs to rank k; the number of blocks may not exceed the number of ranks.
func Irregular(starts [][]int) Option {
	m := make([][]int, len(starts))
	for d, s := range starts {
		m[d] = append([]int(nil), s...)
	}
	return func(o *options) { o.irreg = m }
}

// Create creates a global array of T with the given extents, zero-filled, distributed over all
// ranks of rt (NGA_Create, NGA_Create_irreg with the Irregular option), or over the members of a
// process group with OnGroup (NGA_Create_config). Collective: every rank (every member) calls it
// with the same dims and options. Without options the distribution is GA's regular
// block distribution over the default process grid (dist.Regular).
//
// Errors: ErrShape (no or more than dist.MaxDims dimensions, a non-positive extent, a chunk of
// the wrong length), ErrMap (a malformed irregular map, more blocks than ranks),
// ErrMismatch (ranks passed different arguments; every rank then fails), ErrMemoryLimit (a
// member's SetMemoryLimit would be exceeded; every member then fails), ErrNotMember (OnGroup
// of a group this rank is not a member of: on this rank only, nothing is done), rma errors from
// ARMCI_Malloc.
func Create[T Elem](ctx context.Context, rt *rma.Runtime, name string, dims []int, opts ...Option) (*Array[T], error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	typ := accTypeOf[T]()
	pg := o.pg
	switch {
	case pg == nil:
		pg = World(rt)
	case pg.rt != rt:
		return nil, fmt.Errorf("ga: NGA_Create %q: %w: the group belongs to another runtime", name, ErrShape)
	}
	if err := pg.member(); err != nil {
		return nil, fmt.Errorf("ga: NGA_Create %q: %w", name, err) // not collective for a non-member
	}
	d, err := o.distribution(dims, pg.Nnodes())
	if err == nil && o.ghosts != nil {
		err = checkGhosts(dims, o.ghosts)
	}
	return create[T](ctx, pg, name, d, typ, o.ghosts, argHash(typ, dims, d, o.ghosts), err)
}

// create allocates an array over distribution d with ghost cell widths gw (nil: none;
// collective over the members of pg, this rank among them). Before allocating, the members
// agree in one collective (agreeOn) on the arguments (their digest h), on argErr (this rank's
// verdict on them: d is not used when it is set) and on every member's memory limit, so no rank
// is left alone in ARMCI_Malloc.
func create[T Elem](ctx context.Context, pg *Pgroup, name string, d *dist.Dist, typ rma.AccType, gw []int, h int64, argErr error) (*Array[T], error) {
	if argErr != nil {
		_, _ = agreeOn(ctx, pg, h, true, false) // the others learn of it; this rank's verdict is the error
		return nil, fmt.Errorf("ga: NGA_Create %q: %w", name, argErr)
	}
	me := pg.NodeID()
	a := &Array[T]{rt: pg.rt, pg: pg, name: name, d: d, typ: typ, es: typ.Size(), me: me}
	if pg.g != nil {
		a.abs = pg.g.Members()
	}
	if gw != nil {
		a.gw = append([]int(nil), gw...)
	}
	a.lo, a.hi = d.Block(me)
	n := d.NDim()
	a.ld = make([]int, n-1)
	elems := 0
	if d.BlockElems(me) > 0 {
		elems = 1
		for k := 0; k < n; k++ {
			e := a.hi[k] - a.lo[k] + 1 + 2*a.ghost(k)
			elems *= e
			if k > 0 {
				a.ld[k-1] = e
			}
		}
	}
	if d.MultiBlock() {
		elems = d.LocalElems(me)
	}
	bytes := int64(elems * a.es)
	over, used, limit := reserveMemory(pg.rt, bytes)
	anyOver, err := agreeOn(ctx, pg, h, false, over)
	if err == nil && anyOver {
		err = fmt.Errorf("%w: on another rank of the group", ErrMemoryLimit)
		if over {
			err = fmt.Errorf("%w: %d more bytes on this rank, %d of its limit of %d in use", ErrMemoryLimit, bytes, used, limit)
		}
	}
	if err != nil {
		if !over {
			releaseMemory(pg.rt, bytes)
		}
		return nil, fmt.Errorf("ga: NGA_Create %q: %w", name, err)
	}
	seg, err := pg.malloc(ctx, elems*a.es)
	if err != nil {
		releaseMemory(pg.rt, bytes)
		return nil, fmt.Errorf("ga: NGA_Create %q: %w", name, err)
	}
	a.seg = seg
	register(a, bytes)
	a.raw = fromBytes[T](seg.Local())
	a.local = a.raw
	if gw != nil && elems > 0 {
		off := 0
		for k := 0; k < n; k++ {
			off = off*a.storageExtent(k) + a.gw[k]
		}
		a.local = a.raw[off:]
	}
	a.parts = a.blockViews()
	return a, nil
}

// argHash digests what every rank must agree on at Create.
func argHash(typ rma.AccType, dims []int, d *dist.Dist, ghosts []int) int64 {
	f := fnv.New64a()
	var b [8]byte
	put := func(v int) {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		f.Write(b[:])
	}
	put(int(typ))
	put(len(dims))
	for _, v := range dims {
		put(v)
	}
	put(len(ghosts))
	for _, w := range ghosts {
		put(w)
	}
	if d != nil {
		for _, s := range d.Map() {
			put(-1)
			for _, v := range s {
				put(v)
			}
		}
		put(-int(d.Layout()) - 2)
		for _, v := range append(d.ProcessGrid(), d.Ranks()...) {
			put(v)
		}
	}
	return int64(f.Sum64() >> 2)
}

// agree is a collective check that every rank passed the same arguments (equal h) and none
// rejected them locally (bad).
func agree(ctx context.Context, rt *rma.Runtime, h int64, bad bool) error {
	_, err := agreeOn(ctx, World(rt), h, bad, false)
	return err
}

// agreeOn is agree among the members of pg, and besides tells whether any member reported over
// (its memory limit would be exceeded: create), in the same reduction.
func agreeOn(ctx context.Context, pg *Pgroup, h int64, bad, over bool) (anyOver bool, err error) {
	v := []int64{h, -h, 0, 0}
	if bad {
		v[2] = 1
	}
	if over {
		v[3] = 1
	}
	if err := pg.allReduce(ctx, rma.AccInt64, rma.ReduceMax, asBytes(v)); err != nil {
		return false, err
	}
	if v[0] != h || -v[1] != h {
		return false, fmt.Errorf("%w: different arguments on different ranks", ErrMismatch)
	}
	if v[2] != 0 {
		return false, fmt.Errorf("%w: another rank rejected the arguments", ErrMismatch)
	}
	return v[3] != 0, nil
}

// Duplicate creates a new array with the same shape, element type and distribution as a,
// zero-filled (GA_Duplicate). Collective.
//
// Errors: ErrDestroyed; rma errors from ARMCI_Malloc.
func (a *Array[T]) Duplicate(ctx context.Context, name string) (*Array[T], error) {
	if a.destroyed.Load() {
		return nil, fmt.Errorf("ga: GA_Duplicate %q: %w", a.name, ErrDestroyed)
	}
	return create[T](ctx, a.pg, name, a.d, a.typ, a.gw, argHash(a.typ, a.d.Dims(), a.d, a.gw), nil)
}

// Destroy frees the array on every rank (GA_Destroy). Collective: it completes this rank's
// outstanding operations and synchronizes, so no rank still accesses the array.
//
// Errors: ErrDestroyed if already destroyed; rma errors from ARMCI_Free.
func (a *Array[T]) Destroy(ctx context.Context) error {
	if !a.destroyed.CompareAndSwap(false, true) {
		return fmt.Errorf("ga: GA_Destroy %q: %w", a.name, ErrDestroyed)
	}
	unregister(a.rt, a.seg)
	if err := a.seg.Free(ctx); err != nil {
		return fmt.Errorf("ga: GA_Destroy %q: %w", a.name, err)
	}
	return nil
}

// Name is the array's name (GA_Inquire_name).
func (a *Array[T]) Name() string { return a.name }

// Dims returns a copy of the extents (NGA_Inquire's dims).
func (a *Array[T]) Dims() []int { return a.d.Dims() }

// NDim is the number of dimensions (GA_Ndim).
func (a *Array[T]) NDim() int { return a.d.NDim() }

// Runtime is the rma runtime the array lives on.
func (a *Array[T]) Runtime() *rma.Runtime { return a.rt }

// owner is the rank of rt that holds block k (group rank k).
func (a *Array[T]) owner(k int) int {
	if a.abs == nil {
		return k
	}
	return a.abs[k]
}

// Dist is the array's distribution (immutable; see package dist).
func (a *Array[T]) Dist() *dist.Dist { return a.d }

// Distribution returns the inclusive bounds of rank's block (NGA_Distribution); a rank that
// owns nothing gets lo all 0 and hi all -1, as in GA. On an array of a process group (OnGroup)
// rank is a group rank, as the ranks Locate and LocateRegion report (Pgroup.Absolute maps them
// to ranks of the runtime). On a block-cyclic or tiled array, as in GA, the argument is a block
// index in [0, TotalBlocks) instead (OwnedBlocks lists a rank's).
func (a *Array[T]) Distribution(rank int) (lo, hi []int) {
	if a.d.MultiBlock() {
		return a.d.BlockBounds(rank)
	}
	return a.d.Block(rank)
}

// Locate returns the rank that owns the element at subscript (NGA_Locate; a group rank on an
// array of a process group).
//
// Errors: ErrShape (wrong number of subscripts), ErrOutOfBounds.
func (a *Array[T]) Locate(subscript []int) (int, error) {
	r, err := a.d.Locate(subscript)
	if err != nil {
		return -1, fmt.Errorf("ga: NGA_Locate %q: %w", a.name, err)
	}
	return r, nil
}

// LocateRegion returns the blocks the patch [lo, hi] touches, each as the owner and the part of
// the patch it holds, in row-major block order (NGA_Locate_region; owners are group ranks on an
// array of a process group).
//
// Errors: ErrShape, ErrOutOfBounds.
func (a *Array[T]) LocateRegion(lo, hi []int) ([]Block, error) {
	b, err := a.d.LocateRegion(lo, hi)
	if err != nil {
		return nil, fmt.Errorf("ga: NGA_Locate_region %q: %w", a.name, err)
	}
	return b, nil
}

// Access returns this rank's block in place, without copying (NGA_Access on the bounds from
// NGA_Distribution): data holds the block row-major with leading dimensions ld (len ndim-1),
// so element (i0, ..., in-1) of the block, relative to its lo, is data[(i0·ld[0] + i1)·ld[1]
// + ...]. On an array with ghost cells ld counts them and data starts at the first element of
// the block proper (AccessGhosts gives the storage from its first ghost cell). A rank that owns
// nothing gets an empty slice. Writes to data are seen by other ranks after a Sync; call
// Release when done.
//
// Errors: ErrDestroyed; ErrUnsupportedDistribution on a block-cyclic or tiled array (use
// AccessBlock).
func (a *Array[T]) Access() (data []T, ld []int, err error) {
	if a.destroyed.Load() {
		return nil, nil, fmt.Errorf("ga: NGA_Access %q: %w", a.name, ErrDestroyed)
	}
	if err := a.oneBlock("NGA_Access"); err != nil {
		return nil, nil, err
	}
	a.accessed.Add(1)
	return a.local, append([]int(nil), a.ld...), nil
}

// Release ends an Access (NGA_Release / NGA_Release_update; the data is in place, so there is
// nothing to write back).
func (a *Array[T]) Release() {
	for {
		n := a.accessed.Load()
		if n <= 0 || a.accessed.CompareAndSwap(n, n-1) {
			return
		}
	}
}

func (a *Array[T]) alive(call string) error {
	if a.destroyed.Load() {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, ErrDestroyed)
	}
	return nil
}
