//go:build linux

package shm

import (
	"fmt"
	"sync"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/xunix"
)

// peer is another endpoint of the job on this node (or this one, for loopback), as this device
// sees it: its control segment mapped here and the shared buffers of it mapped so far.
type peer struct {
	addr string
	seg  *segment
	pid  int
	id   uint64
	own  bool // this device's own segment (loopback): not unmapped by the peer

	mu      sync.Mutex
	maps    map[uint64]*bufMap // by buffer id
	zombies []*bufMap
}

// alive reports whether the peer's endpoint is still open (and not replaced).
func (p *peer) alive() bool {
	return p.seg.hdr.alive.Load() == 1 && p.seg.hdr.id.Load() == p.id
}

func (p *peer) unmap() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for id, m := range p.maps {
		if err := xunix.Unmap(m.mem); err != nil && first == nil {
			first = err
		}
		delete(p.maps, id)
	}
	for _, m := range p.zombies {
		if err := xunix.Unmap(m.mem); err != nil && first == nil {
			first = err
		}
	}
	p.zombies = nil
	if !p.own && p.seg != nil {
		if err := xunix.Unmap(p.seg.mem); err != nil && first == nil {
			first = err
		}
	}
	p.seg = nil
	return first
}

// buffer returns this process's mapping of the peer's shared buffer described by desc, with a
// reference the caller gives back with release. Mapping a new buffer first unmaps the buffers
// no QP uses any more and no live descriptor of the peer names (the peer freed them): otherwise
// a peer's freed memory would stay resident as long as this process lives.
func (p *peer) buffer(desc *mrDesc) (*bufMap, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seg == nil {
		return nil, ibv.ErrClosed
	}
	if m, ok := p.maps[desc.bufID]; ok && m.ino == desc.bufIno && uint64(len(m.mem)) >= desc.bufSize {
		m.refs++
		return m, nil
	}
	p.sweepLocked()
	m, err := mapPeerBuffer(p.pid, desc)
	if err != nil {
		return nil, err
	}
	if old, ok := p.maps[desc.bufID]; ok {
		p.zombies = append(p.zombies, old) // cannot happen with unique ids; kept until Close
	}
	if p.maps == nil {
		p.maps = map[uint64]*bufMap{}
	}
	m.refs = 1
	p.maps[desc.bufID] = m
	return m, nil
}

// release gives back a reference taken by buffer.
func (p *peer) release(m *bufMap) {
	p.mu.Lock()
	m.refs--
	p.mu.Unlock()
}

// sweepLocked unmaps the buffers that no QP references and no live descriptor names.
func (p *peer) sweepLocked() {
	if len(p.maps) == 0 {
		return
	}
	named := make(map[uint64]bool, len(p.maps))
	for i := range p.seg.mrs {
		s := &p.seg.mrs[i]
		if s.free() {
			continue
		}
		if d, _, ok := s.snapshot(); ok && d.valid && d.bufID != 0 {
			named[d.bufID] = true
		}
	}
	for id, m := range p.maps {
		if m.refs == 0 && !named[id] {
			_ = xunix.Unmap(m.mem)
			delete(p.maps, id)
		}
	}
}

// mapped is the number of the peer's buffers mapped here (for tests).
func (p *peer) mapped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.maps)
}

// openPeer maps the control segment of the endpoint at addr.
func openPeer(dir, addr string) (*peer, error) {
	job, name, err := parseAddr(addr)
	if err != nil {
		return nil, err
	}
	path := ctlPath(dir, job, name)
	fd, err := xunix.OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("shm: endpoint %s: %w: %w", addr, ibv.ErrUnreachable, err)
	}
	defer xunix.Close(fd)
	st, err := xunix.Fstat(fd)
	if err != nil {
		return nil, fmt.Errorf("shm: endpoint %s: %w: %w", addr, ibv.ErrUnreachable, err)
	}
	if st.Size < headerSize {
		return nil, fmt.Errorf("shm: endpoint %s: %w: %w", addr, ibv.ErrUnreachable, ErrBadSegment)
	}
	mem, err := xunix.MapShared(fd, int(st.Size))
	if err != nil {
		return nil, fmt.Errorf("shm: endpoint %s: %w: %w", addr, ibv.ErrUnreachable, err)
	}
	h := (*ctlHeader)(ptrOf(mem))
	nMR, nQP := h.nMR.Load(), h.nQP.Load()
	if h.magic.Load() != ctlMagic || h.version.Load() != ctlVersion || nMR > 1<<22 || nQP > 1<<22 {
		_ = xunix.Unmap(mem)
		return nil, fmt.Errorf("shm: endpoint %s: %w: %w", addr, ibv.ErrUnreachable, ErrBadSegment)
	}
	seg, err := overlay(mem, int(nMR), int(nQP))
	if err != nil {
		_ = xunix.Unmap(mem)
		return nil, fmt.Errorf("shm: endpoint %s: %w: %w", addr, ibv.ErrUnreachable, err)
	}
	p := &peer{addr: addr, seg: seg, pid: int(h.pid.Load()), id: h.id.Load()}
	if h.alive.Load() != 1 || !xunix.ProcessAlive(p.pid) {
		_ = xunix.Unmap(mem)
		return nil, fmt.Errorf("shm: endpoint %s (pid %d) is closed: %w", addr, p.pid, ibv.ErrUnreachable)
	}
	return p, nil
}

// peerFor returns the (cached) peer at addr; an incarnation that closed is replaced by the
// current one. Errors wrap ibv.ErrUnreachable.
func (d *device) peerFor(addr string) (*peer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ibv.ErrClosed
	}
	if addr == d.addr {
		p := d.peers[addr]
		if p == nil {
			p = &peer{addr: addr, seg: d.seg, pid: d.pid, id: d.id, own: true}
			d.peers[addr] = p
		}
		return p, nil
	}
	if p := d.peers[addr]; p != nil {
		if p.alive() {
			return p, nil
		}
		delete(d.peers, addr)
		d.stale = append(d.stale, p) // QPs may still hold it; unmapped at Close
	}
	p, err := openPeer(d.cfg.Dir, addr)
	if err != nil {
		return nil, err
	}
	d.peers[addr] = p
	return p, nil
}
