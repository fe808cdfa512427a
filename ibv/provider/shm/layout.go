//go:build linux

package shm

import (
	"runtime"
	"sync/atomic"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/accum"
)

// The control segment of an endpoint is a shared file every peer on the node maps. It holds a
// header, the MR table (one descriptor per registered region, found by rkey) and the QP table
// (one descriptor per queue pair, found by QP number). Only the owning device writes it; peers
// read it to check remote accesses themselves (the responder's memory access validation of
// IBA §9.7.4.1.5, done by the requester because the responder does no work on the data path).
//
// Every descriptor is a seqlock: the writer makes seq odd, stores the fields, makes seq even.
// Readers take a snapshot and retry while seq is odd or changes; a reader that cached a
// descriptor re-checks it with a single load of seq per operation.
const (
	ctlMagic   = 0x3169636d_72616f67 // "goarmci1" in little-endian bytes
	ctlVersion = 1
	headerSize = 4096
	mrSlotSize = 128
	qpSlotSize = 64
	// probeWindow is how many consecutive slots a key may land in (linear probing without
	// tombstones: lookups always scan the whole window).
	probeWindow = 32
	// seqSpins bounds how long a reader waits for a writer in the middle of an update.
	seqSpins = 1 << 12
)

type ctlHeader struct {
	magic   atomic.Uint64 // stored last at creation
	version atomic.Uint64
	pid     atomic.Uint64
	id      atomic.Uint64 // incarnation id of the endpoint (random, non-zero)
	alive   atomic.Uint64 // 1 while the device is open
	nMR     atomic.Uint64
	nQP     atomic.Uint64
}

// mrDesc is a snapshot of an MR descriptor.
type mrDesc struct {
	valid   bool
	rkey    uint32
	access  ibv.Access
	vaddr   uint64 // the region's virtual address in the owner's address space
	length  uint64
	bufID   uint64 // 0: the region is not inside a shared buffer (cross-memory attach)
	bufFD   uint64 // the buffer's descriptor in the owner (opened as /proc/<pid>/fd/<fd>)
	bufIno  uint64 // inode of that descriptor's file (guards against fd reuse)
	bufSize uint64 // bytes to map
	bufOff  uint64 // byte offset of vaddr in the buffer
}

type mrSlot struct {
	seq     atomic.Uint64
	key     atomic.Uint64 // bit 63 valid, bits 32..39 access, bits 0..31 rkey
	vaddr   atomic.Uint64
	length  atomic.Uint64
	bufID   atomic.Uint64
	bufFD   atomic.Uint64
	bufIno  atomic.Uint64
	bufSize atomic.Uint64
	bufOff  atomic.Uint64
	acc     accum.Lock // accumulate lock of the region (internal/accum.RegisterLock)
	_       [mrSlotSize - 9*8 - 4]byte
}

const validBit = 1 << 63

func (s *mrSlot) publish(d mrDesc) {
	s.seq.Add(1)
	s.vaddr.Store(d.vaddr)
	s.length.Store(d.length)
	s.bufID.Store(d.bufID)
	s.bufFD.Store(d.bufFD)
	s.bufIno.Store(d.bufIno)
	s.bufSize.Store(d.bufSize)
	s.bufOff.Store(d.bufOff)
	k := uint64(d.rkey) | uint64(d.access&0xff)<<32
	if d.valid {
		k |= validBit
	}
	s.key.Store(k)
	s.seq.Add(1)
}

func (s *mrSlot) clear() { s.publish(mrDesc{}) }

// free reports whether the slot holds no live descriptor (writer side: only the owner writes).
func (s *mrSlot) free() bool { return s.key.Load()&validBit == 0 }

// snapshot reads a consistent copy of the descriptor and the seq it was read at; ok is false
// when a writer kept the slot busy for too long (treated as "no such key").
func (s *mrSlot) snapshot() (d mrDesc, seq uint64, ok bool) {
	for i := 0; i < seqSpins; i++ {
		s1 := s.seq.Load()
		if s1&1 != 0 {
			if i > 64 {
				runtime.Gosched()
			}
			continue
		}
		k := s.key.Load()
		d = mrDesc{valid: k&validBit != 0, rkey: uint32(k), access: ibv.Access(k >> 32 & 0xff),
			vaddr: s.vaddr.Load(), length: s.length.Load(), bufID: s.bufID.Load(), bufFD: s.bufFD.Load(),
			bufIno: s.bufIno.Load(), bufSize: s.bufSize.Load(), bufOff: s.bufOff.Load()}
		if s.seq.Load() == s1 {
			return d, s1, true
		}
	}
	return mrDesc{}, 0, false
}

