package ibv

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// DirectMapper is implemented by QP drivers whose responder memory is reachable by this
// process's loads and stores (the shm provider maps its peers' registered buffers). MapRemote
// checks an access to [addr, addr+length) under rkey as a responder would (responder QP,
// key, access flags, bounds) and returns the bytes through this process's mapping, with a
// release function that gives back the mapping reference it holds. It returns an error
// wrapping ErrUnsupported when the region is not mapped (memory reached by cross-memory
// attach), ErrInvalidKey, ErrAccess or ErrOutOfBounds for a bad access, ErrUnreachable when
// the responder QP does not accept requests. acc is the region's accumulate lock word, the one
// every accumulate into the region takes whoever executes it (nil when the provider has none:
// accumulates then keep work requests).
type DirectMapper interface {
	MapRemote(rkey uint32, addr, length uint64, need Access) (mem []byte, acc *atomic.Uint32, release func(), err error)
}

// RemoteView is a load/store view of a checked remote region: Mem is the target's bytes
// [addr, addr+length), exactly length of them, through this process's mapping (the one-copy
// path of an intra-node RDMA write or read, done by the caller with copy). Holding a view keeps
// the mapping alive; Release gives it back (the view must not be used afterwards). A view sees
// the remote memory itself: it bypasses the send queue, so a caller that also posts work
// requests on the QP orders them itself (the shm provider executes every request inside the
// post while the QP is in RTS, so there every request posted before a use of the view has been
// applied; see Usable).
type RemoteView struct {
	Mem []byte
	// Acc is the region's accumulate lock word (a spin lock: 0 free, 1 held, in memory every
	// process reaching the region maps): an accumulate through the view holds it while it adds,
	// as the provider does for accumulate work requests into the region from any process
	// (internal/accum.ApplyLocked). nil: accumulate through work requests.
	Acc     *atomic.Uint32
	qp      *QP
	release func()
	once    sync.Once
}

// MapRemote returns a view of the responder's region [addr, addr+length) under rkey, checked
// for the access need (AccessRemoteWrite, AccessRemoteRead or both), on providers that
// implement DirectMapper (CanMapRemote). The QP must be in RTS. Errors: ErrUnsupported (no
// direct mapping), ErrInvalidState, ErrClosed, and the access errors of DirectMapper. Nothing
// is changed by a failed call.
func (qp *QP) MapRemote(rkey uint32, addr, length uint64, need Access) (*RemoteView, error) {
	dm, ok := qp.drv.(DirectMapper)
	if !ok {
		return nil, fmt.Errorf("ibv: MapRemote: %w", ErrUnsupported)
	}
	if qp.dead.Load() {
		return nil, ErrClosed
	}
	if st := qp.State(); st != StateRTS {
		return nil, fmt.Errorf("%w: MapRemote in %v", ErrInvalidState, st)
	}
	mem, acc, release, err := dm.MapRemote(rkey, addr, length, need)
	if err != nil {
		return nil, err
	}
	if uint64(len(mem)) < length {
		if release != nil {
			release()
		}
		return nil, fmt.Errorf("%w: MapRemote gave %d of %d bytes", ErrOutOfBounds, len(mem), length)
	}
	return &RemoteView{Mem: mem[:length:length], Acc: acc, qp: qp, release: release}, nil
}

// CanMapRemote reports whether the provider gives direct views of remote memory (MapRemote).
func (qp *QP) CanMapRemote() bool {
	_, ok := qp.drv.(DirectMapper)
	return ok
}

// Usable reports whether the view may be used now in program order with the QP's work
// requests: the QP is alive and in RTS (a QP in SQD holds queued requests; one in ERROR has
// failed).
func (v *RemoteView) Usable() bool {
	return !v.qp.dead.Load() && v.qp.State() == StateRTS
}

// Release gives back the view's mapping reference; later calls do nothing.
func (v *RemoteView) Release() {
	v.once.Do(func() {
		if v.release != nil {
			v.release()
		}
		v.Mem = nil
	})
}
