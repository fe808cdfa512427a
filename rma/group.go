package rma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync/atomic"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/accum"
)

// Process groups (ARMCI groups, [ARMCI]: ARMCI_Group_create, ARMCI_Group_free,
// ARMCI_Group_rank, ARMCI_Group_size, ARMCI_Absolute_id, ARMCI_Malloc_group and the barrier and
// collectives of a group). A Group is an ordered subset of the runtime's ranks: group rank k is
// absolute rank Members()[k]. Every member holds a part of the group's own system segment
// (barrier flags and collective scratch, laid out as the runtime's: init.go), so the group's
// barrier and collectives run among its members only, on flag words and slots no other group and
// no world collective touches, and groups with disjoint members synchronize independently.
//
// Segments allocated on a group (Group.Malloc) are addressed like any segment, with absolute rank
// ids: a member's part is where the member asked, a non-member's part has 0 bytes (an access to
// it fails with ErrOutOfRange).

var (
	// ErrNotMember: a group call (Barrier, Malloc, AllReduce, Broadcast, Free) by a rank that is
	// not a member of the group; nothing is done.
	ErrNotMember = errors.New("rma: rank is not a member of the group")
	// ErrBadGroup: a bad member list at GroupCreate — empty, a rank listed twice, a rank out of
	// range (also ErrBadRank) — or ranks that passed different lists; every rank then fails and
	// nothing is allocated.
	ErrBadGroup = errors.New("rma: bad group member list")
)

// groupScratch is the collective scratch of a group's system segment per member, split into
// 2·Size slots of at least minSlot bytes (a quarter of the runtime's: groups are many and
// their collectives chunk the same way).
const groupScratch = 1 << 18

// Group is a process group of a runtime (an ARMCI group). Its methods must not be called
// concurrently with each other on one rank (as the runtime's own barrier and collectives).
type Group struct {
	rt        *Runtime
	members   []int    // group rank → absolute rank
	rankOf    []int32  // absolute rank → group rank, -1 for non-members
	me        int      // this rank's group rank, -1 outside the group
	sys       *Segment // barrier flags and collective scratch; nil outside the group
	barrierID uint64
	collStep  uint64      // collective steps so far: the scratch set of the next
	reduce    reduceState // the collectives' state on the group's scratch (collective.go)
	freed     atomic.Bool
}

// Exchange status byte of GroupCreate's and Group.Malloc's blobs (after allocFailed and
// allocNoSpace of Malloc).
const (
	partOK        byte = 0 // a part's descriptor follows
	partAbsent    byte = 3 // GroupCreate: not a member, no part
	partBadGroup  byte = 4 // GroupCreate: this rank rejected the member list
	groupHashSize      = 8
)

// GroupCreate creates a process group of the given ranks, in that order: group rank k is absolute
// rank ranks[k] (ARMCI_Group_create). It is collective over all ranks of the runtime, members and
// non-members alike, and every rank passes the same list; each member allocates its part of the
// group's system segment. Every rank gets a Group: a non-member's has Rank -1 and answers the
// queries (Size, Absolute, Member) but its collective calls fail with ErrNotMember.
//
// Errors: ErrBadGroup (an empty list, a rank listed twice, a rank out of range — that also wraps
// ErrBadRank —, or different lists on different ranks: every rank then fails), ErrNoSpace or
// ErrPeerAlloc (a member could not allocate its part: every rank fails), ErrFinalized, ctx's and
// the bootstrap's. Nothing is allocated on any rank when it fails.
func (r *Runtime) GroupCreate(ctx context.Context, ranks []int) (*Group, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	g := &Group{rt: r, members: slices.Clone(ranks), me: -1}
	verr := g.index()
	blob := make([]byte, groupHashSize, groupHashSize+1+16+4*len(r.nets))
	var part *Segment
	switch {
	case verr != nil:
		blob = append(blob, partBadGroup)
	case g.me < 0:
		binary.LittleEndian.PutUint64(blob, hashMembers(g.members))
		blob = append(blob, partAbsent)
	default:
		binary.LittleEndian.PutUint64(blob, hashMembers(g.members))
		n := len(g.members)
		slot := max(minSlot, (groupScratch/n)&^127)
		var err error
		if part, err = r.allocPart(flagBytes + slot*n); err != nil {
			blob = append(blob, allocCode(err))
			verr = fmt.Errorf("rma: GroupCreate: %w", err)
		} else {
			blob = append(blob, partOK)
			blob = appendDesc(blob, part)
		}
	}
	all, err := r.boot.AllGather(ctx, blob)
	if err != nil {
		releasePart(part)
		return nil, fmt.Errorf("rma: GroupCreate: %w", err)
	}
	if err := g.agree(all, verr); err != nil {
		releasePart(part)
		return nil, err
	}
	if g.me < 0 {
		return g, nil
	}
	descs := make([][]byte, len(g.members))
	for k, p := range g.members {
		descs[k] = all[p][groupHashSize:]
	}
	if err := g.finishPart(part, descs, "GroupCreate"); err != nil {
		return nil, err
	}
	g.sys = part
	g.reduce.doubling = r.reduceByDoubling(g)
	return g, nil
}

