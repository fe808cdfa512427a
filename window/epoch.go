package window

import (
	"fmt"
	"strings"
)

// Assert is the assert argument of the synchronization calls (MPI_MODE_*): hints that let the
// implementation skip synchronization. Unknown bits, or bits a call does not take, are ErrArg.
type Assert uint32

const (
	// ModeNoCheck (MPI_MODE_NOCHECK) for Post, Start, Lock and LockAll: the matching calls are
	// known to have happened (Post/Start), or no conflicting lock can be held (Lock/LockAll); the
	// grant flag and lock word are not touched. Post and Start must agree on it.
	ModeNoCheck Assert = 1 << iota
	// ModeNoStore (MPI_MODE_NOSTORE) for Fence and Post: the local window was not updated by
	// local stores since the last synchronization.
	ModeNoStore
	// ModeNoPut (MPI_MODE_NOPUT) for Fence and Post: the local window will not be updated by
	// Put or Accumulate until the next synchronization.
	ModeNoPut
	// ModeNoPrecede (MPI_MODE_NOPRECEDE) for Fence: the fence completes no operations (none were
	// issued since the last fence); must be given by every rank or none.
	ModeNoPrecede
	// ModeNoSucceed (MPI_MODE_NOSUCCEED) for Fence: no operations follow; the fence ends the
	// fence epoch instead of starting one. Must be given by every rank or none.
	ModeNoSucceed
)

const (
	fenceAsserts = ModeNoStore | ModeNoPut | ModeNoPrecede | ModeNoSucceed
	postAsserts  = ModeNoCheck | ModeNoStore | ModeNoPut
	startAsserts = ModeNoCheck
	lockAsserts  = ModeNoCheck
)

func (a Assert) String() string {
	if a == 0 {
		return "0"
	}
	var s []string
	for i, n := range []string{"NOCHECK", "NOSTORE", "NOPUT", "NOPRECEDE", "NOSUCCEED"} {
		if a&(1<<i) != 0 {
			s = append(s, n)
		}
	}
	if rest := a &^ (1<<5 - 1); rest != 0 {
		s = append(s, fmt.Sprintf("%#x", uint32(rest)))
	}
	return strings.Join(s, "|")
}

// LockType is the kind of a passive-target lock (MPI_LOCK_SHARED, MPI_LOCK_EXCLUSIVE).
type LockType uint8

const (
	LockShared    LockType = iota + 1 // MPI_LOCK_SHARED: any number of holders at once
	LockExclusive                     // MPI_LOCK_EXCLUSIVE: one holder, no shared holders
)

func (l LockType) String() string {
	switch l {
	case LockShared:
		return "shared"
	case LockExclusive:
		return "exclusive"
	case 0:
		return "none"
	}
	return fmt.Sprintf("LockType(%d)", uint8(l))
}

// Epochs is the pure epoch state machine of one window on one rank ([MPI-3.1] §11.5, the
// MPI-3 synchronization rules of MPI_Win_fence, MPI_Win_post/start/complete/wait,
// MPI_Win_lock/unlock, MPI_Win_lock_all/unlock_all and MPI_Win_flush*): which access epoch is
// open (none, fence, PSCW access to a group, per-target locks, lock_all), whether an exposure
// epoch (Post) is open and to which group, and which targets an operation may access.
//
// Every method checks its event first and changes the state only when it returns nil: misuse is
// an error wrapping ErrRMASync, ErrRMAConflict, ErrRank or ErrArg, and the state is as before. It
// starts no goroutine, reads no clock and does no I/O; the Window drives it around the network
// work (check, do the work, then commit with the same call).
//
// Rules beyond the obvious pairings: a fence without ModeNoSucceed opens a fence epoch that the
// next fence closes; until an operation is issued in it, Start, Post, Lock and LockAll may follow
// and end it (MPI: a fence starts an epoch only if RMA calls follow). Once an operation was
// issued in it, those are ErrRMAConflict, as is a Fence or Start during a passive-target epoch
// and a Lock/LockAll during Start. A rank may expose its window (Post) while it holds locks or a
// PSCW access epoch on others.
type Epochs struct {
	n int

	fence     bool // a fence epoch is open
	fenceUsed bool // an operation was issued in it

	start     bool // PSCW access epoch open
	startSet  []bool
	startList []int
	startBuf  []int // startList's storage, reused epoch after epoch (not shared by copyTo)
	post      bool  // PSCW exposure epoch open
	postSet   []bool
	postList  []int
	postBuf   []int // postList's storage, as startBuf

	locks   []LockType // per target, from Lock
	nLocks  int
	lockAll bool
}

// NewEpochs returns the machine of a window over n ranks, with no epoch open.
func NewEpochs(n int) *Epochs {
	return &Epochs{n: n, startSet: make([]bool, n), postSet: make([]bool, n), locks: make([]LockType, n)}
}

