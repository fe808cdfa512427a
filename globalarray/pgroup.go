package globalarray

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/rma"
)

// Process groups ([GA]: GA_Pgroup_create, GA_Pgroup_split, GA_Pgroup_destroy, GA_Pgroup_sync,
// GA_Pgroup_nodeid, GA_Pgroup_nnodes, GA_Pgroup_absolute_id, GA_Pgroup_dgop, GA_Pgroup_brdcst,
// GA_Pgroup_get_world, and arrays created on a group: GA_Set_pgroup / NGA_Create_config).
//
// A Pgroup is an ordered subset of a runtime's ranks on an rma.Group (ARMCI groups). An array
// created on a group (the OnGroup option) is distributed over the group's members only: its
// blocks are numbered by group rank, block k lives on absolute rank pg.Absolute(k), and its
// collectives (Sync, Fill, Copy, Dot, ...) synchronize and reduce among the members only, so
// arrays of disjoint groups run independently. Ranks that arrays of a group report (Locate,
// LocateRegion, Distribution) are group ranks, as in GA. Only members create and hold a group's
// arrays; a non-member's group calls fail with ErrNotMember and change nothing.

// ErrNotMember: a call on a process group (or on an array of one) by a rank that is not a member
// of the group; nothing is done (rma.ErrNotMember).
var ErrNotMember = rma.ErrNotMember

// Pgroup is a process group of GA (a group handle): the world group of a runtime (World) or a
// subset of its ranks (PgroupCreate, PgroupSplit).
type Pgroup struct {
	rt *rma.Runtime
	g  *rma.Group // nil: every rank of rt, in rank order
}

// World is the group of every rank of rt, group rank = rank (GA_Pgroup_get_world); arrays
// created without OnGroup live on it.
func World(rt *rma.Runtime) *Pgroup { return &Pgroup{rt: rt} }

// PgroupCreate creates a process group of the given ranks of rt, in that order: group rank k is
// rank ranks[k] (GA_Pgroup_create). Collective over every rank of rt (members and non-members),
// each passing the same list; a non-member gets a group whose NodeID is -1.
//
// Errors: rma.ErrBadGroup (empty list, duplicate, out of range — also rma.ErrBadRank —, lists
// that differ between ranks; every rank fails, nothing is allocated), those of
// rma.Runtime.GroupCreate.
func PgroupCreate(ctx context.Context, rt *rma.Runtime, ranks []int) (*Pgroup, error) {
	g, err := rt.GroupCreate(ctx, ranks)
	if err != nil {
		return nil, fmt.Errorf("ga: GA_Pgroup_create: %w", err)
	}
	return &Pgroup{rt: rt, g: g}, nil
}

// PgroupSplit splits the ranks of rt into n groups of consecutive ranks and returns the group of
// this rank (GA_Pgroup_split): group i holds ranks [i·P/n, (i+1)·P/n) of the P ranks (sizes
// differ by at most one). Collective over every rank of rt, each passing the same n.
//
// Errors: ErrShape for n outside [1, P] (on every rank: nothing is created), ErrMismatch when
// ranks passed different n; those of PgroupCreate.
func PgroupSplit(ctx context.Context, rt *rma.Runtime, n int) (*Pgroup, error) {
	const call = "GA_Pgroup_split"
	np := rt.Size()
	var err error
	if n < 1 || n > np {
		err = fmt.Errorf("%w: %d groups of %d ranks", ErrShape, n, np)
	}
	if aerr := agree(ctx, rt, int64(n), err != nil); err == nil && aerr != nil {
		err = aerr
	}
	if err != nil {
		return nil, fmt.Errorf("ga: %s: %w", call, err)
	}
	var mine *Pgroup
	for i := 0; i < n; i++ {
		ranks := make([]int, 0, np/n+1)
		for p := i * np / n; p < (i+1)*np/n; p++ {
			ranks = append(ranks, p)
		}
		pg, err := PgroupCreate(ctx, rt, ranks)
		if err != nil {
			if mine != nil {
				_ = mine.Destroy(ctx)
			}
			return nil, fmt.Errorf("ga: %s: %w", call, err)
		}
		if pg.NodeID() >= 0 {
			mine = pg
		}
	}
	return mine, nil
}

// Runtime is the runtime the group's ranks belong to.
func (pg *Pgroup) Runtime() *rma.Runtime { return pg.rt }

// NodeID is this rank's rank in the group, or -1 when it is not a member (GA_Pgroup_nodeid).
func (pg *Pgroup) NodeID() int {
	if pg.g == nil {
		return pg.rt.Rank()
	}
	return pg.g.Rank()
}

// Nnodes is the number of members (GA_Pgroup_nnodes).
func (pg *Pgroup) Nnodes() int {
	if pg.g == nil {
		return pg.rt.Size()
	}
	return pg.g.Size()
}

// Absolute is the rank of rt of group rank k (GA_Pgroup_absolute_id).
//
// Errors: rma.ErrBadRank for k outside [0, Nnodes).
func (pg *Pgroup) Absolute(k int) (int, error) {
	if pg.g == nil {
		if k < 0 || k >= pg.rt.Size() {
			return -1, fmt.Errorf("ga: GA_Pgroup_absolute_id: %w: %d of %d", rma.ErrBadRank, k, pg.rt.Size())
		}
		return k, nil
	}
	p, err := pg.g.Absolute(k)
	if err != nil {
		return -1, fmt.Errorf("ga: GA_Pgroup_absolute_id: %w", err)
	}
	return p, nil
}