// index validates the member list and builds the absolute → group rank map and this rank's
// group rank. Errors: ErrBadGroup (with ErrBadRank for a rank out of range).
func (g *Group) index() error {
	r := g.rt
	if len(g.members) == 0 {
		return fmt.Errorf("rma: GroupCreate: %w: no members", ErrBadGroup)
	}
	rankOf := make([]int32, r.size)
	for i := range rankOf {
		rankOf[i] = -1
	}
	for k, p := range g.members {
		if p < 0 || p >= r.size {
			return fmt.Errorf("rma: GroupCreate: %w: %w: member %d is rank %d of %d", ErrBadGroup, ErrBadRank, k, p, r.size)
		}
		if rankOf[p] >= 0 {
			return fmt.Errorf("rma: GroupCreate: %w: rank %d listed twice (members %d and %d)", ErrBadGroup, p, rankOf[p], k)
		}
		rankOf[p] = int32(k)
	}
	g.rankOf = rankOf
	g.me = int(rankOf[r.rank])
	return nil
}

// agree checks GroupCreate's exchange: every rank accepted the same member list and every member
// has its part. verr is this rank's own error (its rejection of the list, or its failed
// allocation), returned in preference to what the others report.
func (g *Group) agree(all [][]byte, verr error) error {
	var rejected, differ, failed error
	h := hashMembers(g.members)
	for p, b := range all {
		if len(b) < groupHashSize+1 {
			return fmt.Errorf("rma: GroupCreate: rank %d sent %d bytes: %w", p, len(b), errBlob)
		}
		switch st := b[groupHashSize]; {
		case st == partBadGroup:
			if rejected == nil {
				rejected = fmt.Errorf("rma: GroupCreate: %w: rank %d rejected the member list", ErrBadGroup, p)
			}
		case binary.LittleEndian.Uint64(b) != h:
			if differ == nil {
				differ = fmt.Errorf("rma: GroupCreate: %w: ranks %d and %d passed different member lists", ErrBadGroup, g.rt.rank, p)
			}
		case st == allocNoSpace && failed == nil:
			failed = fmt.Errorf("rma: GroupCreate: rank %d has no shared memory for its part: %w", p, ErrNoSpace)
		case st == allocFailed && failed == nil:
			failed = fmt.Errorf("rma: GroupCreate: rank %d could not allocate its part: %w", p, ErrPeerAlloc)
		}
	}
	for _, err := range []error{verr, rejected, differ, failed} {
		if err != nil {
			return err
		}
	}
	for p, b := range all { // the lists agree: so does membership
		if (b[groupHashSize] == partAbsent) != (g.rankOf[p] < 0) {
			return fmt.Errorf("rma: GroupCreate: rank %d disagrees on its membership: %w", p, errBlob)
		}
	}
	return nil
}

