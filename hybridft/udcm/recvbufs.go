package udcm

import (
	"context"
	"errors"
	"fmt"

	"github.com/goarmci/goarmci/ibv"
)

// The CM's receive buffers. On a device with shared receive queues (Open's udp device) the
// receives go to an SRQ and their memory follows the traffic [Sridhar08]: the CM starts with one
// chunk of recvPerChunk buffers posted and the SRQ limit armed at recvLow; when a burst of
// messages leaves fewer than recvLow receives posted (the receive goroutine reposts a buffer
// only after handling its message), the limit event (ibv.EventSRQLimitReached) makes it post one
// more chunk, up to recvDepth buffers, and arm the limit again. Without an SRQ (OpenOn on a
// shared device, whose events the device's owner reads) all recvDepth buffers are posted to
// the queue pair at once.
const (
	recvPerChunk = 16
	recvLow      = 4
)

// recvChunk is recvPerChunk buffers of bufLen bytes, registered.
type recvChunk struct {
	bufs []byte
	mr   *ibv.MR
}

// addChunks allocates, registers and posts the first receive buffers: one chunk with an SRQ
// (and arms its limit), every chunk without.
func (c *CM) addChunks() error {
	n := recvDepth / recvPerChunk
	if c.srq != nil {
		n = 1
	}
	for range n {
		if _, err := c.addChunk(); err != nil {
			return err
		}
	}
	if c.srq != nil {
		if err := c.srq.ArmLimit(recvLow); err != nil {
			return fmt.Errorf("udcm: %w", err)
		}
	}
	return nil
}

// addChunk adds a chunk of buffers and posts them; false when recvDepth buffers exist.
func (c *CM) addChunk() (bool, error) {
	c.rmu.Lock()
	k := len(c.chunks)
	if k*recvPerChunk >= recvDepth {
		c.rmu.Unlock()
		return false, nil
	}
	ch := recvChunk{bufs: make([]byte, recvPerChunk*bufLen)}
	mr, err := c.pd.RegMR(ch.bufs, ibv.AccessLocalWrite)
	if err != nil {
		c.rmu.Unlock()
		return false, fmt.Errorf("udcm: %w", err)
	}
	ch.mr = mr
	c.chunks = append(c.chunks, ch)
	c.rmu.Unlock()
	for i := range recvPerChunk {
		if err := c.postRecv(uint64(k*recvPerChunk + i)); err != nil {
			return true, err
		}
	}
	return true, nil
}

// buf is receive buffer i (bufLen bytes).
func (c *CM) buf(i uint64) []byte {
	c.rmu.Lock()
	ch := c.chunks[i/recvPerChunk]
	c.rmu.Unlock()
	off := int(i%recvPerChunk) * bufLen
	return ch.bufs[off : off+bufLen]
}

// postRecv posts receive buffer i, to the SRQ when the CM has one.
func (c *CM) postRecv(i uint64) error {
	c.rmu.Lock()
	ch := c.chunks[i/recvPerChunk]
	c.rmu.Unlock()
	wr := &ibv.RecvWR{ID: i, SGL: []ibv.SGE{ch.mr.SGE(int(i%recvPerChunk)*bufLen, bufLen)}}
	var err error
	if c.srq != nil {
		err = c.srq.PostRecv(wr)
	} else {
		err = c.qp.PostRecv(wr)
	}
	if err != nil {
		return fmt.Errorf("udcm: %w", err)
	}
	return nil
}

// recvBytes is the bytes of the receive buffers allocated.
func (c *CM) recvBytes() int64 {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return int64(len(c.chunks)) * recvPerChunk * bufLen
}

// eventLoop reads the CM's own device's events until ctx ends: on the SRQ limit event it adds a
// chunk of receive buffers and arms the limit again while chunks remain to add.
func (c *CM) eventLoop(ctx context.Context) {
	defer c.wg.Done()
	for {
		ev, err := c.dev.GetAsyncEvent(ctx)
		if err != nil {
			return
		}
		if ev.Type != ibv.EventSRQLimitReached || ev.SRQ != c.srq {
			continue
		}
		added, err := c.addChunk()
		if err == nil && added {
			err = c.srq.ArmLimit(recvLow)
		}
		if err != nil && !errors.Is(err, ibv.ErrClosed) {
			c.log.Warn().Err(err).Msg("udcm: more receive buffers")
		}
	}
}
