package dist

import (
	"fmt"
	"slices"
)

// Layout is how a distribution deals its blocks to the array's processes and stores them there.
type Layout uint8

const (
	// LayoutBlocked is one block per process (Regular, Irregular): block k on process k, stored
	// row-major.
	LayoutBlocked Layout = iota
	// LayoutCyclic is GA's simple block-cyclic layout (GA_Set_block_cyclic): blocks of a fixed
	// size, numbered row-major, block k on process k mod P; a process stores its blocks one
	// after the other in block order, each row-major at its own size.
	LayoutCyclic
	// LayoutTiled is GA's tiled layout over a process grid (GA_Set_tiled_proc_grid,
	// GA_Set_tiled_irreg_proc_grid): the block at block coordinates (k0, ..., kn-1) is on the
	// process at grid coordinates (k0 mod P0, ..., kn-1 mod Pn-1); a process stores its blocks
	// one after the other in block order, each row-major at its own size.
	LayoutTiled
	// LayoutScaLAPACK deals the blocks as LayoutTiled, but a process stores its blocks as one
	// row-major local matrix, blocks side by side in block order, as ScaLAPACK's
	// two-dimensional block-cyclic layout (GA_Set_block_cyclic_proc_grid) [GA].
	LayoutScaLAPACK
)

var layoutNames = [...]string{"blocked", "block-cyclic", "tiled", "ScaLAPACK block-cyclic"}

func (l Layout) String() string {
	if int(l) < len(layoutNames) {
		return layoutNames[l]
	}
	return fmt.Sprintf("Layout(%d)", uint8(l))
}

// cyclic holds what the block-cyclic, tiled and restricted distributions add to the grid of
// blocks.
type cyclic struct {
	pgrid   [MaxDims]int   // tiled, ScaLAPACK: processes along each dimension
	pstride [MaxDims]int   // row-major strides of the process grid
	ranks   []int          // restricted: array process → rank (nil: the identity)
	inv     []int          // restricted: rank → array process, -1 for none
	boff    []int          // cyclic, tiled: element offset of each block in its owner's storage
	elems   []int          // cyclic, tiled, ScaLAPACK: elements each array process stores
	lext    [MaxDims][]int // ScaLAPACK: local extent along d of process coordinate p
}

// BlockCyclic returns GA's simple block-cyclic distribution (GA_Set_block_cyclic) of an array
// with extents dims over nproc ranks: blocks of block[d] elements along d (the last block along d
// may be shorter; a block larger than the extent is cut to it), numbered row-major, block k on
// rank k mod nproc (LayoutCyclic).
//
// Errors: ErrShape as for Regular or a block array of the wrong length; ErrMap for nproc < 1 or
// a block size < 1.
func BlockCyclic(dims []int, nproc int, block []int) (*Dist, error) {
	starts, err := cyclicStarts(dims, nproc, block)
	if err != nil {
		return nil, err
	}
	return deal(dims, nproc, starts, nil, LayoutCyclic)
}

// BlockCyclicGrid returns GA's block-cyclic distribution over a process grid
// (GA_Set_block_cyclic_proc_grid): blocks of block[d] elements along d dealt cyclically along
// each dimension of the pgrid process grid, stored in ScaLAPACK's layout (LayoutScaLAPACK).
// The grid must hold exactly nproc ranks, numbered row-major over it.
//
// Errors: as BlockCyclic; ErrMap for a grid entry < 1 or a grid of the wrong size.
func BlockCyclicGrid(dims []int, nproc int, block, pgrid []int) (*Dist, error) {
	starts, err := cyclicStarts(dims, nproc, block)
	if err != nil {
		return nil, err
	}
	return deal(dims, nproc, starts, pgrid, LayoutScaLAPACK)
}

// Tiled returns GA's tiled distribution over a process grid (GA_Set_tiled_proc_grid): as
// BlockCyclicGrid, but each block stored by itself (LayoutTiled).
//
// Errors: as BlockCyclicGrid.
func Tiled(dims []int, nproc int, block, pgrid []int) (*Dist, error) {
	starts, err := cyclicStarts(dims, nproc, block)
	if err != nil {
		return nil, err
	}
	return deal(dims, nproc, starts, pgrid, LayoutTiled)
}

