// Package dist is the pure distribution and patch math of goarmci's Global Arrays layer: how an
// N-d array of dims elements is cut into one block per rank (GA's regular block distribution
// with its default process grid, a minimum chunk size, or an irregular map as given to
// NGA_Create_irreg), which rank owns an element (NGA_Locate), which blocks a patch touches
// (NGA_Locate_region), the bounds of a rank's block (NGA_Distribution), and the ARMCI strided
// descriptors (ARMCI_PutS's offset, stride arrays and count array) that move a sub-patch between
// an owner's row-major block and a user buffer with leading dimensions ld.
//
// Conventions are those of GA's C interface (NGA_*): indices are 0-based, arrays are row-major
// (the last dimension is contiguous), and patches are [lo, hi] with hi inclusive. Blocks are
// numbered row-major over the block grid. In the blocked layout (Regular, Irregular) block k
// belongs to rank k and ranks at or beyond the number of blocks own nothing; the block-cyclic
// and tiled layouts (BlockCyclic, BlockCyclicGrid, Tiled, TiledIrregular: GA_Set_block_cyclic
// and kin) deal many blocks to each rank, and Restrict maps the blocks' processes to a list of
// ranks (GA_Set_restricted). A Cursor reports each block's owner and storage box, so one
// strided descriptor per block addresses every layout.
//
// The package starts no goroutine, reads no clock and allocates only in constructors and in the
// slice-returning conveniences (Block, LocateRegion); the per-operation path (CheckPatch,
// Region with a Cursor, BufStrides, Describe) allocates nothing (a pure core: no I/O, no
// goroutine, no clock).
package dist

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// MaxDims is the largest number of dimensions an array may have (GA_MAX_DIM). With it, every
// strided descriptor has at most MaxDims-1 stride levels, within ARMCI's limit of 8.
const MaxDims = 7

// Sentinel errors; every error of this package wraps one of them.
var (
	// ErrOutOfBounds: a subscript or patch outside the array, or a patch with lo > hi in some
	// dimension.
	ErrOutOfBounds = errors.New("ga: patch out of bounds")
	// ErrShape: wrong number of dimensions or subscripts, bad extents, a buffer too small for
	// the patch and its leading dimensions, or a leading dimension smaller than the patch.
	ErrShape = errors.New("ga: bad shape")
	// ErrMap: an invalid distribution request (bad irregular map, more blocks than ranks, bad
	// chunk sizes or rank count).
	ErrMap = errors.New("ga: bad distribution")
)

// maxElems bounds the number of elements of an array so that byte offsets of 16-byte elements
// cannot overflow an int.
const maxElems = math.MaxInt / 32

// Dist is the distribution of an N-d array over nproc ranks: a Cartesian grid of blocks, cut
// along each dimension at the block start indices. It is immutable and safe for concurrent use.
type Dist struct {
	ndim    int
	nproc   int // ranks of the array's group (restricted arrays: all of them, owners or not)
	vproc   int // array processes: the ranks blocks are dealt to (len(ranks) when restricted)
	nblocks int
	layout  Layout
	dims    [MaxDims]int
	grid    [MaxDims]int // blocks along each dimension
	gstride [MaxDims]int // row-major strides of the block grid, in blocks
	// starts[d] holds grid[d]+1 entries: block k along d covers [starts[d][k], starts[d][k+1]).
	starts [MaxDims][]int

	cyclic // block-cyclic and tiled layouts, restriction (cyclic.go)
}

// Regular returns GA's regular block distribution of an array with the given extents over nproc
// ranks (NGA_Create, NGA_Create with a chunk array). chunk is nil or has one entry per
// dimension: chunk[d] > 0 asks for blocks of at least chunk[d] elements along d (the last block
// along d may be shorter), chunk[d] <= 0 means no preference (GA's -1). The process grid is
// ProcGrid over the number of chunks per dimension; along each dimension the chunks are dealt
// out as evenly as possible (the first blocks get one chunk more), as GA's pnga_create does.
//
// Errors: ErrShape for 0 or more than MaxDims dimensions, a non-positive extent, a chunk array
// of the wrong length or too many elements; ErrMap for nproc < 1.
func Regular(dims []int, nproc int, chunk []int) (*Dist, error) {
	if err := checkDims(dims); err != nil {
		return nil, err
	}
	if nproc < 1 {
		return nil, fmt.Errorf("%w: %d ranks", ErrMap, nproc)
	}
	if chunk != nil && len(chunk) != len(dims) {
		return nil, fmt.Errorf("%w: chunk has %d entries for %d dimensions", ErrShape, len(chunk), len(dims))
	}
	n := len(dims)
	var c, units [MaxDims]int
	for d := 0; d < n; d++ {
		c[d] = 1
		if chunk != nil && chunk[d] > 1 {
			c[d] = min(chunk[d], dims[d])
		}
		units[d] = (dims[d] + c[d] - 1) / c[d]
	}
	grid := ProcGrid(units[:n], nproc)
	var starts [MaxDims][]int
	for d := 0; d < n; d++ {
		g := min(grid[d], units[d])
		s := make([]int, g+1)
		q, r := units[d]/g, units[d]%g
		u := 0
		for k := 0; k < g; k++ {
			s[k] = min(u*c[d], dims[d])
			u += q
			if k < r {
				u++
			}
		}
		s[g] = dims[d]
		starts[d] = s
	}
	return build(dims, nproc, starts[:n], LayoutBlocked)
}

