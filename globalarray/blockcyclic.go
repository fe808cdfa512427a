package globalarray

import (
	"context"
	"errors"
	"fmt"

	"github.com/goarmci/goarmci/globalarray/dist"
)

// Block-cyclic and tiled distributions ([GA]: GA_Set_block_cyclic,
// GA_Set_block_cyclic_proc_grid, GA_Set_tiled_proc_grid, GA_Set_tiled_irreg_proc_grid) and
// their local block access (NGA_Access_block, NGA_Access_block_grid, NGA_Access_block_segment,
// GA_Get_block_info, GA_Total_blocks, GA_Uses_proc_grid). On such an array a rank owns many
// blocks: Put, Get, Acc and their non-blocking forms, Gather, Scatter, ScatterAcc, the strided
// and periodic calls and ReadInc split their work per owner block (one strided transfer per
// block); the collectives (Fill, Zero, Scale, Copy, Dot, Add, the patch math, the element-wise
// patch operations, Transpose, the diagonal calls, the norms, Gemm) work block by block on
// each rank's blocks, fetching sources with Get. Ghost cells, Access and Symmetrize are not
// defined there (ErrUnsupportedDistribution), as in GA.

// layoutOptions are the distribution options beyond Chunk and Irregular.
type layoutOptions struct {
	set        int         // how many of BlockCyclic, BlockCyclicGrid, Tiled, TiledIrregular were given
	kind       dist.Layout // the one given
	block      []int
	pgrid      []int
	starts     [][]int // TiledIrregular
	restricted bool
	ranks      []int // Restricted (nil with RestrictedRange)
	rlo, rhi   int   // RestrictedRange
}

// BlockCyclic distributes the array in blocks of block[d] elements along each dimension d,
// numbered row-major, block k on rank k mod P (GA_Set_block_cyclic; dist.BlockCyclic). One
// size per dimension, each at least 1; a size larger than the extent is cut to it.
func BlockCyclic(block ...int) Option {
	b := append([]int{}, block...)
	return func(o *options) { o.layout.setLayout(dist.LayoutCyclic, b, nil, nil) }
}

// BlockCyclicGrid distributes the array in blocks of block[d] elements dealt cyclically over
// the process grid procGrid, stored in ScaLAPACK's layout (GA_Set_block_cyclic_proc_grid;
// dist.BlockCyclicGrid). The grid must hold exactly the array's ranks.
func BlockCyclicGrid(block, procGrid []int) Option {
	b, g := append([]int{}, block...), append([]int{}, procGrid...)
	return func(o *options) { o.layout.setLayout(dist.LayoutScaLAPACK, b, g, nil) }
}

// Tiled distributes the array as BlockCyclicGrid, each block stored by itself
// (GA_Set_tiled_proc_grid; dist.Tiled).
func Tiled(block, procGrid []int) Option {
	b, g := append([]int{}, block...), append([]int{}, procGrid...)
	return func(o *options) { o.layout.setLayout(dist.LayoutTiled, b, g, nil) }
}

// TiledIrregular cuts the array at the block start indices starts[d] along each dimension (as
// Irregular, any number of blocks) and deals the blocks cyclically over the process grid
// procGrid (GA_Set_tiled_irreg_proc_grid; dist.TiledIrregular).
func TiledIrregular(starts [][]int, procGrid []int) Option {
	m := make([][]int, len(starts))
	for d, s := range starts {
		m[d] = append([]int{}, s...)
	}
	g := append([]int{}, procGrid...)
	return func(o *options) { o.layout.setLayout(dist.LayoutTiled, nil, g, m) }
}

func (l *layoutOptions) setLayout(kind dist.Layout, block, pgrid []int, starts [][]int) {
	l.set++
	l.kind, l.block, l.pgrid, l.starts = kind, block, pgrid, starts
}