// TiledIrregular returns GA's irregular tiled distribution (GA_Set_tiled_irreg_proc_grid): the
// blocks are cut at the start indices starts[d] along each dimension (as Irregular, any number
// of blocks) and dealt cyclically over the pgrid process grid (LayoutTiled).
//
// Errors: ErrShape as for Irregular; ErrMap for a malformed map or grid.
func TiledIrregular(dims []int, nproc int, starts [][]int, pgrid []int) (*Dist, error) {
	if err := checkDims(dims); err != nil {
		return nil, err
	}
	if nproc < 1 {
		return nil, fmt.Errorf("%w: %d ranks", ErrMap, nproc)
	}
	full, err := fullMap(dims, starts, maxElems)
	if err != nil {
		return nil, err
	}
	return deal(dims, nproc, full, pgrid, LayoutTiled)
}

// cyclicStarts validates a block-cyclic request and returns the block starts along each
// dimension (multiples of the block size, completed by the extent).
func cyclicStarts(dims []int, nproc int, block []int) ([][]int, error) {
	if err := checkDims(dims); err != nil {
		return nil, err
	}
	if nproc < 1 {
		return nil, fmt.Errorf("%w: %d ranks", ErrMap, nproc)
	}
	if len(block) != len(dims) {
		return nil, fmt.Errorf("%w: %d block sizes for %d dimensions", ErrShape, len(block), len(dims))
	}
	starts := make([][]int, len(dims))
	for d, b := range block {
		if b < 1 {
			return nil, fmt.Errorf("%w: block size %d along dimension %d", ErrMap, b, d)
		}
		b = min(b, dims[d])
		g := (dims[d] + b - 1) / b
		s := make([]int, g+1)
		for k := range g {
			s[k] = k * b
		}
		s[g] = dims[d]
		starts[d] = s
	}
	return starts, nil
}

// deal builds a multi-block distribution: the grid of blocks, the process grid (nil for
// LayoutCyclic) and the storage tables of the layout.
func deal(dims []int, nproc int, starts [][]int, pgrid []int, layout Layout) (*Dist, error) {
	n := len(dims)
	if layout != LayoutCyclic {
		if len(pgrid) != n {
			return nil, fmt.Errorf("%w: process grid of %d dimensions for %d", ErrMap, len(pgrid), n)
		}
		p := 1
		for d, g := range pgrid {
			if g < 1 || g > nproc || p > nproc/g {
				return nil, fmt.Errorf("%w: process grid %v for %d ranks (entry %d)", ErrMap, pgrid, nproc, d)
			}
			p *= g
		}
		if p != nproc {
			return nil, fmt.Errorf("%w: process grid %v holds %d ranks, not %d", ErrMap, pgrid, p, nproc)
		}
	}
	t, err := build(dims, nproc, starts, layout)
	if err != nil {
		return nil, err
	}
	if layout != LayoutCyclic {
		s := 1
		for d := n - 1; d >= 0; d-- {
			t.pgrid[d], t.pstride[d] = pgrid[d], s
			s *= pgrid[d]
		}
	}
	t.elems = make([]int, t.vproc)
	if layout == LayoutScaLAPACK {
		for d := 0; d < n; d++ {
			t.lext[d] = make([]int, t.pgrid[d])
			for k := 0; k < t.grid[d]; k++ {
				t.lext[d][k%t.pgrid[d]] += t.starts[d][k+1] - t.starts[d][k]
			}
		}
		for p := range t.elems {
			e := 1
			for d := 0; d < n; d++ {
				e *= t.lext[d][(p/t.pstride[d])%t.pgrid[d]]
			}
			t.elems[p] = e
		}
		return t, nil
	}
	t.boff = make([]int, t.nblocks)
	var kc [MaxDims]int
	for kb := 0; kb < t.nblocks; kb++ {
		p := t.ownerProc(&kc, kb)
		t.boff[kb] = t.elems[p]
		e := 1
		for d := 0; d < n; d++ {
			e *= t.starts[d][kc[d]+1] - t.starts[d][kc[d]]
		}
		t.elems[p] += e
		for d := n - 1; d >= 0; d-- {
			if kc[d]++; kc[d] < t.grid[d] {
				break
			}
			kc[d] = 0
		}
	}
	return t, nil
}

