//go:build linux

package shm

import (
	"fmt"
	"sync/atomic"

	"github.com/goarmci/goarmci/ibv"
)

// MapRemote implements ibv.DirectMapper: the access is checked as every request's is
// (remoteLocked: responder QP, rkey, access flags, bounds) and the region's bytes are returned
// through this process's mapping of the peer's shared buffer, with a mapping reference of
// their own, so that a caller copies into or out of them without a work request: the
// load/store path of intra-node one-sided operations (a one-copy path into mapped memory is
// what the MPI and ARMCI implementations use on a node). Regions reached only by cross-memory
// attach have no mapping: ErrUnsupported.
func (q *qpDrv) MapRemote(rkey uint32, addr, length uint64, need ibv.Access) ([]byte, *atomic.Uint32, func(), error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return nil, nil, nil, ibv.ErrClosed
	}
	r, st, vendor := q.remoteLocked(rkey, addr, length, need)
	if st != ibv.WCSuccess {
		var err error
		switch vendor {
		case VendorRKey:
			err = ibv.ErrInvalidKey
		case VendorBounds:
			err = ibv.ErrOutOfBounds
		case VendorResponder:
			err = ibv.ErrUnreachable
		default:
			err = ibv.ErrAccess
		}
		return nil, nil, nil, fmt.Errorf("shm: MapRemote rkey %#x [%#x,+%d): %v: %w", rkey, addr, length, st, err)
	}
	if r.mem == nil {
		return nil, nil, nil, fmt.Errorf("shm: MapRemote rkey %#x: region not in a shared buffer: %w", rkey, ibv.ErrUnsupported)
	}
	off := addr - r.vaddr
	mem := r.mem[off : off+length : off+length]
	release := func() {}
	if r.bm != nil {
		p, bm := r.peer, r.bm
		p.mu.Lock()
		bm.refs++
		p.mu.Unlock()
		release = func() { p.release(bm) }
	}
	return mem, &r.slot.acc, release, nil
}
