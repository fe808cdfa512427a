package window

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// ev is one event for the table: a name for messages and the call.
type ev struct {
	name string
	do   func(e *Epochs) error
}

func fence(a Assert) ev {
	return ev{fmt.Sprintf("Fence(%v)", a), func(e *Epochs) error { return e.Fence(a) }}
}
func start(g ...int) ev {
	return ev{fmt.Sprintf("Start%v", g), func(e *Epochs) error { return e.Start(g, 0) }}
}
func post(g ...int) ev {
	return ev{fmt.Sprintf("Post%v", g), func(e *Epochs) error { return e.Post(g, 0) }}
}
func lock(t int, l LockType) ev {
	return ev{fmt.Sprintf("Lock(%d,%v)", t, l), func(e *Epochs) error { return e.Lock(t, l, 0) }}
}
func unlock(t int) ev {
	return ev{fmt.Sprintf("Unlock(%d)", t), func(e *Epochs) error { return e.Unlock(t) }}
}
func access(t int) ev {
	return ev{fmt.Sprintf("Access(%d)", t), func(e *Epochs) error { return e.Access(t) }}
}
func flush(t int) ev {
	return ev{fmt.Sprintf("Flush(%d)", t), func(e *Epochs) error { return e.Flush(t) }}
}

var (
	complete  = ev{"Complete", func(e *Epochs) error { return e.Complete() }}
	wait      = ev{"Wait", func(e *Epochs) error { return e.Wait() }}
	lockAll   = ev{"LockAll", func(e *Epochs) error { return e.LockAll(0) }}
	unlockAll = ev{"UnlockAll", func(e *Epochs) error { return e.UnlockAll() }}
	flushAll  = ev{"FlushAll", func(e *Epochs) error { return e.FlushAll() }}
	free      = ev{"Free", func(e *Epochs) error { return e.Free() }}
)

// snapshot copies the machine's state for the "misuse changes nothing" check.
func snapshot(e *Epochs) Epochs {
	c := *e
	c.startSet = slices.Clone(e.startSet)
	c.startList = slices.Clone(e.startList)
	c.postSet = slices.Clone(e.postSet)
	c.postList = slices.Clone(e.postList)
	c.locks = slices.Clone(e.locks)
	return c
}