// Restrict returns t with its processes mapped to the given ranks of a group of nproc ranks
// (GA_Set_restricted): t was built over len(ranks) processes, and process p's blocks belong to
// rank ranks[p]; the other ranks own nothing. The slice is copied.
//
// Errors: ErrMap for len(ranks) different from t's processes, a rank outside [0, nproc), a rank
// listed twice, or t already restricted.
func Restrict(t *Dist, nproc int, ranks []int) (*Dist, error) {
	if t.ranks != nil {
		return nil, fmt.Errorf("%w: already restricted", ErrMap)
	}
	if len(ranks) != t.vproc || len(ranks) > nproc {
		return nil, fmt.Errorf("%w: %d ranks listed for a distribution over %d of %d", ErrMap, len(ranks), t.vproc, nproc)
	}
	inv := make([]int, nproc)
	for r := range inv {
		inv[r] = -1
	}
	for p, r := range ranks {
		if r < 0 || r >= nproc {
			return nil, fmt.Errorf("%w: rank %d of the list outside [0, %d)", ErrMap, r, nproc)
		}
		if inv[r] >= 0 {
			return nil, fmt.Errorf("%w: rank %d listed twice", ErrMap, r)
		}
		inv[r] = p
	}
	u := *t
	u.nproc, u.ranks, u.inv = nproc, slices.Clone(ranks), inv
	return &u, nil
}

// proc is the array process of rank, -1 if rank is none (outside the group or not in the
// restricted list).
func (t *Dist) proc(rank int) int {
	if rank < 0 || rank >= t.nproc {
		return -1
	}
	if t.inv == nil {
		return rank
	}
	return t.inv[rank]
}

// rankOf is the rank of array process p.
func (t *Dist) rankOf(p int) int {
	if t.ranks == nil {
		return p
	}
	return t.ranks[p]
}

// ownerProc is the array process holding the block at block coordinates kc (row-major number
// kb).
func (t *Dist) ownerProc(kc *[MaxDims]int, kb int) int {
	switch t.layout {
	case LayoutBlocked:
		return kb
	case LayoutCyclic:
		return kb % t.vproc
	}
	p := 0
	for d := 0; d < t.ndim; d++ {
		p += kc[d] % t.pgrid[d] * t.pstride[d]
	}
	return p
}

// place writes into slo, shi the storage box of the block at block coordinates kc (number kb):
// the bounds, in array indices, of a row-major box whose element (slo) is at element offset base
// of the owner's storage and which holds the block in place. For one block per process and for
// the tiled layouts it is the block itself; in the ScaLAPACK layout it is the whole local matrix,
// shifted so that the block falls at its place in it.
func (t *Dist) place(kc *[MaxDims]int, kb int, slo, shi *[MaxDims]int) (base int) {
	for d := 0; d < t.ndim; d++ {
		k := kc[d]
		slo[d], shi[d] = t.starts[d][k], t.starts[d][k+1]-1
	}
	switch t.layout {
	case LayoutBlocked:
		return 0
	case LayoutScaLAPACK:
		for d := 0; d < t.ndim; d++ {
			k, p := kc[d], t.pgrid[d]
			slo[d] -= (k / p) * t.starts[d][1] // the blocks before it on its process, all of full size
			shi[d] = slo[d] + t.lext[d][k%p] - 1
		}
		return 0
	}
	return t.boff[kb]
}

// coords writes the block coordinates of block number kb into kc.
func (t *Dist) coords(kb int, kc *[MaxDims]int) {
	for d := 0; d < t.ndim; d++ {
		kc[d] = (kb / t.gstride[d]) % t.grid[d]
	}
}

// multi reports whether a process may hold several blocks (the block-cyclic and tiled layouts).
func (t *Dist) multi() bool { return t.layout != LayoutBlocked }

// Layout is the distribution's layout.
func (t *Dist) Layout() Layout { return t.layout }

// MultiBlock reports whether a rank may own several blocks (block-cyclic and tiled layouts),
// where Block, BlockInto and BlockElems, which describe one box per rank, report nothing.
func (t *Dist) MultiBlock() bool { return t.multi() }

// ProcessGrid returns a copy of the process grid of the tiled and ScaLAPACK layouts
// (GA_Get_proc_grid on such an array), nil for the others.
func (t *Dist) ProcessGrid() []int {
	if t.layout != LayoutTiled && t.layout != LayoutScaLAPACK {
		return nil
	}
	return slices.Clone(t.pgrid[:t.ndim])
}

