package udcm

import "github.com/goarmci/goarmci/ibv"

// MemoryFootprint is the bytes the connection manager holds now: its UD queue pair, SRQ and
// CQs, the receive buffers it allocated (registered; they grow with bursts of messages, see
// recvbufs.go), and its goroutines' stacks (ibv.GoroutineStackBytes each).
func (c *CM) MemoryFootprint() int64 {
	n := ibv.SizeOf[CM]() + c.qp.MemoryFootprint() + c.scq.MemoryFootprint() + c.rcq.MemoryFootprint() +
		c.recvBytes() + ibv.GoroutineStackBytes
	if c.srq != nil {
		n += c.srq.MemoryFootprint() + ibv.GoroutineStackBytes // and the event goroutine
	}
	return n
}
