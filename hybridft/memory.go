package hybridft

import "github.com/goarmci/goarmci/ibv"

// MemoryFootprint is the bytes the connection holds now: its record, the entries of its log of
// outstanding work requests (it grows with them) and its queue pair (ibv.QP.MemoryFootprint).
func (c *Conn) MemoryFootprint() int64 {
	c.mu.Lock()
	n := ibv.SizeOf[Conn]() + int64(c.log.e.Len())*ibv.SizeOf[entry]()
	c.mu.Unlock()
	return n + c.qp.MemoryFootprint()
}