func TestEpochMachine(t *testing.T) {
	cases := []struct {
		name string
		pre  []ev // must all succeed
		last ev
		err  error // nil: must succeed
	}{
		// operations need an access epoch covering the target
		{"op with no epoch", nil, access(1), ErrRMASync},
		{"op bad rank", []ev{fence(0)}, access(4), ErrRank},
		{"op bad rank negative", []ev{fence(0)}, access(-1), ErrRank},
		{"op in fence epoch", []ev{fence(0)}, access(3), nil},
		{"op after NOSUCCEED fence", []ev{fence(0), fence(ModeNoSucceed)}, access(1), ErrRMASync},
		{"op in start epoch, member", []ev{start(1, 2)}, access(2), nil},
		{"op in start epoch, not member", []ev{start(1, 2)}, access(3), ErrRMASync},
		{"op after complete", []ev{start(1), complete}, access(1), ErrRMASync},
		{"op under lock", []ev{lock(2, LockShared)}, access(2), nil},
		{"op to other target than locked", []ev{lock(2, LockShared)}, access(1), ErrRMASync},
		{"op under lock_all", []ev{lockAll}, access(0), nil},
		{"op after unlock", []ev{lock(2, LockExclusive), unlock(2)}, access(2), ErrRMASync},
		{"op with only exposure", []ev{post(1)}, access(1), ErrRMASync},

		// mismatched calls
		{"complete without start", nil, complete, ErrRMASync},
		{"wait without post", nil, wait, ErrRMASync},
		{"unlock without lock", nil, unlock(1), ErrRMASync},
		{"unlock other target", []ev{lock(1, LockShared)}, unlock(2), ErrRMASync},
		{"unlock under lock_all", []ev{lockAll}, unlock(1), ErrRMASync},
		{"unlock_all without lock_all", nil, unlockAll, ErrRMASync},
		{"unlock_all under lock", []ev{lock(1, LockShared)}, unlockAll, ErrRMASync},
		{"nested lock same target", []ev{lock(1, LockShared)}, lock(1, LockExclusive), ErrRMASync},
		{"lock under lock_all", []ev{lockAll}, lock(1, LockShared), ErrRMASync},
		{"lock_all under lock", []ev{lock(3, LockExclusive)}, lockAll, ErrRMASync},
		{"nested lock_all", []ev{lockAll}, lockAll, ErrRMASync},
		{"lock two targets", []ev{lock(1, LockExclusive)}, lock(2, LockShared), nil},
		{"nested start", []ev{start(1)}, start(2), ErrRMASync},
		{"nested post", []ev{post(1)}, post(2), ErrRMASync},
		{"noprecede after ops", []ev{fence(0), access(1)}, fence(ModeNoPrecede), ErrRMASync},
		{"noprecede without ops", []ev{fence(0)}, fence(ModeNoPrecede), nil},
		{"flush outside passive", []ev{fence(0)}, flush(1), ErrRMASync},
		{"flush other target", []ev{lock(1, LockShared)}, flush(2), ErrRMASync},
		{"flush locked target", []ev{lock(1, LockShared)}, flush(1), nil},
		{"flush under lock_all", []ev{lockAll}, flush(3), nil},
		{"flush_all outside passive", []ev{start(1)}, flushAll, ErrRMASync},
		{"flush_all under lock", []ev{lock(0, LockShared)}, flushAll, nil},
		{"free under lock", []ev{lock(0, LockShared)}, free, ErrRMASync},
		{"free in used fence epoch", []ev{fence(0), access(0)}, free, ErrRMASync},
		{"free after fence without ops", []ev{fence(0)}, free, nil},
		{"free in exposure", []ev{post(0)}, free, ErrRMASync},

		// conflicting epochs
		{"fence under lock", []ev{lock(1, LockShared)}, fence(0), ErrRMAConflict},
		{"fence under lock_all", []ev{lockAll}, fence(0), ErrRMAConflict},
		{"fence in start", []ev{start(1)}, fence(0), ErrRMAConflict},
		{"fence in post", []ev{post(1)}, fence(0), ErrRMAConflict},
		{"start under lock", []ev{lock(1, LockShared)}, start(1), ErrRMAConflict},
		{"lock in start", []ev{start(1)}, lock(2, LockShared), ErrRMAConflict},
		{"lock_all in start", []ev{start(1)}, lockAll, ErrRMAConflict},
		{"lock in used fence epoch", []ev{fence(0), access(1)}, lock(1, LockShared), ErrRMAConflict},
		{"start in used fence epoch", []ev{fence(0), access(1)}, start(1), ErrRMAConflict},
		{"post in used fence epoch", []ev{fence(0), access(1)}, post(1), ErrRMAConflict},
		{"lock after unused fence", []ev{fence(0)}, lock(1, LockShared), nil},
		{"start after unused fence", []ev{fence(0)}, start(1), nil},
		{"post while holding lock", []ev{lock(1, LockShared)}, post(1, 2), nil},
		{"post while started", []ev{start(1)}, post(1), nil},
		{"start while posted", []ev{post(2)}, start(1), nil},

		// bad arguments
		{"fence with NOCHECK", nil, ev{"Fence(NOCHECK)", func(e *Epochs) error { return e.Fence(ModeNoCheck) }}, ErrArg},
		{"start with NOPUT", nil, ev{"Start(NOPUT)", func(e *Epochs) error { return e.Start([]int{1}, ModeNoPut) }}, ErrArg},
		{"lock with NOSTORE", nil, ev{"Lock(NOSTORE)", func(e *Epochs) error { return e.Lock(1, LockShared, ModeNoStore) }}, ErrArg},
		{"lock bad type", nil, ev{"Lock(type 7)", func(e *Epochs) error { return e.Lock(1, 7, 0) }}, ErrArg},
		{"lock bad rank", nil, lock(4, LockShared), ErrRank},
		{"start group out of range", nil, start(1, 4), ErrArg},
		{"post group repeats", nil, post(1, 2, 1), ErrArg},
		{"unknown assert bit", nil, ev{"Fence(1<<9)", func(e *Epochs) error { return e.Fence(1 << 9) }}, ErrArg},
		{"empty groups", []ev{post()}, start(), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := NewEpochs(4)
			for _, p := range c.pre {
				require.NoError(t, p.do(e), "pre %s", p.name)
			}
			before := snapshot(e)
			err := c.last.do(e)
			if c.err == nil {
				require.NoError(t, err, c.last.name)
				return
			}
			require.ErrorIs(t, err, c.err, c.last.name)
			require.Equal(t, before, snapshot(e), "%s changed the state after an error", c.last.name)
		})
	}
}

