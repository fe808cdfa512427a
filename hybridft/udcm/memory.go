package udcm

import "github.com/goarmci/goarmci/ibv"

// MemoryFootprint is the bytes the connection manager holds now: its UD queue pair and CQs, the
// receive buffers it keeps posted (registered), and its receive goroutine's stack
// (ibv.GoroutineStackBytes).
func (c *CM) MemoryFootprint() int64 {
	return ibv.SizeOf[CM]() + c.qp.MemoryFootprint() + c.scq.MemoryFootprint() + c.rcq.MemoryFootprint() +
		int64(len(c.bufs)) + ibv.GoroutineStackBytes
}