// Irregular returns the distribution given by per-dimension block start indices, GA's
// NGA_Create_irreg map split by dimension: starts[d] lists the first index of each block along
// dimension d, starting at 0 and strictly increasing, each below dims[d]. The number of blocks,
// the product of len(starts[d]), may not exceed nproc; blocks are numbered row-major and block k
// belongs to rank k. The slices are copied.
//
// Errors: ErrShape as for Regular or when len(starts) != len(dims); ErrMap for a malformed map
// or more blocks than ranks.
func Irregular(dims []int, nproc int, starts [][]int) (*Dist, error) {
	if err := checkDims(dims); err != nil {
		return nil, err
	}
	if nproc < 1 {
		return nil, fmt.Errorf("%w: %d ranks", ErrMap, nproc)
	}
	full, err := fullMap(dims, starts, nproc)
	if err != nil {
		return nil, err
	}
	return build(dims, nproc, full, LayoutBlocked)
}

// fullMap validates per-dimension block start indices (see Irregular) for at most maxBlocks
// blocks and returns them completed by the extents (grid[d]+1 entries each).
func fullMap(dims []int, starts [][]int, maxBlocks int) ([][]int, error) {
	if len(starts) != len(dims) {
		return nil, fmt.Errorf("%w: map has %d dimensions, array %d", ErrShape, len(starts), len(dims))
	}
	nb := 1
	full := make([][]int, len(dims))
	for d, s := range starts {
		if len(s) == 0 {
			return nil, fmt.Errorf("%w: no blocks along dimension %d", ErrMap, d)
		}
		if s[0] != 0 {
			return nil, fmt.Errorf("%w: dimension %d: first block starts at %d, not 0", ErrMap, d, s[0])
		}
		for k := 1; k < len(s); k++ {
			if s[k] <= s[k-1] || s[k] >= dims[d] {
				return nil, fmt.Errorf("%w: dimension %d: block start %d = %d after %d (extent %d)", ErrMap, d, k, s[k], s[k-1], dims[d])
			}
		}
		if len(s) > maxBlocks || nb > maxBlocks/len(s) {
			return nil, fmt.Errorf("%w: more than %d blocks", ErrMap, maxBlocks)
		}
		nb *= len(s)
		f := make([]int, len(s)+1)
		copy(f, s)
		f[len(s)] = dims[d]
		full[d] = f
	}
	return full, nil
}

func checkDims(dims []int) error {
	if len(dims) < 1 || len(dims) > MaxDims {
		return fmt.Errorf("%w: %d dimensions (1 to %d)", ErrShape, len(dims), MaxDims)
	}
	total := 1
	for d, e := range dims {
		if e < 1 {
			return fmt.Errorf("%w: extent %d of dimension %d", ErrShape, e, d)
		}
		if total > maxElems/e {
			return fmt.Errorf("%w: more than %d elements", ErrShape, maxElems)
		}
		total *= e
	}
	return nil
}

// build assembles a Dist from validated extents and full start tables (grid[d]+1 entries).
func build(dims []int, nproc int, starts [][]int, layout Layout) (*Dist, error) {
	n := len(dims)
	t := &Dist{ndim: n, nproc: nproc, vproc: nproc, nblocks: 1}
	for d := 0; d < n; d++ {
		t.dims[d] = dims[d]
		t.grid[d] = len(starts[d]) - 1
		t.starts[d] = starts[d]
		t.nblocks *= t.grid[d]
	}
	if t.nblocks > nproc && layout == LayoutBlocked {
		return nil, fmt.Errorf("%w: %d blocks for %d ranks", ErrMap, t.nblocks, nproc)
	}
	t.layout = layout
	s := 1
	for d := n - 1; d >= 0; d-- {
		t.gstride[d] = s
		s *= t.grid[d]
	}
	return t, nil
}

