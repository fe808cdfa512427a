package ibv

import (
	"fmt"
	"unsafe"
)

// RegMR registers buf with the given access (ibv_reg_mr). buf must be non-empty; remote write or
// atomic access requires AccessLocalWrite, as in verbs. The memory must stay referenced (it is,
// by the MR) and must not be moved: Go's heap is non-moving, and mmap'd memory is always fine.
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("%w: RegMR of an empty buffer", ErrInvalidArgument)
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return nil, fmt.Errorf("%w: remote write/atomic access requires local write", ErrInvalidArgument)
	}
	if access&^AccessAll != 0 {
		return nil, fmt.Errorf("%w: unknown access flags %#x", ErrInvalidArgument, uint32(access))
	}
	c := pd.ctx
	if c.closed.Load() {
		return nil, ErrClosed
	}
	mr := &MR{ctx: c, pd: pd, buf: buf, Length: uint64(len(buf)), Access: access,
		Addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))}
	c.mu.Lock()
	mr.LKey = c.newKeyLocked()
	mr.RKey = c.newKeyLocked()
	c.mrs.put(mr)
	c.mu.Unlock()
	if err := c.drv.RegMR(mr); err != nil {
		c.mu.Lock()
		c.mrs.del(mr)
		c.mu.Unlock()
		return nil, fmt.Errorf("ibv: RegMR: %w", err)
	}
	pd.refs.Add(1)
	return mr, nil
}
