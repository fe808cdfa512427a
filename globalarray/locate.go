package globalarray

import (
	"fmt"

	"github.com/goarmci/goarmci/globalarray/dist"
)

// LocateBlock returns the number of the block holding the element at subscript (NGA_Locate on
// a block-cyclic array, which reports block indices; Locate gives the owning rank). With one
// block per rank it is the block's position among the owners.
//
// Errors: ErrShape, ErrOutOfBounds.
func (a *Array[T]) LocateBlock(subscript []int) (int, error) {
	k, err := a.d.LocateBlock(subscript)
	if err != nil {
		return -1, fmt.Errorf("ga: NGA_Locate %q: %w", a.name, err)
	}
	return k, nil
}

// LocateNumBlocks returns the number of blocks the patch [lo, hi] touches (NGA_Locate_num_blocks,
// NGA_Locate_nnodes): the length of LocateRegion's answer. LocateRegion lists them in
// row-major block order; LocateBlock of a part's Lo gives its block number.
//
// Errors: ErrShape, ErrOutOfBounds.
func (a *Array[T]) LocateNumBlocks(lo, hi []int) (int, error) {
	var c dist.Cursor
	if err := a.d.Region(lo, hi, &c); err != nil {
		return 0, fmt.Errorf("ga: NGA_Locate_num_blocks %q: %w", a.name, err)
	}
	return c.Count(), nil
}
