package ibv

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
)

// MR is a registered memory region (struct ibv_mr). Its memory is Buf; remote peers address it by
// virtual address in [Addr, Addr+Length) with RKey, local work requests with LKey.
type MR struct {
	ctx    *Context
	pd     *PD
	buf    []byte
	Addr   uint64
	Length uint64
	LKey   uint32
	RKey   uint32
	Access Access
	dead   atomic.Bool
}

// Buf is the registered memory.
func (mr *MR) Buf() []byte { return mr.buf }

// PD is the protection domain mr belongs to.
func (mr *MR) PD() *PD { return mr.pd }

// SGE returns the scatter/gather element for n bytes at byte offset off of the region.
func (mr *MR) SGE(off, n int) SGE {
	return SGE{Addr: mr.Addr + uint64(off), Length: uint32(n), LKey: mr.LKey}
}

// Slice returns the n bytes at virtual address addr, or ErrOutOfBounds.
func (mr *MR) Slice(addr uint64, n uint64) ([]byte, error) {
	if addr < mr.Addr || n > mr.Length || addr-mr.Addr > mr.Length-n {
		return nil, fmt.Errorf("%w: [%#x,+%d) not in [%#x,+%d)", ErrOutOfBounds, addr, n, mr.Addr, mr.Length)
	}
	off := addr - mr.Addr
	return mr.buf[off : off+n : off+n], nil
}

// Dereg deregisters the region (ibv_dereg_mr). Later remote accesses with its rkey fail with
// WCRemAccessErr at the origin.
func (mr *MR) Dereg() error {
	if !mr.dead.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: MR already deregistered", ErrInvalidArgument)
	}
	c := mr.ctx
	c.mu.Lock()
	c.mrs.del(mr)
	c.mu.Unlock()
	mr.pd.refs.Add(-1)
	return c.drv.DeregMR(mr)
}

// mrTable maps keys to regions. Lookups are on the data path: they read an immutable snapshot
// without locking; updates (rare) copy it under the context lock.
type mrTable struct {
	lkeys atomic.Pointer[map[uint32]*MR]
	rkeys atomic.Pointer[map[uint32]*MR]
}

func (t *mrTable) put(mr *MR) {
	t.lkeys.Store(cloneWith(t.lkeys.Load(), mr.LKey, mr))
	t.rkeys.Store(cloneWith(t.rkeys.Load(), mr.RKey, mr))
}

func (t *mrTable) del(mr *MR) {
	t.lkeys.Store(cloneWith(t.lkeys.Load(), mr.LKey, nil))
	t.rkeys.Store(cloneWith(t.rkeys.Load(), mr.RKey, nil))
}

func cloneWith(m *map[uint32]*MR, k uint32, v *MR) *map[uint32]*MR {
	n := make(map[uint32]*MR, 8)
	if m != nil {
		for kk, vv := range *m {
			n[kk] = vv
		}
	}
	if v == nil {
		delete(n, k)
	} else {
		n[k] = v
	}
	return &n
}

func lookup(p *map[uint32]*MR, k uint32) *MR {
	if p == nil {
		return nil
	}
	return (*p)[k]
}

// newKeyLocked returns a fresh key: an index in the high 24 bits and a random tag in the low 8,
// as HCAs do, so a stale or guessed key is unlikely to name a live region.
func (c *Context) newKeyLocked() uint32 {
	c.keyIndex++
	return c.keyIndex<<8 | uint32(rand.IntN(256))
}
