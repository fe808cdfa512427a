package hybridft

import "github.com/goarmci/goarmci/ibv"

// MemoryFootprint is the bytes the connection holds now: its record, the entries of its log of
// outstanding work requests (it grows with them) and its queue pair (ibv.QP.MemoryFootprint).
//
// A view of a shared DC queue pair (NewDCConn) counts its record, its address handle and one
// peer record of the DC queue pair (ibv.QP.DCPeerBytes); the DC queue pair itself is counted
// once, by its owner.
func (c *Conn) MemoryFootprint() int64 {
	if c.dcAH != nil {
		return ibv.SizeOf[Conn]() + ibv.SizeOf[ibv.AH]() + c.qp.DCPeerBytes()
	}
	c.mu.Lock()
	n := ibv.SizeOf[Conn]() + int64(c.log.e.Len())*ibv.SizeOf[entry]()
	if c.rec != nil {
		n += ibv.SizeOf[protoState]()
	}
	c.mu.Unlock()
	return n + c.qp.MemoryFootprint()
}