// Members returns the ranks of rt of the members, by group rank.
func (pg *Pgroup) Members() []int {
	if pg.g == nil {
		m := make([]int, pg.rt.Size())
		for i := range m {
			m[i] = i
		}
		return m
	}
	return pg.g.Members()
}

// Destroy frees the group (GA_Pgroup_destroy): collective over the members; destroy the group's
// arrays first. The world group cannot be destroyed.
//
// Errors: ErrNotMember, ErrShape (the world group); those of rma.Group.Free.
func (pg *Pgroup) Destroy(ctx context.Context) error {
	if pg.g == nil {
		return fmt.Errorf("ga: GA_Pgroup_destroy: %w: the world group", ErrShape)
	}
	if err := pg.g.Free(ctx); err != nil {
		return fmt.Errorf("ga: GA_Pgroup_destroy: %w", err)
	}
	return nil
}

// Sync completes this rank's outstanding operations and synchronizes the members
// (GA_Pgroup_sync; GA_Sync on the world group). Collective over the members.
//
// Errors: ErrNotMember; those of rma.Group.Barrier (a failed member, context, transport).
func (pg *Pgroup) Sync(ctx context.Context) error {
	if err := pg.barrier(ctx); err != nil {
		return fmt.Errorf("ga: GA_Pgroup_sync: %w", err)
	}
	return nil
}

// PgroupGop replaces vals on every member by their element-wise reduction with op over the
// members (GA_Pgroup_dgop, GA_Pgroup_igop, GA_Pgroup_lgop, GA_Pgroup_fgop, GA_Pgroup_zgop; op
// rma.ReduceSum is "+", ReduceMax "max", ...). Collective over the members.
//
// Errors: ErrNotMember, ErrType (an op other than sum or product of complex values), rma.ErrBadOp;
// those of rma.Group.AllReduce. vals is unchanged on an error found before any exchange.
func PgroupGop[T Elem](ctx context.Context, pg *Pgroup, op rma.ReduceOp, vals []T) error {
	return gopOn(ctx, pg, "GA_Pgroup_gop", op, vals)
}

// PgroupBrdcst copies buf of group rank root into buf of every other member (GA_Pgroup_brdcst).
// Collective over the members; buf has the same length on each.
//
// Errors: ErrNotMember, rma.ErrBadRank (root outside the group); those of rma.Group.Broadcast.
func PgroupBrdcst[T Elem](ctx context.Context, pg *Pgroup, root int, buf []T) error {
	if err := pg.broadcast(ctx, root, asBytes(buf)); err != nil {
		return fmt.Errorf("ga: GA_Pgroup_brdcst from %d: %w", root, err)
	}
	return nil
}

// OnGroup creates the array on process group pg (GA_Set_pgroup before GA_Allocate, or
// NGA_Create_config): the distribution is over pg's members (block k on group rank k), Create
// is collective over the members only and a non-member's Create fails with ErrNotMember.
// OnGroup(nil) and OnGroup(World(rt)) are the default.
func OnGroup(pg *Pgroup) Option { return func(o *options) { o.pg = pg } }

// Pgroup is the group the array lives on (GA_Get_pgroup; World for an array created without
// OnGroup).
func (a *Array[T]) Pgroup() *Pgroup { return a.pg }

// same reports whether pg and q are the same group of the same runtime.
func (pg *Pgroup) same(q *Pgroup) bool { return pg.rt == q.rt && pg.g == q.g }

// member checks that this rank is a member (ErrNotMember).
func (pg *Pgroup) member() error {
	if pg.g != nil && pg.g.Rank() < 0 {
		return fmt.Errorf("%w: rank %d is not among %v", ErrNotMember, pg.rt.Rank(), pg.g.Members())
	}
	return nil
}

// barrier is ARMCI_Barrier on the group (the world's for the world group).
func (pg *Pgroup) barrier(ctx context.Context) error {
	if pg.g == nil {
		return pg.rt.Barrier(ctx)
	}
	return pg.g.Barrier(ctx)
}

// allReduce is rma's AllReduce on the group.
func (pg *Pgroup) allReduce(ctx context.Context, typ rma.AccType, op rma.ReduceOp, buf []byte) error {
	if pg.g == nil {
		return pg.rt.AllReduce(ctx, typ, op, buf)
	}
	return pg.g.AllReduce(ctx, typ, op, buf)
}

// broadcast is rma's Broadcast on the group from group rank root.
func (pg *Pgroup) broadcast(ctx context.Context, root int, buf []byte) error {
	if pg.g == nil {
		return pg.rt.Broadcast(ctx, root, buf)
	}
	return pg.g.Broadcast(ctx, root, buf)
}

// malloc is ARMCI_Malloc (ARMCI_Malloc_group on a group).
func (pg *Pgroup) malloc(ctx context.Context, n int) (*rma.Segment, error) {
	if pg.g == nil {
		return pg.rt.Malloc(ctx, n)
	}
	return pg.g.Malloc(ctx, n)
}