// hashMembers digests a member list (FNV-1a of the ranks in order).
func hashMembers(members []int) uint64 {
	f := fnv.New64a()
	var b [8]byte
	for _, p := range members {
		binary.LittleEndian.PutUint64(b[:], uint64(p))
		f.Write(b[:])
	}
	return f.Sum64()
}

// allocPart allocates and registers this rank's part of a new segment of nbytes (not yet
// live: finishPart completes it).
func (r *Runtime) allocPart(nbytes int) (*Segment, error) {
	s := &Segment{rt: r, mrs: make([]*ibv.MR, len(r.nets))}
	r.segMu.Lock()
	s.id = r.nextSeg
	r.nextSeg++
	r.segMu.Unlock()
	if err := s.allocLocal(nbytes); err != nil {
		return nil, err
	}
	return s, nil
}

// releasePart gives back a part allocPart made (nil: none).
func releasePart(s *Segment) {
	if s != nil {
		_ = s.release()
	}
}

// allocCode is the status byte telling the other ranks this rank could not allocate its part.
func allocCode(err error) byte {
	if errors.Is(err, ErrNoSpace) {
		return allocNoSpace
	}
	return allocFailed
}

// appendDesc appends the descriptor of this rank's part of s (size, address, rkey per network:
// Malloc's exchange blob).
func appendDesc(b []byte, s *Segment) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s.local)))
	b = binary.LittleEndian.AppendUint64(b, addrOf(s.local))
	for _, mr := range s.mrs {
		b = binary.LittleEndian.AppendUint32(b, mr.RKey)
	}
	return b
}

// finishPart completes a segment allocated on the group from the members' blobs (by group rank:
// a status byte, then a descriptor): members' parts as described, non-members' parts empty.
// It makes the segment live, or releases this rank's part and fails (a member's failed
// allocation, a malformed blob).
func (g *Group) finishPart(s *Segment, blobs [][]byte, call string) error {
	r := g.rt
	s.remote = make([]remotePart, r.size)
	for p := range s.remote {
		s.remote[p].rkeys = make([]uint32, len(r.nets)) // an empty part: any access is out of range
	}
	fail := func(err error) error {
		_ = s.release()
		return fmt.Errorf("rma: %s: %w", call, err)
	}
	for k, b := range blobs {
		p := g.members[k]
		switch {
		case len(b) == 1 && b[0] == allocNoSpace:
			return fail(fmt.Errorf("rank %d has no shared memory for its part: %w", p, ErrNoSpace))
		case len(b) == 1:
			return fail(fmt.Errorf("rank %d could not allocate its part: %w", p, ErrPeerAlloc))
		case len(b) == 0 || b[0] != partOK:
			return fail(fmt.Errorf("rank %d sent %d bytes: %w", p, len(b), errBlob))
		}
		rp, ok := r.decodeDesc(b[1:])
		if !ok {
			return fail(fmt.Errorf("rank %d sent %d bytes: %w", p, len(b), errBlob))
		}
		s.remote[p] = rp
	}
	r.goLive(s)
	return nil
}

// Size is the number of members (ARMCI_Group_size).
func (g *Group) Size() int { return len(g.members) }

// Rank is this rank's group rank, in [0, Size), or -1 when it is not a member
// (ARMCI_Group_rank).
func (g *Group) Rank() int { return g.me }

// Absolute is the absolute rank (the runtime's) of group rank k (ARMCI_Absolute_id).
// Errors: ErrBadRank for k outside [0, Size).
func (g *Group) Absolute(k int) (int, error) {
	if k < 0 || k >= len(g.members) {
		return -1, fmt.Errorf("%w: group rank %d of %d", ErrBadRank, k, len(g.members))
	}
	return g.members[k], nil
}

// Member is the group rank of absolute rank p, or -1 when p is not a member (or not a rank).
func (g *Group) Member(p int) int {
	if p < 0 || p >= len(g.rankOf) {
		return -1
	}
	return int(g.rankOf[p])
}

