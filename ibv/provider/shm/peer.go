//go:build linux

package shm

import (
	"fmt"
	"sync"
	"unsafe"

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

	mu   sync.Mutex
	maps map[uint64]*bufMap // by buffer id
}

func ptrOf(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

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
	if !p.own && p.seg != nil {
		if err := xunix.Unmap(p.seg.mem); err != nil && first == nil {
			first = err
		}
	}
	p.seg = nil
	return first
}

// buffer returns this process's mapping of the peer's shared buffer described by desc.
func (p *peer) buffer(desc *mrDesc) (*bufMap, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.maps[desc.bufID]; ok && m.ino == desc.bufIno && uint64(len(m.mem)) >= desc.bufSize {
		return m, nil
	}
	m, err := mapPeerBuffer(p.pid, desc)
	if err != nil {
		return nil, err
	}
	if old, ok := p.maps[desc.bufID]; ok {
		_ = xunix.Unmap(old.mem) // cannot be in use: a mapping is only used under a descriptor that named it
	}
	if p.maps == nil {
		p.maps = map[uint64]*bufMap{}
	}
	p.maps[desc.bufID] = m
	return m, nil
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