// NDim is the number of dimensions (GA_Ndim).
func (t *Dist) NDim() int { return t.ndim }

// NProc is the number of ranks the array is distributed over.
func (t *Dist) NProc() int { return t.nproc }

// NBlocks is the number of blocks (GA_Total_blocks). With one block per rank (LayoutBlocked),
// ranks [0, NBlocks) own one each (the ranks of the restricted list in its order, when
// restricted).
func (t *Dist) NBlocks() int { return t.nblocks }

// Dims returns a copy of the extents (NGA_Inquire's dims).
func (t *Dist) Dims() []int { return append([]int(nil), t.dims[:t.ndim]...) }

// Grid returns a copy of the number of blocks along each dimension (GA_Get_proc_grid).
func (t *Dist) Grid() []int { return append([]int(nil), t.grid[:t.ndim]...) }

// Map returns a copy of the block start indices along each dimension, in the form Irregular
// takes (NGA_Create_irreg's map, split by dimension): Irregular(Dims(), NProc(), Map()) is an
// equal distribution.
func (t *Dist) Map() [][]int {
	m := make([][]int, t.ndim)
	for d := range m {
		m[d] = append([]int(nil), t.starts[d][:t.grid[d]]...)
	}
	return m
}

// Equal reports whether u cuts the same extents into the same blocks for the same ranks, so
// that every rank's block is the same in both (the case where GA's element-wise collectives
// work on local blocks only).
func (t *Dist) Equal(u *Dist) bool {
	if t == u {
		return true
	}
	if t == nil || u == nil || t.ndim != u.ndim || t.nproc != u.nproc || t.dims != u.dims || t.grid != u.grid ||
		t.layout != u.layout || t.vproc != u.vproc || t.pgrid != u.pgrid || !slices.Equal(t.ranks, u.ranks) {
		return false
	}
	for d := 0; d < t.ndim; d++ {
		for k, v := range t.starts[d] {
			if u.starts[d][k] != v {
				return false
			}
		}
	}
	return true
}

// Elems is the total number of elements.
func (t *Dist) Elems() int {
	e := 1
	for d := 0; d < t.ndim; d++ {
		e *= t.dims[d]
	}
	return e
}

// Owns reports whether rank owns a (non-empty) block.
func (t *Dist) Owns(rank int) bool {
	if t.multi() {
		return t.LocalElems(rank) > 0
	}
	p := t.proc(rank)
	return p >= 0 && p < t.nblocks
}

// BlockInto writes the bounds of rank's block into lo and hi (each at least NDim long) and
// reports whether rank owns one; if not, lo is all 0 and hi all -1, as NGA_Distribution returns.
// In the multi-block layouts a rank's part is not one box: it reports false (see OwnedBlocks and
// BlockBounds).
func (t *Dist) BlockInto(rank int, lo, hi []int) bool {
	if t.multi() || !t.Owns(rank) {
		for d := 0; d < t.ndim; d++ {
			lo[d], hi[d] = 0, -1
		}
		return false
	}
	p := t.proc(rank)
	for d := 0; d < t.ndim; d++ {
		k := (p / t.gstride[d]) % t.grid[d]
		lo[d], hi[d] = t.starts[d][k], t.starts[d][k+1]-1
	}
	return true
}

// Block returns the inclusive bounds of rank's block (NGA_Distribution); a rank that owns
// nothing, including one outside [0, NProc), gets lo all 0 and hi all -1.
func (t *Dist) Block(rank int) (lo, hi []int) {
	lo, hi = make([]int, t.ndim), make([]int, t.ndim)
	t.BlockInto(rank, lo, hi)
	return lo, hi
}

// BlockElems is the number of elements of rank's block (0 when it owns nothing, and in the
// multi-block layouts: see LocalElems).
func (t *Dist) BlockElems(rank int) int {
	if t.multi() || !t.Owns(rank) {
		return 0
	}
	p := t.proc(rank)
	e := 1
	for d := 0; d < t.ndim; d++ {
		k := (p / t.gstride[d]) % t.grid[d]
		e *= t.starts[d][k+1] - t.starts[d][k]
	}
	return e
}

// blockIndex is the block along d that holds index i (0 <= i < dims[d]).
func (t *Dist) blockIndex(d, i int) int {
	s := t.starts[d]
	// first start > i, minus one
	return sort.Search(t.grid[d], func(k int) bool { return s[k+1] > i })
}