// qpDesc is a snapshot of a QP descriptor: what a requester checks before it touches the
// responder's memory (the responder QP exists, is connected to the requester and is at least
// in RTR, and its access flags allow the operation).
type qpDesc struct {
	valid   bool
	accept  bool // RTR, RTS or SQD: incoming requests are executed
	qpn     uint32
	access  ibv.Access
	peerID  uint64 // incarnation id of the endpoint it is connected to
	peerQPN uint32
}

type qpSlot struct {
	seq     atomic.Uint64
	word    atomic.Uint64 // bit 63 valid, bit 62 accept, bits 32..39 access, bits 0..31 QP number
	peerID  atomic.Uint64
	peerQPN atomic.Uint64
	_       [qpSlotSize - 4*8]byte
}

const acceptBit = 1 << 62

func (s *qpSlot) publish(d qpDesc) {
	s.seq.Add(1)
	s.peerID.Store(d.peerID)
	s.peerQPN.Store(uint64(d.peerQPN))
	w := uint64(d.qpn) | uint64(d.access&0xff)<<32
	if d.valid {
		w |= validBit
	}
	if d.accept {
		w |= acceptBit
	}
	s.word.Store(w)
	s.seq.Add(1)
}

func (s *qpSlot) free() bool { return s.word.Load()&validBit == 0 }

func (s *qpSlot) snapshot() (d qpDesc, seq uint64, ok bool) {
	for i := 0; i < seqSpins; i++ {
		s1 := s.seq.Load()
		if s1&1 != 0 {
			if i > 64 {
				runtime.Gosched()
			}
			continue
		}
		w := s.word.Load()
		d = qpDesc{valid: w&validBit != 0, accept: w&acceptBit != 0, qpn: uint32(w),
			access: ibv.Access(w >> 32 & 0xff), peerID: s.peerID.Load(), peerQPN: uint32(s.peerQPN.Load())}
		if s.seq.Load() == s1 {
			return d, s1, true
		}
	}
	return qpDesc{}, 0, false
}

// segment is a mapped control segment (own or a peer's).
type segment struct {
	mem []byte
	hdr *ctlHeader
	mrs []mrSlot
	qps []qpSlot
}

func segmentSize(nMR, nQP int) int { return headerSize + nMR*mrSlotSize + nQP*qpSlotSize }

// home is the first slot a key may occupy in a table of n slots (keys carry an index in their
// high 24 bits, see ibv's key allocation).
func mrHome(rkey uint32, n int) int { return int(rkey>>8) % n }
func qpHome(qpn uint32, n int) int  { return int(qpn) % n }

// findMR returns the live descriptor for rkey in seg, with its slot and seq.
func (seg *segment) findMR(rkey uint32) (*mrSlot, mrDesc, uint64, bool) {
	n := len(seg.mrs)
	h := mrHome(rkey, n)
	for i := 0; i < probeWindow && i < n; i++ {
		s := &seg.mrs[(h+i)%n]
		if uint32(s.key.Load()) != rkey {
			continue
		}
		d, seq, ok := s.snapshot()
		if ok && d.valid && d.rkey == rkey {
			return s, d, seq, true
		}
	}
	return nil, mrDesc{}, 0, false
}

// findQP returns the live descriptor of QP qpn in seg.
func (seg *segment) findQP(qpn uint32) (*qpSlot, qpDesc, uint64, bool) {
	n := len(seg.qps)
	h := qpHome(qpn, n)
	for i := 0; i < probeWindow && i < n; i++ {
		s := &seg.qps[(h+i)%n]
		if uint32(s.word.Load()) != qpn {
			continue
		}
		d, seq, ok := s.snapshot()
		if ok && d.valid && d.qpn == qpn {
			return s, d, seq, true
		}
	}
	return nil, qpDesc{}, 0, false
}