// Members returns the absolute ranks of the members by group rank (a copy).
func (g *Group) Members() []int { return slices.Clone(g.members) }

// Runtime is the runtime the group belongs to.
func (g *Group) Runtime() *Runtime { return g.rt }

// usable checks that this rank may make a collective call of the group: the runtime is running,
// the group is not freed and this rank is a member. Errors: ErrFinalized, ErrFreed,
// ErrNotMember.
func (g *Group) usable(call string) error {
	if err := g.rt.check(); err != nil {
		return err
	}
	if g.freed.Load() {
		return fmt.Errorf("rma: %s: %w: the group was freed", call, ErrFreed)
	}
	if g.me < 0 {
		return fmt.Errorf("rma: %s: %w: rank %d is not among %v", call, ErrNotMember, g.rt.rank, g.members)
	}
	return nil
}

// Free releases the group (ARMCI_Group_free): collective over the members, it synchronizes them
// (Barrier) so none still uses the group, then gives back this rank's part of its system
// segment. Free the segments allocated on the group first: a segment of a freed group can no
// longer be freed (ErrFreed) and stays until Finalize. Errors: ErrNotMember, ErrFreed (freed
// twice), those of Barrier.
func (g *Group) Free(ctx context.Context) error {
	const call = "ARMCI_Group_free"
	if err := g.usable(call); err != nil {
		return err
	}
	if err := g.Barrier(ctx); err != nil {
		return fmt.Errorf("rma: %s: %w", call, err)
	}
	if !g.freed.CompareAndSwap(false, true) {
		return fmt.Errorf("rma: %s: %w: the group was freed", call, ErrFreed)
	}
	r := g.rt
	r.segMu.Lock()
	delete(r.live, g.sys.id)
	r.segMu.Unlock()
	g.sys.freed = true
	return g.sys.release()
}

// Barrier synchronizes the members (ARMCI_Barrier on a group, armci_msg_group_barrier after
// ARMCI_AllFence): it completes this rank's outstanding operations to every rank (AllFence, so
// whatever a member wrote anywhere before the barrier is seen by every member after it), then
// runs the RDMA dissemination barrier of Runtime.Barrier [Kini03 §3] among the members, on the
// flag words of the group's system segment. Collective over the members.
//
// Errors: ErrNotMember, ErrFreed, ErrPeerFailed (a member failed: the barrier cannot complete;
// the failure of a non-member does not concern it), ctx's, transport errors.
func (g *Group) Barrier(ctx context.Context) error {
	if err := g.usable("group barrier"); err != nil {
		return err
	}
	if err := g.rt.AllFence(ctx); err != nil {
		return err
	}
	return g.barrier(ctx)
}

// barrier is the dissemination barrier of the members (no fence): in round k group rank me
// writes the barrier id into flag k of group rank me+2^k and waits for group rank me−2^k's.
func (g *Group) barrier(ctx context.Context) error {
	if err := g.failedErr(); err != nil {
		return fmt.Errorf("rma: group barrier: %w", err)
	}
	n := len(g.members)
	if n == 1 {
		return nil
	}
	g.barrierID++
	id := g.barrierID
	for k, dist := 0, 1; dist < n; k, dist = k+1, dist*2 {
		to := g.members[(g.me+dist)%n]
		// posted to a network member, as the world's barrier (signal.go); reaped on return
		if err := g.rt.signalOn(ctx, g.sys, to, k, id); err != nil {
			return g.rt.reaped(ctx, fmt.Errorf("rma: group barrier round %d to rank %d: %w", k, to, err))
		}
		from := g.members[(g.me-dist+n)%n]
		if err := g.await(ctx, k, id, from); err != nil {
			return g.rt.reaped(ctx, fmt.Errorf("rma: group barrier round %d: waiting for rank %d: %w", k, from, err))
		}
	}
	return g.rt.reaped(ctx, nil)
}