// Locate returns the rank owning the element at subscript (NGA_Locate).
//
// Errors: ErrShape if len(subscript) != NDim; ErrOutOfBounds if it lies outside the array.
func (t *Dist) Locate(subscript []int) (int, error) {
	var kc [MaxDims]int
	kb, err := t.blockOf(subscript, &kc)
	if err != nil {
		return -1, err
	}
	return t.rankOf(t.ownerProc(&kc, kb)), nil
}

// Offset returns the rank owning the element at subscript and the element's index in that
// rank's row-major storage (what NGA_Read_inc needs to address it).
//
// Errors: as Locate.
func (t *Dist) Offset(subscript []int) (rank, elem int, err error) {
	var kc [MaxDims]int // the block index along each dimension (no divisions: a hot path of NGA_Read_inc)
	kb, err := t.blockOf(subscript, &kc)
	if err != nil {
		return -1, 0, err
	}
	s := 1
	if t.layout == LayoutBlocked { // the offset within the one block of its process
		for d := t.ndim - 1; d >= 0; d-- {
			st, k := t.starts[d], kc[d]
			elem += (subscript[d] - st[k]) * s
			s *= st[k+1] - st[k]
		}
		return t.rankOf(kb), elem, nil
	}
	var slo, shi [MaxDims]int
	base := t.place(&kc, kb, &slo, &shi)
	for d := t.ndim - 1; d >= 0; d-- {
		elem += (subscript[d] - slo[d]) * s
		s *= shi[d] - slo[d] + 1
	}
	return t.rankOf(t.ownerProc(&kc, kb)), base + elem, nil
}

// CheckPatch validates a patch [lo, hi] (inclusive) against the array.
//
// Errors: ErrShape if len(lo) or len(hi) != NDim; ErrOutOfBounds if lo > hi in some dimension
// or the patch leaves the array.
func (t *Dist) CheckPatch(lo, hi []int) error {
	if len(lo) != t.ndim || len(hi) != t.ndim {
		return fmt.Errorf("%w: patch has %d/%d bounds for %d dimensions", ErrShape, len(lo), len(hi), t.ndim)
	}
	for d := 0; d < t.ndim; d++ {
		if lo[d] > hi[d] {
			return fmt.Errorf("%w: lo[%d] = %d > hi[%d] = %d", ErrOutOfBounds, d, lo[d], d, hi[d])
		}
		if lo[d] < 0 || hi[d] >= t.dims[d] {
			return fmt.Errorf("%w: dimension %d: [%d, %d] outside [0, %d]", ErrOutOfBounds, d, lo[d], hi[d], t.dims[d]-1)
		}
	}
	return nil
}

// Block is one owner's part of a patch: the rank and the inclusive sub-patch [Lo, Hi] of the
// patch that lies in its block.
type Block struct {
	Rank   int
	Lo, Hi []int
}

// LocateRegion returns the blocks the patch [lo, hi] touches, each as the owner and the part of
// the patch it holds, in row-major block order (NGA_Locate_region).
//
// Errors: as CheckPatch.
func (t *Dist) LocateRegion(lo, hi []int) ([]Block, error) {
	var c Cursor
	if err := t.Region(lo, hi, &c); err != nil {
		return nil, err
	}
	var out []Block
	for c.Next() {
		out = append(out, Block{Rank: c.Rank, Lo: append([]int(nil), c.Lo()...), Hi: append([]int(nil), c.Hi()...)})
	}
	return out, nil
}

// Cursor walks the blocks a patch touches (see Region). Declare one on the stack and reuse it;
// a Cursor allocates nothing. The slices its methods return alias the cursor and change at the
// next call to Next.
type Cursor struct {
	// Rank is the owner of the current block.
	Rank int
	// Index is the number of the current block (row-major over the block grid).
	Index int
	// Base is the element offset, in the owner's storage, of the current block's storage box
	// (StoreLo).
	Base int

	t                *Dist
	n                int
	started, done    bool
	lo, hi           [MaxDims]int // the patch
	first, last, cur [MaxDims]int // block coordinates
	bl, bh, l, h     [MaxDims]int // current block and its part of the patch
	sl, sh           [MaxDims]int // the storage box of the current block
}

// Region validates the patch [lo, hi] (as CheckPatch) and positions c before the first block
// it touches; then each c.Next() moves to the next block in row-major block order.
func (t *Dist) Region(lo, hi []int, c *Cursor) error {
	if err := t.CheckPatch(lo, hi); err != nil {
		return err
	}
	c.t, c.n, c.started, c.done, c.Rank = t, t.ndim, false, false, -1
	for d := 0; d < t.ndim; d++ {
		c.lo[d], c.hi[d] = lo[d], hi[d]
		c.first[d] = t.blockIndex(d, lo[d])
		c.last[d] = t.blockIndex(d, hi[d])
		c.cur[d] = c.first[d]
	}
	return nil
}

