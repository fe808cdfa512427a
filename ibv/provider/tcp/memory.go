package tcp

import "github.com/goarmci/goarmci/ibv"

// connGoroutines is the goroutines a stream keeps: its reader and its writer.
const connGoroutines = 2

// StreamBytes is the memory of an idle stream: its record, its reader's buffer and the stacks of
// its two goroutines (ibv.GoroutineStackBytes each); a stream also holds the queue arena of the
// frames waiting for the socket while they wait. The kernel's socket buffers are not counted.
func StreamBytes() int64 {
	return ibv.SizeOf[conn]() + readBufSize + connGoroutines*ibv.GoroutineStackBytes
}

// ConnMemory is the number of streams the device holds open and their bytes (ibv.DeviceMemory).
func (d *driver) ConnMemory() (conns int, bytes int64) {
	d.mu.Lock()
	all := make([]*conn, 0, len(d.all))
	for c := range d.all {
		all = append(all, c)
	}
	d.mu.Unlock()
	for _, c := range all {
		c.mu.Lock()
		bytes += StreamBytes() + int64(cap(c.arena)+cap(c.spareA))
		c.mu.Unlock()
	}
	return len(all), bytes
}