// await polls this rank's group flag word slot until it holds id or more, written by rank from
// (probed while the wait is long, as Runtime.await), or until a member is declared failed.
func (g *Group) await(ctx context.Context, slot int, id uint64, from int) error {
	r := g.rt
	w := g.sys.local[8*slot : 8*slot+8]
	err := r.pollUntilProbe(ctx, func() bool {
		v, _ := accum.Load64(w)
		return v >= id || g.failedErr() != nil
	}, r.liveness(ctx, from))
	if v, _ := accum.Load64(w); err == nil && v < id {
		err = g.failedErr()
	}
	return err
}

// failedErr is the failure of the lowest failed member (group rank order), or nil.
func (g *Group) failedErr() error {
	if !g.rt.fail.any.Load() {
		return nil
	}
	for _, p := range g.members {
		if err := g.rt.failedErr(p); err != nil {
			return err
		}
	}
	return nil
}

// slot is the data area of group rank k's collective scratch slot in the group's system segment
// for the current step (two sets of Size slots used by alternate steps, each after its flag and
// guard words, as Runtime.slot).
func (g *Group) slot(k int) (int, int) {
	n := ((len(g.sys.local) - flagBytes) / (2 * len(g.members))) &^ 63
	set := int(g.collStep & 1)
	return flagBytes + (set*len(g.members)+k)*n + slotHead, n - slotHead
}

// The group's members and scratch, for AllReduce and AllGather (scratch).
func (g *Group) scratchMembers() (int, int) { return len(g.members), g.me }
func (g *Group) scratchRank(k int) int      { return g.members[k] }
func (g *Group) scratchSeg() *Segment       { return g.sys }
func (g *Group) scratchStep() *uint64       { return &g.collStep }