// Ranks is the number of ranks of the window.
func (e *Epochs) Ranks() int { return e.n }

// InFence reports whether a fence epoch is open.
func (e *Epochs) InFence() bool { return e.fence }

// Started returns the access group of the open PSCW access epoch (nil when none); do not modify
// it, nor keep it past the epoch (the next Start reuses its storage).
func (e *Epochs) Started() []int { return e.startList }

// Posted returns the exposure group of the open PSCW exposure epoch (nil when none), under
// Started's terms.
func (e *Epochs) Posted() []int { return e.postList }

// InStart reports whether a PSCW access epoch is open; InPost whether an exposure epoch is.
func (e *Epochs) InStart() bool { return e.start }

// InPost reports whether a PSCW exposure epoch (Post) is open.
func (e *Epochs) InPost() bool { return e.post }

// Locked is the lock this rank holds on target t by Lock (0 when none; LockAll is separate).
func (e *Epochs) Locked(t int) LockType {
	if t < 0 || t >= e.n {
		return 0
	}
	return e.locks[t]
}

// LockedAll reports whether a LockAll epoch is open.
func (e *Epochs) LockedAll() bool { return e.lockAll }

// Passive reports whether any passive-target epoch (Lock or LockAll) is open.
func (e *Epochs) Passive() bool { return e.nLocks > 0 || e.lockAll }

// Idle reports whether no epoch of any kind is open (a fence epoch with no operation counts as
// idle: Free may follow it).
func (e *Epochs) Idle() bool {
	return !e.fenceUsed && !e.start && !e.post && !e.Passive()
}