// Ranks returns a copy of the restricted list (GA_Set_restricted's list: the ranks that own
// blocks, array process p being Ranks()[p]), nil when the array is not restricted.
func (t *Dist) Ranks() []int { return slices.Clone(t.ranks) }

// LocalElems is the number of elements rank stores (all its blocks), 0 when it owns nothing.
func (t *Dist) LocalElems(rank int) int {
	if !t.multi() {
		return t.BlockElems(rank)
	}
	p := t.proc(rank)
	if p < 0 {
		return 0
	}
	return t.elems[p]
}

// BlockOwner is the rank owning block number k (0 <= k < NBlocks, row-major over the block
// grid), -1 for any other k.
func (t *Dist) BlockOwner(k int) int {
	if k < 0 || k >= t.nblocks {
		return -1
	}
	var kc [MaxDims]int
	t.coords(k, &kc)
	return t.rankOf(t.ownerProc(&kc, k))
}

// OwnedBlocks returns the numbers of the blocks rank owns, in increasing order (the order of
// its storage); empty when it owns none.
func (t *Dist) OwnedBlocks(rank int) []int {
	p := t.proc(rank)
	if p < 0 {
		return nil
	}
	if !t.multi() {
		if p < t.nblocks {
			return []int{p}
		}
		return nil
	}
	var out []int
	var kc [MaxDims]int
	for kb := 0; kb < t.nblocks; kb++ {
		if t.ownerProc(&kc, kb) == p {
			out = append(out, kb)
		}
		for d := t.ndim - 1; d >= 0; d-- {
			if kc[d]++; kc[d] < t.grid[d] {
				break
			}
			kc[d] = 0
		}
	}
	return out
}

// BlockBounds returns the inclusive bounds of block number k (NGA_Distribution on a
// block-cyclic array, whose argument is a block index); lo all 0 and hi all -1 for a k outside
// [0, NBlocks).
func (t *Dist) BlockBounds(k int) (lo, hi []int) {
	lo, hi = make([]int, t.ndim), make([]int, t.ndim)
	if k < 0 || k >= t.nblocks {
		for d := range hi {
			hi[d] = -1
		}
		return lo, hi
	}
	var kc [MaxDims]int
	t.coords(k, &kc)
	for d := 0; d < t.ndim; d++ {
		lo[d], hi[d] = t.starts[d][kc[d]], t.starts[d][kc[d]+1]-1
	}
	return lo, hi
}

// BlockStorage returns where block number k (0 <= k < NBlocks) lies in its owner's storage: the
// element offset of its first element and the leading dimensions (NDim-1 entries, ld[d] the
// storage extent along dimension d+1) to step through it row-major (NGA_Access_block's ld).
func (t *Dist) BlockStorage(k int) (off int, ld []int) {
	var kc [MaxDims]int
	var slo, shi [MaxDims]int
	t.coords(k, &kc)
	off = t.place(&kc, k, &slo, &shi)
	s := 1
	for d := t.ndim - 1; d >= 0; d-- {
		off += (t.starts[d][kc[d]] - slo[d]) * s
		s *= shi[d] - slo[d] + 1
	}
	ld = make([]int, t.ndim-1)
	for d := 1; d < t.ndim; d++ {
		ld[d-1] = shi[d] - slo[d] + 1
	}
	return off, ld
}

// LocateBlock returns the number of the block holding the element at subscript (row-major over
// the block grid; NGA_Locate on a block-cyclic array, which reports block indices).
//
// Errors: as Locate.
func (t *Dist) LocateBlock(subscript []int) (int, error) {
	var kc [MaxDims]int
	kb, err := t.blockOf(subscript, &kc)
	if err != nil {
		return -1, err
	}
	return kb, nil
}

// blockOf validates subscript and returns its block's number and coordinates.
func (t *Dist) blockOf(subscript []int, kc *[MaxDims]int) (int, error) {
	if len(subscript) != t.ndim {
		return -1, fmt.Errorf("%w: %d subscripts for %d dimensions", ErrShape, len(subscript), t.ndim)
	}
	kb := 0
	for d, i := range subscript {
		if i < 0 || i >= t.dims[d] {
			return -1, fmt.Errorf("%w: subscript %d = %d, extent %d", ErrOutOfBounds, d, i, t.dims[d])
		}
		kc[d] = t.blockIndex(d, i)
		kb += kc[d] * t.gstride[d]
	}
	return kb, nil
}