// TestEpochSequences runs whole legal programs and checks the state on the way.
func TestEpochSequences(t *testing.T) {
	e := NewEpochs(3)
	require.True(t, e.Idle())
	require.NoError(t, e.Fence(ModeNoPrecede))
	require.True(t, e.InFence())
	require.NoError(t, e.Access(2))
	require.NoError(t, e.Fence(ModeNoStore|ModeNoPut))
	require.True(t, e.InFence())
	require.NoError(t, e.Access(0))
	require.NoError(t, e.Fence(ModeNoSucceed))
	require.False(t, e.InFence())
	require.True(t, e.Idle())

	// PSCW: both roles at once
	require.NoError(t, e.Post([]int{1, 2}, ModeNoCheck))
	require.NoError(t, e.Start([]int{2}, 0))
	require.Equal(t, []int{1, 2}, e.Posted())
	require.Equal(t, []int{2}, e.Started())
	require.NoError(t, e.Access(2))
	require.NoError(t, e.Complete())
	require.ErrorIs(t, e.Access(2), ErrRMASync)
	require.NoError(t, e.Wait())
	require.True(t, e.Idle())

	// passive target: locks on two targets, then lock_all
	require.NoError(t, e.Lock(1, LockExclusive, 0))
	require.NoError(t, e.Lock(2, LockShared, ModeNoCheck))
	require.Equal(t, LockExclusive, e.Locked(1))
	require.Equal(t, LockShared, e.Locked(2))
	require.Equal(t, LockType(0), e.Locked(0))
	require.NoError(t, e.Unlock(1))
	require.NoError(t, e.Unlock(2))
	require.NoError(t, e.LockAll(0))
	require.True(t, e.LockedAll())
	require.NoError(t, e.Access(0))
	require.NoError(t, e.FlushAll())
	require.NoError(t, e.UnlockAll())
	require.True(t, e.Idle())
	require.NoError(t, e.Free())
	require.Equal(t, "none", e.String())
}

func TestAssertString(t *testing.T) {
	require.Equal(t, "NOPRECEDE|NOSUCCEED", (ModeNoPrecede | ModeNoSucceed).String())
	require.Equal(t, "0", Assert(0).String())
	require.Equal(t, "NOCHECK|0x100", (ModeNoCheck | 1<<8).String())
}

// TestEpochFastChecks walks the machine through random events (valid and misused) and checks, in
// every state reached, that the call-free checks the Window inlines agree with the machine's full
// validation: lockable with lock (which reports every broken rule), covers with CheckAccess,
// passiveTo with Flush, Locked(t) ≠ 0 with Unlock; and that Lock's usual case (lockable, then
// locked) leaves the state lock leaves.
func TestEpochFastChecks(t *testing.T) {
	const n = 3
	rng := rand.New(rand.NewPCG(1, 2))
	events := []ev{fence(0), fence(ModeNoPrecede), fence(ModeNoSucceed), start(1), start(0, 2), post(1, 2),
		complete, wait, lockAll, unlockAll, free}
	for tg := -1; tg <= n; tg++ {
		events = append(events, lock(tg, LockShared), lock(tg, LockExclusive), unlock(tg), access(tg), flush(tg))
	}
	e := NewEpochs(n)
	states := 0
	for step := 0; step < 3000; step++ {
		_ = events[rng.IntN(len(events))].do(e)
		for tg := -1; tg <= n; tg++ {
			require.Equal(t, e.CheckAccess(tg) == nil, e.covers(tg), "covers(%d) in %v", tg, e)
			require.Equal(t, e.Flush(tg) == nil, e.passiveTo(tg), "passiveTo(%d) in %v", tg, e)
			u := snapshot(e)
			require.Equal(t, u.Unlock(tg) == nil, e.Locked(tg) != 0, "Unlock(%d) in %v", tg, e)
			for _, l := range []LockType{0, LockShared, LockExclusive, 3} {
				for _, a := range []Assert{0, ModeNoCheck, ModeNoStore} {
					slow, fast := snapshot(e), snapshot(e)
					err := slow.lock(tg, l, a)
					require.Equal(t, err == nil, fast.lockable(tg, l, a), "lockable(%d, %v, %v) in %v: lock says %v", tg, l, a, e, err)
					if err == nil {
						fast.locked(tg, l)
						require.Equal(t, slow, fast, "Lock(%d, %v, %v) in %v", tg, l, a, e)
						states++
					}
				}
			}
		}
	}
	require.Positive(t, states, "no state allowed a Lock")
}