// Count is the number of blocks the patch touches (valid after Region).
func (c *Cursor) Count() int {
	k := 1
	for d := 0; d < c.n; d++ {
		k *= c.last[d] - c.first[d] + 1
	}
	return k
}

// Next moves to the next block and reports whether there is one.
func (c *Cursor) Next() bool {
	if c.t == nil || c.done {
		return false
	}
	if c.started {
		d := c.n - 1
		for ; d >= 0; d-- {
			if c.cur[d] < c.last[d] {
				c.cur[d]++
				break
			}
			c.cur[d] = c.first[d]
		}
		if d < 0 {
			c.done = true
			return false
		}
	}
	c.started = true
	t := c.t
	kb := 0
	for d := 0; d < c.n; d++ {
		k := c.cur[d]
		kb += k * t.gstride[d]
		c.bl[d], c.bh[d] = t.starts[d][k], t.starts[d][k+1]-1
		c.l[d], c.h[d] = max(c.lo[d], c.bl[d]), min(c.hi[d], c.bh[d])
	}
	c.Index = kb
	c.Rank = t.rankOf(t.ownerProc(&c.cur, kb))
	c.Base = t.place(&c.cur, kb, &c.sl, &c.sh)
	return true
}

// StoreLo is the first index of the current block's storage box: the row-major box, in array
// indices, that starts at element Base of the owner's storage and holds the block in place (the
// block itself except in the ScaLAPACK layout, where it is the owner's whole local matrix).
func (c *Cursor) StoreLo() []int { return c.sl[:c.n] }

// StoreHi is the last index (inclusive) of the current block's storage box.
func (c *Cursor) StoreHi() []int { return c.sh[:c.n] }

// BlockLo is the first index of the current owner's whole block.
func (c *Cursor) BlockLo() []int { return c.bl[:c.n] }

// BlockHi is the last index (inclusive) of the current owner's whole block.
func (c *Cursor) BlockHi() []int { return c.bh[:c.n] }

// Lo is the first index of the part of the patch in the current block.
func (c *Cursor) Lo() []int { return c.l[:c.n] }

// Hi is the last index (inclusive) of the part of the patch in the current block.
func (c *Cursor) Hi() []int { return c.h[:c.n] }

// ProcGrid returns the number of ranks along each dimension for a regular distribution of an
// array with the given extents over nproc ranks (GA's default process grid, ddb_h2 in GA's
// decomp.c). As GA's heuristic it deals the prime factors of nproc, largest first, to the
// dimensions; each factor goes to the dimension whose blocks are currently the longest
// (extent/ranks so far) among those that can still be cut that many times more, ties to the
// smaller division remainder and then to the lower dimension, so that ranks end up roughly
// proportional to the extents and blocks roughly square. If no dimension can take a factor, it
// goes to the longest dimension anyway; Regular then caps the grid at the extents and the ranks
// beyond the blocks own nothing. The product of the result is nproc.
func ProcGrid(extents []int, nproc int) []int {
	g := make([]int, len(extents))
	for d := range g {
		g[d] = 1
	}
	if len(extents) == 0 || nproc < 1 {
		return g
	}
	for _, f := range primeFactorsDesc(nproc) {
		best, bestFits, bestLen, bestRem := -1, false, 0, 0.0
		for d, e := range extents {
			fits := e >= f*g[d]
			blen := (e + g[d] - 1) / g[d]
			rem := float64(e%(f*g[d])) / float64(e)
			better := false
			switch {
			case best < 0:
				better = true
			case fits != bestFits:
				better = fits
			case blen != bestLen:
				better = blen > bestLen
			default:
				better = rem < bestRem
			}
			if better {
				best, bestFits, bestLen, bestRem = d, fits, blen, rem
			}
		}
		g[best] *= f
	}
	return g
}

// primeFactorsDesc lists the prime factors of n with repetition, largest first.
func primeFactorsDesc(n int) []int {
	var f []int
	for p := 2; p*p <= n; p++ {
		for n%p == 0 {
			f = append(f, p)
			n /= p
		}
	}
	if n > 1 {
		f = append(f, n)
	}
	for i, j := 0, len(f)-1; i < j; i, j = i+1, j-1 {
		f[i], f[j] = f[j], f[i]
	}
	return f
}
