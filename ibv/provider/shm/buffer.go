//go:build linux

package shm

import (
	"fmt"
	"os"
	"sync"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/xunix"
)

// buffer is one AllocBuffer mapping: an anonymous shared-memory file (memfd) kept open so that
// peers can map it through /proc/<pid>/fd/<fd>.
type buffer struct {
	id   uint64
	fd   int
	ino  uint64
	mem  []byte // the whole mapping (page multiple)
	base uintptr
	refs int // MRs registered over it (guarded by buffers.mu)
}

var buffers struct {
	mu     sync.Mutex
	nextID uint64
	live   map[uintptr]*buffer // by base address
}

// AllocBuffer returns size bytes of zeroed, page-aligned memory in a shared mapping (an anonymous
// memfd file). A memory region registered over it (PD.RegMR on any shm device of this process)
// is reached by peer processes on the node through their own mapping of the same file: one copy,
// no system call and no work by this process per operation. The memory stays valid until
// FreeBuffer. The pages are allocated before the file is mapped (fallocate), so memory that is
// not there gives an error wrapping ErrNoSpace (with the bytes asked for) instead of a SIGBUS
// at the first touch. Errors wrap ibv.ErrInvalidArgument (size ≤ 0), ErrNoSpace or the system
// error.
//
// This is the shm counterpart of ARMCI_Malloc's shared segments (and of MPI_Win_allocate_shared).
func AllocBuffer(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("shm: AllocBuffer(%d): %w", size, ibv.ErrInvalidArgument)
	}
	n := xunix.RoundPage(size)
	buffers.mu.Lock()
	buffers.nextID++
	id := buffers.nextID
	buffers.mu.Unlock()
	fd, err := xunix.MemfdCreate(fmt.Sprintf("goarmci-buf-%d", id), n)
	if err != nil {
		return nil, fmt.Errorf("shm: AllocBuffer: %w", err)
	}
	if err := preallocate(fd, n); err != nil {
		_ = xunix.Close(fd) // the memfd and its pages go with its last descriptor
		if xunix.NoSpace(err) {
			return nil, fmt.Errorf("shm: AllocBuffer: %d bytes of shared memory (memfd) are not available: %w: %w", n, ErrNoSpace, err)
		}
		return nil, fmt.Errorf("shm: AllocBuffer: allocating %d bytes of shared memory (memfd): %w", n, err)
	}
	st, err := xunix.Fstat(fd)
	if err != nil {
		_ = xunix.Close(fd)
		return nil, fmt.Errorf("shm: AllocBuffer: %w", err)
	}
	mem, err := xunix.MapShared(fd, n)
	if err != nil {
		_ = xunix.Close(fd)
		return nil, fmt.Errorf("shm: AllocBuffer: %w", err)
	}
	b := &buffer{id: id, fd: fd, ino: st.Ino, mem: mem, base: addrOf(mem)}
	buffers.mu.Lock()
	if buffers.live == nil {
		buffers.live = make(map[uintptr]*buffer)
	}
	buffers.live[b.base] = b
	buffers.mu.Unlock()
	return mem[:size:size], nil
}

// FreeBuffer releases memory from AllocBuffer (b must start where AllocBuffer's slice started).
// Errors wrap ibv.ErrInvalidArgument (not an AllocBuffer slice) or ibv.ErrBusy (memory regions
// are still registered over it; deregister them first). Peers that mapped the buffer keep their
// mapping until they close; the memory is returned to the system when the last mapping goes.
func FreeBuffer(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("shm: FreeBuffer of an empty slice: %w", ibv.ErrInvalidArgument)
	}
	buffers.mu.Lock()
	buf, ok := buffers.live[addrOf(b)]
	if !ok {
		buffers.mu.Unlock()
		return fmt.Errorf("shm: FreeBuffer: %#x is not an AllocBuffer slice: %w", addrOf(b), ibv.ErrInvalidArgument)
	}
	if buf.refs > 0 {
		buffers.mu.Unlock()
		return fmt.Errorf("shm: FreeBuffer: %d memory regions still registered: %w", buf.refs, ibv.ErrBusy)
	}
	delete(buffers.live, buf.base)
	buffers.mu.Unlock()
	err := xunix.Unmap(buf.mem)
	if cerr := xunix.Close(buf.fd); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("shm: FreeBuffer: %w", err)
	}
	return nil
}

// holdBuffer finds the buffer containing [addr, addr+n) and takes a reference on it.
func holdBuffer(addr uintptr, n uint64) *buffer {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	for _, b := range buffers.live {
		if addr >= b.base && uint64(addr-b.base) <= uint64(len(b.mem)) && n <= uint64(len(b.mem))-uint64(addr-b.base) {
			b.refs++
			return b
		}
	}
	return nil
}

func releaseBuffer(b *buffer) {
	buffers.mu.Lock()
	b.refs--
	buffers.mu.Unlock()
}

// bufMap is a peer's buffer mapped into this process.
type bufMap struct {
	mem  []byte
	ino  uint64
	refs int // QP cache entries using it (guarded by the peer's mu)
}

// mapPeerBuffer maps the buffer a peer's descriptor names, checking that the file behind the
// descriptor number is still the one the descriptor was published for.
func mapPeerBuffer(pid int, d *mrDesc) (*bufMap, error) {
	fd, err := xunix.OpenFile(xunix.ProcFDPath(pid, int(d.bufFD)))
	if err != nil {
		return nil, err
	}
	defer xunix.Close(fd)
	st, err := xunix.Fstat(fd)
	if err != nil {
		return nil, err
	}
	if st.Ino != d.bufIno || uint64(st.Size) < d.bufSize {
		return nil, fmt.Errorf("shm: peer buffer %d changed under fd %d: %w", d.bufID, d.bufFD, os.ErrNotExist)
	}
	mem, err := xunix.MapShared(fd, int(d.bufSize))
	if err != nil {
		return nil, err
	}
	return &bufMap{mem: mem, ino: st.Ino}, nil
}
