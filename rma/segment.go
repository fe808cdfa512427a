package rma

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/goarmci/goarmci/ibv"
)

// Segment is collectively allocated memory: every rank owns a part (possibly of a different
// size, possibly empty) that every rank can access with Put/Get/Acc/Rmw (ARMCI_Malloc's array
// of remote pointers, as a value).
type Segment struct {
	rt     *Runtime
	id     int
	local  []byte
	free   func() error
	mrs    []*ibv.MR // per network
	remote []remotePart
	views  []atomic.Pointer[ibv.RemoteView] // per rank: load/store view of a same-node part (direct.go)
	freed  bool
	grp    *Group // allocated on a group (Group.Malloc), or nil: the whole runtime
}

type remotePart struct {
	addr  uint64
	size  int
	rkeys []uint32 // per network
}

// Malloc's one-byte exchange blob of a rank whose part could not be allocated.
const (
	allocFailed  byte = 1
	allocNoSpace byte = 2
)

// pageSize is the allocation granule of segments.
const pageSize = 4096

// Malloc allocates a segment (ARMCI_Malloc): collective; this rank's part has nbytes bytes
// (0 allowed), page-aligned and zeroed. Errors wrap ErrOutOfRange for a negative size (on this
// rank only: the call is not collective then), ErrNoSpace when shared memory for a part is
// refused on this or another rank (every rank fails), ErrPeerAlloc when another rank's part failed
// otherwise, or the lower layer's error.
func (r *Runtime) Malloc(ctx context.Context, nbytes int) (*Segment, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if nbytes < 0 {
		return nil, fmt.Errorf("%w: Malloc of %d bytes", ErrOutOfRange, nbytes)
	}
	s, err := r.allocPart(nbytes)
	if err != nil {
		// The other ranks are in the exchange below: a one-byte blob tells them this rank has
		// no part, so every rank fails instead of waiting for this one.
		_, _ = r.boot.AllGather(ctx, []byte{allocCode(err)})
		return nil, fmt.Errorf("rma: Malloc: %w", err)
	}
	// exchange (size, addr, rkey per network)
	all, err := r.boot.AllGather(ctx, appendDesc(nil, s))
	if err != nil {
		_ = s.release()
		return nil, fmt.Errorf("rma: Malloc: %w", err)
	}
	s.remote = make([]remotePart, r.size)
	for p, b := range all {
		if len(b) == 1 {
			_ = s.release()
			if b[0] == allocNoSpace {
				return nil, fmt.Errorf("rma: Malloc: rank %d has no shared memory for its part: %w", p, ErrNoSpace)
			}
			return nil, fmt.Errorf("rma: Malloc: rank %d could not allocate its part: %w", p, ErrPeerAlloc)
		}
		rp, ok := r.decodeDesc(b)
		if !ok {
			_ = s.release()
			return nil, fmt.Errorf("rma: Malloc: rank %d sent %d bytes: %w", p, len(b), errBlob)
		}
		s.remote[p] = rp
	}
	r.goLive(s)
	return s, nil
}

// decodeDesc reads a part's descriptor written by appendDesc; false when b has the wrong size.
func (r *Runtime) decodeDesc(b []byte) (remotePart, bool) {
	if len(b) != 16+4*len(r.nets) {
		return remotePart{}, false
	}
	rp := remotePart{size: int(binary.LittleEndian.Uint64(b)), addr: binary.LittleEndian.Uint64(b[8:]),
		rkeys: make([]uint32, len(r.nets))}
	for i := range r.nets {
		rp.rkeys[i] = binary.LittleEndian.Uint32(b[16+4*i:])
	}
	return rp, true
}

// goLive makes a segment whose remote parts are known usable (views) and live (freed at
// Finalize if the program does not).
func (r *Runtime) goLive(s *Segment) {
	s.views = make([]atomic.Pointer[ibv.RemoteView], r.size)
	r.segMu.Lock()
	r.live[s.id] = s
	r.segMu.Unlock()
}

// allocLocal allocates and registers this rank's part. Memory comes from the shared-memory
// provider when one is open (so peers on the node reach it with one copy), else from the heap.
func (s *Segment) allocLocal(nbytes int) error {
	r := s.rt
	n := (max(nbytes, 1) + pageSize - 1) &^ (pageSize - 1)
	var mem []byte
	for _, nw := range r.nets {
		if nw.alloc != nil {
			b, free, err := nw.alloc(n)
			if err != nil {
				return err
			}
			mem, s.free = b, free
			break
		}
	}
	if mem == nil {
		mem = alignedHeap(n)
	}
	s.local = mem[:nbytes:nbytes]
	for i, nw := range r.nets {
		mr, err := nw.ep.PD.RegMR(mem, ibv.AccessAll)
		if err != nil {
			_ = s.release()
			return err
		}
		s.mrs[i] = mr
	}
	return nil
}

// alignedHeap returns n bytes of page-aligned heap memory.
func alignedHeap(n int) []byte {
	b := make([]byte, n+pageSize)
	off := (pageSize - int(addrOf(b)%pageSize)) % pageSize
	return b[off : off+n : off+n]
}

func (s *Segment) release() error {
	var first error
	s.releaseViews()
	for i, mr := range s.mrs {
		if mr != nil {
			if err := mr.Dereg(); err != nil && first == nil {
				first = err
			}
			s.mrs[i] = nil
		}
	}
	if s.free != nil {
		if err := s.free(); err != nil && first == nil {
			first = err
		}
		s.free = nil
	}
	return first
}

// Local is this rank's part of the segment (len = the size this rank asked for).
func (s *Segment) Local() []byte { return s.local }

// Len is the size in bytes of rank p's part (0 for a bad rank).
func (s *Segment) Len(p int) int {
	if p < 0 || p >= len(s.remote) {
		return 0
	}
	return s.remote[p].size
}

// Free releases the segment (ARMCI_Free): collective; a barrier makes sure no rank still
// accesses it. A segment allocated on a group (Group.Malloc) is freed by its members, with the
// group's barrier.
func (s *Segment) Free(ctx context.Context) error {
	if s.freed {
		return fmt.Errorf("%w: segment %d freed twice", ErrFreed, s.id)
	}
	barrier := s.rt.Barrier
	if s.grp != nil {
		barrier = s.grp.Barrier
	}
	if err := barrier(ctx); err != nil {
		return fmt.Errorf("rma: Free: %w", err)
	}
	s.freed = true
	s.rt.segMu.Lock()
	delete(s.rt.live, s.id)
	s.rt.segMu.Unlock()
	return s.release()
}

// bounds checks that [off, off+n) lies inside rank p's part (p a valid rank) of a live segment.
// Errors: ErrFreed, ErrOutOfRange.
func (s *Segment) bounds(p, off, n int) error {
	if s.freed {
		return fmt.Errorf("%w: segment %d", ErrFreed, s.id)
	}
	size := s.remote[p].size
	if off < 0 || n < 0 || off > size || n > size-off {
		return fmt.Errorf("%w: [%d,+%d) on rank %d whose part has %d bytes", ErrOutOfRange, off, n, p, size)
	}
	return nil
}

// remoteAddr is the address and rkey of byte off of peer p's part, on p's network (bounds
// checked by the caller).
func (s *Segment) remoteAddr(p *peer, off int) (uint64, uint32) {
	rp := &s.remote[p.rank]
	return rp.addr + uint64(off), rp.rkeys[p.net]
}