func (e *Epochs) String() string {
	var s []string
	if e.fence {
		s = append(s, fmt.Sprintf("fence(used=%v)", e.fenceUsed))
	}
	if e.start {
		s = append(s, fmt.Sprintf("start%v", e.startList))
	}
	if e.post {
		s = append(s, fmt.Sprintf("post%v", e.postList))
	}
	if e.lockAll {
		s = append(s, "lock_all")
	}
	for t, l := range e.locks {
		if l != 0 {
			s = append(s, fmt.Sprintf("lock(%d,%v)", t, l))
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

func checkAssert(call string, a, allowed Assert) error {
	if a&^allowed != 0 {
		return fmt.Errorf("%w: %s does not take assert %v", ErrArg, call, a&^allowed)
	}
	return nil
}

func (e *Epochs) checkRank(call string, t int) error {
	if uint(t) < uint(e.n) { // inlined: the error is built out of line
		return nil
	}
	return e.rankErr(call, t)
}

func (e *Epochs) rankErr(call string, t int) error {
	return fmt.Errorf("%w: %s target %d of %d ranks", ErrRank, call, t, e.n)
}

// checkGroup validates a PSCW group: ranks in range, none repeated.
func (e *Epochs) checkGroup(call string, group []int) error {
	for i, r := range group {
		if r < 0 || r >= e.n {
			return fmt.Errorf("%w: %s group has rank %d of %d", ErrArg, call, r, e.n)
		}
		for _, q := range group[:i] {
			if q == r {
				return fmt.Errorf("%w: %s group repeats rank %d", ErrArg, call, r)
			}
		}
	}
	return nil
}

// activeConflict is the check shared by the calls that open an active-target or passive epoch:
// a fence epoch with operations in it conflicts.
func (e *Epochs) fenceConflict(call string) error {
	if e.fence && e.fenceUsed {
		return fmt.Errorf("%w: %s inside a fence epoch with operations (close it with a fence)", ErrRMAConflict, call)
	}
	return nil
}

// Fence is MPI_Win_fence: it closes the fence epoch (if any) and, unless a has ModeNoSucceed,
// opens the next one. ErrRMAConflict during a PSCW or passive-target epoch; ErrRMASync for
// ModeNoPrecede when operations were issued since the last fence.
func (e *Epochs) Fence(a Assert) error {
	if err := checkAssert("Fence", a, fenceAsserts); err != nil {
		return err
	}
	if e.start || e.post {
		return fmt.Errorf("%w: Fence inside a PSCW epoch (%v)", ErrRMAConflict, e)
	}
	if e.Passive() {
		return fmt.Errorf("%w: Fence inside a passive-target epoch (%v)", ErrRMAConflict, e)
	}
	if a&ModeNoPrecede != 0 && e.fenceUsed {
		return fmt.Errorf("%w: Fence(NOPRECEDE) after operations in the fence epoch", ErrRMASync)
	}
	e.fence = a&ModeNoSucceed == 0
	e.fenceUsed = false
	return nil
}

// Start is MPI_Win_start: it opens a PSCW access epoch to group. ErrRMASync when one is open;
// ErrRMAConflict during a passive-target epoch or a fence epoch with operations.
func (e *Epochs) Start(group []int, a Assert) error {
	if err := checkAssert("Start", a, startAsserts); err != nil {
		return err
	}
	if err := e.checkGroup("Start", group); err != nil {
		return err
	}
	if e.start {
		return fmt.Errorf("%w: Start inside an access epoch (%v)", ErrRMASync, e)
	}
	if e.Passive() {
		return fmt.Errorf("%w: Start inside a passive-target epoch (%v)", ErrRMAConflict, e)
	}
	if err := e.fenceConflict("Start"); err != nil {
		return err
	}
	e.fence = false
	e.start = true
	e.startBuf = append(e.startBuf[:0], group...)
	e.startList = e.startBuf
	for _, r := range group {
		e.startSet[r] = true
	}
	return nil
}

// Complete is MPI_Win_complete: it closes the PSCW access epoch. ErrRMASync without Start.
func (e *Epochs) Complete() error {
	if !e.start {
		return fmt.Errorf("%w: Complete without Start (%v)", ErrRMASync, e)
	}
	e.start = false
	for _, r := range e.startList {
		e.startSet[r] = false
	}
	e.startList = nil
	return nil
}

// Post is MPI_Win_post: it opens an exposure epoch to group. ErrRMASync when one is open;
// ErrRMAConflict inside a fence epoch with operations.
func (e *Epochs) Post(group []int, a Assert) error {
	if err := checkAssert("Post", a, postAsserts); err != nil {
		return err
	}
	if err := e.checkGroup("Post", group); err != nil {
		return err
	}
	if e.post {
		return fmt.Errorf("%w: Post inside an exposure epoch (%v)", ErrRMASync, e)
	}
	if err := e.fenceConflict("Post"); err != nil {
		return err
	}
	e.fence = false
	e.post = true
	e.postBuf = append(e.postBuf[:0], group...)
	e.postList = e.postBuf
	for _, r := range group {
		e.postSet[r] = true
	}
	return nil
}

// Wait is MPI_Win_wait (and a successful MPI_Win_test): it closes the exposure epoch.
// ErrRMASync without Post.
func (e *Epochs) Wait() error {
	if !e.post {
		return fmt.Errorf("%w: Wait without Post (%v)", ErrRMASync, e)
	}
	e.post = false
	for _, r := range e.postList {
		e.postSet[r] = false
	}
	e.postList = nil
	return nil
}

// Lock is MPI_Win_lock: it opens a passive-target epoch to target t. ErrRMASync when t is
// already locked (by Lock or LockAll); ErrRMAConflict inside a PSCW access epoch or a fence
// epoch with operations; ErrArg for a bad lock type, ErrRank for a bad target.
func (e *Epochs) Lock(t int, l LockType, a Assert) error {
	if e.lockable(t, l, a) {
		e.locked(t, l)
		return nil
	}
	return e.lock(t, l, a)
}

// lockable is Lock's check of the usual case in one expression, with no call (the Window
// inlines it): valid arguments, t not locked, no LockAll, no PSCW access epoch, no fence epoch
// with operations. When it is false, lock reports why.
func (e *Epochs) lockable(t int, l LockType, a Assert) bool {
	return a&^lockAsserts == 0 && l-LockShared <= LockExclusive-LockShared && uint(t) < uint(len(e.locks)) &&
		e.locks[t] == 0 && !e.lockAll && !e.start && !(e.fence && e.fenceUsed)
}

// locked commits a Lock that lockable allowed.
func (e *Epochs) locked(t int, l LockType) {
	e.fence = false
	e.locks[t] = l
	e.nLocks++
}

// lock is Lock with its errors.
func (e *Epochs) lock(t int, l LockType, a Assert) error {
	if err := checkAssert("Lock", a, lockAsserts); err != nil {
		return err
	}
	if l != LockShared && l != LockExclusive {
		return fmt.Errorf("%w: lock type %v", ErrArg, l)
	}
	if err := e.checkRank("Lock", t); err != nil {
		return err
	}
	if e.locks[t] != 0 || e.lockAll {
		return fmt.Errorf("%w: nested lock of target %d (%v)", ErrRMASync, t, e)
	}
	if e.start {
		return fmt.Errorf("%w: Lock inside a PSCW access epoch (%v)", ErrRMAConflict, e)
	}
	if err := e.fenceConflict("Lock"); err != nil {
		return err
	}
	e.fence = false
	e.locks[t] = l
	e.nLocks++
	return nil
}

// Unlock is MPI_Win_unlock: it closes the passive-target epoch to t. ErrRMASync when t is not
// locked by Lock (a LockAll epoch is closed by UnlockAll only).
func (e *Epochs) Unlock(t int) error {
	if e.Locked(t) == 0 {
		return e.unlockErr(t)
	}
	e.unlocked(t)
	return nil
}

// unlocked commits an Unlock of a target locked by Lock (Locked(t) ≠ 0).
func (e *Epochs) unlocked(t int) {
	e.locks[t] = 0
	e.nLocks--
}

func (e *Epochs) unlockErr(t int) error {
	if err := e.checkRank("Unlock", t); err != nil {
		return err
	}
	return fmt.Errorf("%w: Unlock of target %d without Lock (%v)", ErrRMASync, t, e)
}

// LockAll is MPI_Win_lock_all: a shared passive-target epoch to every rank. ErrRMASync when a
// LockAll or any Lock is open (a nested lock); ErrRMAConflict as for Lock.
func (e *Epochs) LockAll(a Assert) error {
	if err := checkAssert("LockAll", a, lockAsserts); err != nil {
		return err
	}
	if e.lockAll || e.nLocks > 0 {
		return fmt.Errorf("%w: LockAll inside a passive-target epoch (%v)", ErrRMASync, e)
	}
	if e.start {
		return fmt.Errorf("%w: LockAll inside a PSCW access epoch (%v)", ErrRMAConflict, e)
	}
	if err := e.fenceConflict("LockAll"); err != nil {
		return err
	}
	e.fence = false
	e.lockAll = true
	return nil
}

// UnlockAll is MPI_Win_unlock_all. ErrRMASync without LockAll.
func (e *Epochs) UnlockAll() error {
	if !e.lockAll {
		return fmt.Errorf("%w: UnlockAll without LockAll (%v)", ErrRMASync, e)
	}
	e.lockAll = false
	return nil
}

// Flush checks MPI_Win_flush(t) / MPI_Win_flush_local(t): t must be in a passive-target epoch.
// It changes nothing.
func (e *Epochs) Flush(t int) error {
	if e.passiveTo(t) {
		return nil
	}
	return e.flushErr(t)
}

// passiveTo reports whether t is a rank with a passive-target epoch (Lock or LockAll) open to it.
func (e *Epochs) passiveTo(t int) bool {
	return uint(t) < uint(len(e.locks)) && (e.locks[t] != 0 || e.lockAll)
}

func (e *Epochs) flushErr(t int) error {
	if err := e.checkRank("Flush", t); err != nil {
		return err
	}
	return fmt.Errorf("%w: Flush of target %d outside a passive-target epoch to it (%v)", ErrRMASync, t, e)
}

// FlushAll checks MPI_Win_flush_all / MPI_Win_flush_local_all: a passive-target epoch must be
// open. It changes nothing.
func (e *Epochs) FlushAll() error {
	if !e.Passive() {
		return fmt.Errorf("%w: FlushAll outside a passive-target epoch (%v)", ErrRMASync, e)
	}
	return nil
}

// CheckAccess reports whether an operation (MPI_Put, MPI_Get, MPI_Accumulate, ...) to target t
// is allowed now, changing nothing: ErrRank for a bad target, ErrRMASync when no open access
// epoch covers t.
func (e *Epochs) CheckAccess(t int) error {
	if e.covers(t) {
		return nil
	}
	return e.accessErr(t)
}

// covers reports whether t is a rank an open access epoch covers (CheckAccess's nil), with no
// call: the Window inlines it.
func (e *Epochs) covers(t int) bool {
	return uint(t) < uint(len(e.locks)) && (e.locks[t] != 0 || e.lockAll || e.fence || e.start && e.startSet[t])
}

func (e *Epochs) accessErr(t int) error {
	if err := e.checkRank("operation", t); err != nil {
		return err
	}
	return fmt.Errorf("%w: operation to target %d outside an access epoch to it (%v)", ErrRMASync, t, e)
}

// Access commits an operation to t that CheckAccess allowed (it marks the fence epoch used).
func (e *Epochs) Access(t int) error {
	if err := e.CheckAccess(t); err != nil {
		return err
	}
	if e.fence {
		e.fenceUsed = true
	}
	return nil
}

// Free checks MPI_Win_free: no epoch may be open (a fence epoch without operations is fine).
// On success the machine is back to no epoch.
func (e *Epochs) Free() error {
	if !e.Idle() {
		return fmt.Errorf("%w: Free with an epoch open (%v)", ErrRMASync, e)
	}
	e.fence = false
	return nil
}

// copyTo makes c a copy of e (c's slices are reused; the group lists are shared, read-only,
// and each machine keeps its own storage for the next ones).
func (e *Epochs) copyTo(c *Epochs) {
	sets, posts, locks := c.startSet, c.postSet, c.locks
	sbuf, pbuf := c.startBuf, c.postBuf
	*c = *e
	c.startBuf, c.postBuf = sbuf, pbuf
	c.startSet = append(sets[:0], e.startSet...)
	c.postSet = append(posts[:0], e.postSet...)
	c.locks = append(locks[:0], e.locks...)
}
