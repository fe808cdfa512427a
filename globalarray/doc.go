// Package globalarray is goarmci's Global Arrays (GA) layer: N-d arrays distributed in blocks
// over the ranks of an rma.Runtime, accessed by patches of global indices with one-sided
// Put/Get/Accumulate ([GA]).
//
// Conventions are those of GA's C interface (NGA_*): indices are 0-based, arrays and user
// buffers are row-major (the last dimension is contiguous), a patch is [lo, hi] with hi
// inclusive, and a user buffer is described by its leading dimensions ld (len = ndim-1, ld[d]
// being the buffer's extent along dimension d+1; nil means the patch is packed). Every public
// call names the GA call it mirrors.
//
// Each rank's block lives in one rma segment (ARMCI_Malloc); a patch operation issues one
// strided rma operation (ARMCI_NbPutS/NbGetS/NbAccS) per owner block the patch touches, all
// non-blocking, then waits for them, so the owners are served in parallel. The patch math is in
// globalarray/dist and allocates nothing per operation.
//
// Completion follows ARMCI ([ARMCI]): Put and Acc return when the
// buffer may be reused, Get when the data is in the buffer; Sync (GA_Sync = fence all + barrier)
// makes every rank's operations visible everywhere. The element-wise collectives (Fill, Zero,
// Scale, Copy, Dot, Add) synchronize on entry and exit, as GA's do.
//
// Process groups (Pgroup: PgroupCreate, PgroupSplit, World; GA_Pgroup_*) run collectives among
// their members, and an array created with OnGroup is distributed over a group's members only:
// its blocks are numbered by group rank (Pgroup.Absolute gives the rank of the runtime), and its
// collectives synchronize the members only, so arrays of disjoint groups run independently. A
// non-member's group calls fail with ErrNotMember.
//
// Bad input (a patch out of bounds or with lo > hi, a buffer too small, the wrong number of
// dimensions, an operation of the wrong element type, use after Destroy) returns an error
// wrapping ErrOutOfBounds, ErrShape, ErrType or ErrDestroyed and changes nothing: the whole
// request is validated before the first byte moves.
package globalarray