// distribution builds the distribution the options ask for over nproc ranks (Create's first
// step; no communication).
func (o *options) distribution(dims []int, nproc int) (*dist.Dist, error) {
	l := &o.layout
	np := nproc
	if l.restricted {
		ranks, err := l.restrictList(nproc)
		if err != nil {
			return nil, err
		}
		np = len(ranks)
	}
	var d *dist.Dist
	var err error
	switch {
	case l.set > 1 || (l.set == 1 && (o.chunk != nil || o.irreg != nil)):
		err = fmt.Errorf("%w: more than one of Chunk, Irregular, BlockCyclic, BlockCyclicGrid, Tiled, TiledIrregular", ErrMap)
	case o.chunk != nil && o.irreg != nil:
		err = fmt.Errorf("%w: Chunk and Irregular together", ErrMap)
	case l.set == 0 && o.irreg != nil:
		d, err = dist.Irregular(dims, np, o.irreg)
	case l.set == 0:
		d, err = dist.Regular(dims, np, o.chunk)
	case l.kind == dist.LayoutCyclic:
		d, err = dist.BlockCyclic(dims, np, l.block)
	case l.kind == dist.LayoutScaLAPACK:
		d, err = dist.BlockCyclicGrid(dims, np, l.block, l.pgrid)
	case l.starts != nil:
		d, err = dist.TiledIrregular(dims, np, l.starts, l.pgrid)
	default:
		d, err = dist.Tiled(dims, np, l.block, l.pgrid)
	}
	if err == nil && l.restricted {
		d, err = dist.Restrict(d, nproc, l.ranks)
	}
	if err == nil && o.ghosts != nil && (d.MultiBlock() || l.restricted) {
		err = fmt.Errorf("%w: ghost cells on a %v, restricted %v distribution", ErrUnsupportedDistribution, d.Layout(), l.restricted)
	}
	return d, err
}

// blockViews returns this rank's blocks as views: arrays sharing a's storage whose lo, hi,
// local and ld describe one block, for the code that works on "this rank's block" (owned,
// eachOwned). With one block per rank the only view is a itself.
func (a *Array[T]) blockViews() []*Array[T] {
	if !a.d.MultiBlock() {
		return []*Array[T]{a}
	}
	ks := a.d.OwnedBlocks(a.me)
	vs := make([]*Array[T], len(ks))
	for i, k := range ks {
		lo, hi := a.d.BlockBounds(k)
		off, ld := a.d.BlockStorage(k)
		vs[i] = &Array[T]{rt: a.rt, pg: a.pg, abs: a.abs, name: a.name, d: a.d, seg: a.seg, typ: a.typ, es: a.es,
			me: a.me, raw: a.raw, local: a.raw[off:], lo: lo, hi: hi, ld: ld}
	}
	return vs
}

// oneBlock refuses call on a block-cyclic or tiled array (ErrUnsupportedDistribution).
func (a *Array[T]) oneBlock(call string) error {
	if a.d.MultiBlock() {
		return fmt.Errorf("ga: %s %q on a %v distribution: %w", call, a.name, a.d.Layout(), ErrUnsupportedDistribution)
	}
	return nil
}

