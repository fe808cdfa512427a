package ibv

import "reflect"

// Memory accounting of the verbs objects [Sridhar08]: each object says
// the bytes it holds now, computed from its state (its record, the entries its queues hold, the
// provider's buffers behind it), not measured from the Go heap. Sizes are those of this build
// (reflect), so they follow the structures as they change.

// GoroutineStackBytes is the stack accounted to a goroutine a provider keeps per connection (a
// reader or writer blocked in I/O): the runtime's starting stack grown once, what such
// goroutines settle at.
const GoroutineStackBytes = 8 << 10

// QPMemory is implemented by a QPDriver that accounts its memory: the bytes its side of the queue
// pair holds now (engine state, the work-queue entries allocated, for a DC queue pair its peer
// records).
type QPMemory interface {
	MemoryFootprint() int64
}

// SRQMemory is implemented by an SRQDriver that accounts its memory (the receive entries it holds).
type SRQMemory interface {
	MemoryFootprint() int64
}

// DeviceMemory is implemented by a Driver that holds memory per connection outside its queue
// pairs (byte streams, sockets, their buffers and goroutines): ConnMemory returns the number of
// such connections open and their bytes.
type DeviceMemory interface {
	ConnMemory() (conns int, bytes int64)
}

// SizeOf is the size in bytes of a value of type T (its record, not what it points to).
func SizeOf[T any]() int64 { return int64(reflect.TypeFor[T]().Size()) }

// CQEntryBytes is the size of one completion-queue entry (a WC).
func CQEntryBytes() int64 { return SizeOf[WC]() }

// MemoryFootprint is the bytes the CQ holds now: its record and the entries of its ring (which
// grows with the completions waiting, up to Cap).
func (cq *CQ) MemoryFootprint() int64 {
	return SizeOf[CQ]() + int64(cq.entries())*CQEntryBytes()
}

// MemoryFootprint is the bytes the queue pair holds now: its record and its provider side
// (QPMemory; the record alone when the provider does not account its memory). The CQs and the
// SRQ it uses are accounted by themselves.
func (qp *QP) MemoryFootprint() int64 {
	n := SizeOf[QP]()
	if m, ok := qp.drv.(QPMemory); ok {
		n += m.MemoryFootprint()
	}
	return n
}

// MemoryFootprint is the bytes the SRQ holds now (its record and its provider side).
func (s *SRQ) MemoryFootprint() int64 {
	n := SizeOf[SRQ]()
	if m, ok := s.drv.(SRQMemory); ok {
		n += m.MemoryFootprint()
	}
	return n
}

// ConnMemory is the number of provider connections (streams, sockets) the device holds open and
// their bytes (DeviceMemory; 0, 0 when the provider has none or does not account them).
func (c *Context) ConnMemory() (conns int, bytes int64) {
	if m, ok := c.drv.(DeviceMemory); ok {
		return m.ConnMemory()
	}
	return 0, 0
}

// DCMemory is implemented by the QPDriver of a DC queue pair: the bytes of the record a new peer
// adds (its transport state and first work-queue entries), and the records it holds.
type DCMemory interface {
	DCPeerBytes() int64
	DCPeers() int
}

// DCPeerBytes is the bytes a new peer of a DC queue pair costs (a record with its first
// work-queue entries; DCMemory), and 0 when qp is not a DC queue pair or its provider does not
// account it.
func (qp *QP) DCPeerBytes() int64 {
	if m, ok := qp.drv.(DCMemory); ok && qp.typ == DC {
		return m.DCPeerBytes()
	}
	return 0
}

// DCPeers is the number of peer records a DC queue pair holds (0 for other queue pairs).
func (qp *QP) DCPeers() int {
	if m, ok := qp.drv.(DCMemory); ok && qp.typ == DC {
		return m.DCPeers()
	}
	return 0
}