// spread puts part into slot[me] of every member k with to(k), then runs the group barrier.
func (g *Group) spread(ctx context.Context, part []byte, to func(k int) bool) error {
	off, _ := g.slot(g.me)
	var hs []*Handle
	var err error
	for k, p := range g.members {
		if !to(k) {
			continue
		}
		var h *Handle
		if h, err = g.rt.NbPut(ctx, part, g.sys, p, off); err != nil {
			break
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		if werr := h.Wait(ctx); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return fmt.Errorf("rma: group collective: %w", err)
	}
	return g.barrier(ctx)
}

// AllReduce combines buf element-wise across the members with op and leaves the result in every
// member's buf (armci_msg_group_gop, GA_Pgroup_dgop): Runtime.AllReduce among the members, on
// the group's scratch (flag words, no barrier); the result is identical on all of them.
// Collective over the members; buf has the same length on each.
//
// Errors: ErrNotMember, ErrFreed, ErrType, ErrBadOp (nothing is sent), ErrPeerFailed (a member
// failed), ctx's, transport errors.
func (g *Group) AllReduce(ctx context.Context, typ AccType, op ReduceOp, buf []byte) error {
	if err := g.usable("group all-reduce"); err != nil {
		return err
	}
	if err := checkReduce(typ, op, len(buf)); err != nil {
		return err
	}
	return g.rt.allReduce(ctx, g, &g.reduce, typ, op, buf)
}

// AllGather gathers the members' parts of buf into every member's buf: Runtime.AllGather among
// the members, on the group's scratch, with offs indexed by group rank (Size()+1 byte offsets;
// MPI_Allgatherv on a communicator). Collective over the members.
//
// Errors: ErrNotMember, ErrFreed, ErrOutOfRange (nothing is sent), ErrPeerFailed (a member
// failed), ctx's, transport errors.
func (g *Group) AllGather(ctx context.Context, buf []byte, offs []int) error {
	if err := g.usable("group all-gather"); err != nil {
		return err
	}
	if err := checkGather(len(g.members), buf, offs); err != nil {
		return err
	}
	return g.rt.allGather(ctx, g, &g.reduce, buf, offs)
}

// Broadcast copies the buf of group rank root into every member's buf (armci_msg_group_bcast,
// GA_Pgroup_brdcst). Collective over the members; buf has the same length on each.
//
// Errors: ErrNotMember, ErrFreed, ErrBadRank (root outside [0, Size): nothing is sent),
// ErrPeerFailed (a member failed), ctx's, transport errors.
func (g *Group) Broadcast(ctx context.Context, root int, buf []byte) error {
	if err := g.usable("group broadcast"); err != nil {
		return err
	}
	if root < 0 || root >= len(g.members) {
		return fmt.Errorf("rma: group broadcast: %w: root %d of a group of %d", ErrBadRank, root, len(g.members))
	}
	_, slot := g.slot(0)
	for start := 0; start < len(buf) || start == 0; start += slot {
		part := buf[start:min(len(buf), start+slot)]
		var err error
		if g.me == root {
			err = g.spread(ctx, part, func(k int) bool { return k != root })
		} else {
			err = g.barrier(ctx)
			o, _ := g.slot(root)
			copy(part, g.sys.local[o:o+len(part)])
		}
		if err != nil {
			return err
		}
		g.collStep++
		if len(buf) == 0 {
			break
		}
	}
	return nil
}

// allGather gives every member every member's blob, by group rank: each blob (at most a slot
// less 2 bytes) goes into the sender's slot of every member's scratch, then a group barrier.
func (g *Group) allGather(ctx context.Context, blob []byte) ([][]byte, error) {
	_, n := g.slot(0)
	if len(blob)+2 > n {
		return nil, fmt.Errorf("rma: group exchange of %d bytes: %w", len(blob), ErrOutOfRange)
	}
	msg := binary.LittleEndian.AppendUint16(make([]byte, 0, 2+len(blob)), uint16(len(blob)))
	msg = append(msg, blob...)
	if err := g.spread(ctx, msg, func(int) bool { return true }); err != nil {
		return nil, err
	}
	all := make([][]byte, len(g.members))
	for k := range g.members {
		o, _ := g.slot(k)
		l := int(binary.LittleEndian.Uint16(g.sys.local[o:]))
		if l > n-2 {
			return nil, fmt.Errorf("rma: group exchange: group rank %d sent %d bytes: %w", k, l, errBlob)
		}
		all[k] = slices.Clone(g.sys.local[o+2 : o+2+l])
	}
	g.collStep++
	return all, nil
}

// Malloc allocates a segment on the group (ARMCI_Malloc_group): collective over the members
// only; this member's part has nbytes bytes (0 allowed), page-aligned and zeroed. The parts'
// descriptors are exchanged among the members through the group's scratch (no other rank takes
// part). The segment is addressed with absolute ranks like any other; a non-member's part has 0
// bytes. Free is collective over the members.
//
// Errors: ErrNotMember, ErrFreed, ErrOutOfRange for a negative size (on this rank only: the call
// is not collective then), ErrNoSpace or ErrPeerAlloc when a member's part could not be
// allocated (every member fails, nothing stays allocated), ErrPeerFailed, ctx's, transport
// errors.
func (g *Group) Malloc(ctx context.Context, nbytes int) (*Segment, error) {
	const call = "ARMCI_Malloc_group"
	if err := g.usable(call); err != nil {
		return nil, err
	}
	if nbytes < 0 {
		return nil, fmt.Errorf("rma: %s: %w: %d bytes", call, ErrOutOfRange, nbytes)
	}
	s, aerr := g.rt.allocPart(nbytes)
	blob := []byte{partOK}
	if aerr != nil {
		blob[0] = allocCode(aerr)
	} else {
		blob = appendDesc(blob, s)
	}
	all, err := g.allGather(ctx, blob)
	if err == nil && aerr != nil {
		err = aerr
	}
	if err != nil {
		releasePart(s)
		return nil, fmt.Errorf("rma: %s: %w", call, err)
	}
	if err := g.finishPart(s, all, call); err != nil {
		return nil, err
	}
	s.grp = g
	return s, nil
}