// getInto fetches a's elements at the places of like's blocks into buf, laid out as like's
// local storage (like is multi-block; buf has its length): one non-blocking Get per block.
func (a *Array[T]) getInto(ctx context.Context, like *Array[T], buf []T) error {
	hs := make([]*Handle, 0, len(like.parts))
	var err error
	for _, v := range like.parts {
		off := len(like.raw) - len(v.local)
		var h *Handle
		if h, err = a.NbGet(ctx, v.lo, v.hi, buf[off:], v.ld); err != nil {
			break
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		err = errors.Join(err, h.Wait(context.WithoutCancel(ctx)))
	}
	return err
}

// TotalBlocks is the number of blocks of the distribution (GA_Total_blocks): the blocks of a
// block-cyclic or tiled array, the owning ranks otherwise (where GA returns -1).
func (a *Array[T]) TotalBlocks() int { return a.d.NBlocks() }

// UsesProcGrid reports whether the array's blocks are dealt over a process grid
// (GA_Uses_proc_grid: BlockCyclicGrid, Tiled, TiledIrregular).
func (a *Array[T]) UsesProcGrid() bool { return a.d.ProcessGrid() != nil }

// GetBlockInfo returns the number of blocks along each dimension and the extent of a block
// along each (GA_Get_block_info): for block-cyclic and tiled arrays the block size (the last
// block along a dimension may be shorter), otherwise the extent of the first block.
func (a *Array[T]) GetBlockInfo() (numBlocks, blockDims []int) {
	numBlocks = a.d.Grid()
	lo, hi := a.d.BlockBounds(0)
	blockDims = make([]int, len(lo))
	for d := range lo {
		blockDims[d] = hi[d] - lo[d] + 1
	}
	return numBlocks, blockDims
}

// OwnedBlocks returns the numbers of the blocks rank owns (row-major over the block grid,
// increasing, the order of its storage); Distribution gives their bounds on block-cyclic and
// tiled arrays. GA has no one call for it: its programs step idx = me, me+P, ... or
// use NGA_Access_block_segment.
func (a *Array[T]) OwnedBlocks(rank int) []int { return a.d.OwnedBlocks(rank) }

// AccessBlock returns block number idx of this rank in place (NGA_Access_block): data starts
// at the block's first element, row-major with leading dimensions ld (len ndim-1; the block's
// own extents in the tiled layouts, the local matrix's in the ScaLAPACK layout of
// BlockCyclicGrid). On an array with one block per rank idx is the rank's block, numbered as
// the ranks that own one. Writes are seen by other ranks after a Sync; call Release when done.
//
// Errors: ErrDestroyed; ErrOutOfBounds (idx not a block of this rank).
func (a *Array[T]) AccessBlock(idx int) (data []T, ld []int, err error) {
	const call = "NGA_Access_block"
	if err := a.alive(call); err != nil {
		return nil, nil, err
	}
	if owner := a.d.BlockOwner(idx); owner != a.me || a.ghosted() {
		return nil, nil, fmt.Errorf("ga: %s %q: block %d of %d is on rank %d, not %d: %w", call, a.name, idx, a.d.NBlocks(), owner, a.me, ErrOutOfBounds)
	}
	lo, hi := a.d.BlockBounds(idx)
	off, ld := a.d.BlockStorage(idx)
	span, s := 1, 1
	for d := len(lo) - 1; d >= 0; d-- {
		span += (hi[d] - lo[d]) * s
		if d > 0 {
			s *= ld[d-1]
		}
	}
	a.accessed.Add(1)
	return a.raw[off : off+span], ld, nil
}

// AccessBlockGrid is AccessBlock for the block at block grid coordinates index (one per
// dimension; NGA_Access_block_grid).
//
// Errors: as AccessBlock; ErrShape (index of the wrong length).
func (a *Array[T]) AccessBlockGrid(index []int) (data []T, ld []int, err error) {
	grid := a.d.Grid()
	if len(index) != len(grid) {
		return nil, nil, fmt.Errorf("ga: NGA_Access_block_grid %q: %d block indices for %d dimensions: %w", a.name, len(index), len(grid), ErrShape)
	}
	k := 0
	for d, i := range index {
		if i < 0 || i >= grid[d] {
			return nil, nil, fmt.Errorf("ga: NGA_Access_block_grid %q: block index %d along dimension %d of %d: %w", a.name, i, d, grid[d], ErrOutOfBounds)
		}
		k = k*grid[d] + i
	}
	return a.AccessBlock(k)
}

// AccessBlockSegment returns all of this rank's storage in place (NGA_Access_block_segment):
// its blocks in the order of OwnedBlocks, each row-major at its size (the tiled layouts), or the
// one local matrix of the ScaLAPACK layout. Call Release when done.
//
// Errors: ErrDestroyed; ErrUnsupportedDistribution on an array with ghost cells.
func (a *Array[T]) AccessBlockSegment() ([]T, error) {
	const call = "NGA_Access_block_segment"
	if err := a.alive(call); err != nil {
		return nil, err
	}
	if a.ghosted() {
		return nil, fmt.Errorf("ga: %s %q: %w", call, a.name, ErrUnsupportedDistribution)
	}
	a.accessed.Add(1)
	return a.raw[:a.d.LocalElems(a.me)], nil
}
