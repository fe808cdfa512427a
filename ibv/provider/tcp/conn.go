package tcp

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goarmci/goarmci/ibv/internal/engine"
)

// directMax is the largest frame a sender writes to the socket itself when the stream is idle
// (no writer hop for ACKs and small requests: waking a parked goroutine costs more than the write).
const directMax = 2048

// conn is one TCP stream of a path. Frames (4-byte little-endian length, packet) are appended to
// wbuf by any goroutine and written by the stream's writer, which writes everything queued in one
// call (batching: it flushes when the queue is empty). Its reader hands frames to the engine.
// Senders never block on the socket, so a reader that answers a request never waits for its peer.
type conn struct {
	d      *Driver
	port   *port
	remote string // the peer port's address (from the hello)
	key    connKey
	dialed bool

	mu       sync.Mutex
	nc       net.Conn
	wbuf     []byte
	spare    []byte
	ready    bool
	writing  bool // the writer goroutine is writing outside mu
	err      error
	settledC bool
	raw      syscall.RawConn
	direct   []byte // frame being written directly (under mu)
	directN  int
	directE  error
	writeFn  func(fd uintptr) bool

	settled chan struct{} // closed when the stream is up or has failed
	wake    chan struct{}
	done    chan struct{}
}

func newConn(d *Driver, p *port, remote string) *conn {
	return &conn{d: d, port: p, remote: remote, settled: make(chan struct{}), wake: make(chan struct{}, 1),
		done: make(chan struct{})}
}

// Reply and RemoteAddr make a stream the engine.Link of the packets it delivers.
func (c *conn) Reply(hdr, payload []byte) error { return c.send(hdr, payload) }
func (c *conn) RemoteAddr() string              { return c.remote }

var _ engine.Link = (*conn)(nil)

func (c *conn) send(hdr, payload []byte) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	if n := 4 + len(hdr) + len(payload); n <= directMax && c.ready && !c.writing && len(c.wbuf) == 0 && c.raw != nil {
		f := binary.LittleEndian.AppendUint32(c.direct[:0], uint32(len(hdr)+len(payload)))
		f = append(append(f, hdr...), payload...)
		c.direct = f
		c.directN, c.directE = 0, nil
		engine.RaceRelease()
		if err := c.raw.Write(c.writeFn); err == nil && c.directE == nil && c.directN == len(f) {
			c.mu.Unlock()
			return nil
		}
		if c.directE != nil && c.directE != unix.EAGAIN && c.directE != unix.EINTR {
			err := c.directE
			c.mu.Unlock()
			c.fail(fmt.Errorf("tcp: write to %s: %w", c.remote, err))
			return err
		}
		// the socket buffer is full: the writer goroutine takes the rest
		c.wbuf = append(c.wbuf, f[max(c.directN, 0):]...)
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
		return nil
	}
	c.wbuf = binary.LittleEndian.AppendUint32(c.wbuf, uint32(len(hdr)+len(payload)))
	c.wbuf = append(c.wbuf, hdr...)
	c.wbuf = append(c.wbuf, payload...)
	engine.RaceRelease()
	ready := c.ready
	c.mu.Unlock()
	if ready {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// fail closes the stream: queued frames are dropped (the engine retransmits) and later sends
// return err.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.wbuf, c.spare = nil, nil
	nc := c.nc
	if !c.settledC {
		c.settledC = true
		close(c.settled)
	}
	close(c.done)
	c.mu.Unlock()
	if nc != nil {
		_ = nc.Close()
	}
	c.d.forget(c)
	if c.d.stop.Err() == nil && c.remote != "" {
		c.d.Engine().PathFault(c.port.num, c.remote)
	}
	if c.d.stop.Err() == nil {
		c.d.log.Debug().Err(err).Str("local", c.port.addr).Str("remote", c.remote).Msg("tcp: stream closed")
	}
}

// up marks the stream ready, starts its writer and runs its reader.
func (c *conn) up() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.ready = true
	c.settledC = true
	close(c.settled)
	if tc, ok := c.nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true) // Go's default; stated because batching is ours to do
	}
	if sc, ok := c.nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
			c.direct = make([]byte, 0, directMax)
			c.writeFn = func(fd uintptr) bool {
				c.directN, c.directE = unix.Write(int(fd), c.direct)
				return true // never wait for writability here
			}
		}
	}
	c.mu.Unlock()
	c.d.wg.Add(1)
	go c.writer()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	c.reader()
}

func (c *conn) dial() {
	defer c.d.wg.Done()
	dl := net.Dialer{Timeout: c.d.cfg.DialTimeout}
	if c.port.ip != nil && !c.port.ip.IsUnspecified() {
		dl.LocalAddr = &net.TCPAddr{IP: c.port.ip}
	}
	nc, err := dl.DialContext(c.d.stop, "tcp", c.remote)
	if err != nil {
		c.fail(fmt.Errorf("tcp: dial %s: %w", c.remote, err))
		return
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		_ = nc.Close()
		return
	}
	c.nc = nc
	c.mu.Unlock()
	_ = nc.SetDeadline(time.Now().Add(c.d.cfg.DialTimeout))
	if _, err := nc.Write(appendHello(nil, c.port.addr)); err != nil {
		c.fail(fmt.Errorf("tcp: hello to %s: %w", c.remote, err))
		return
	}
	if _, err := readHello(nc); err != nil {
		c.fail(fmt.Errorf("tcp: hello from %s: %w", c.remote, err))
		return
	}
	_ = nc.SetDeadline(time.Time{})
	c.up()
}

func (c *conn) accept() {
	defer c.d.wg.Done()
	nc := c.nc
	_ = nc.SetDeadline(time.Now().Add(c.d.cfg.DialTimeout))
	remote, err := readHello(nc)
	if err != nil {
		c.fail(fmt.Errorf("tcp: hello on %s: %w", c.port.addr, err))
		return
	}
	c.mu.Lock()
	c.remote = remote
	c.mu.Unlock()
	if c.port.down.Load() {
		c.fail(fmt.Errorf("tcp: port %d down", c.port.num))
		return
	}
	if _, err := nc.Write(appendHello(nil, c.port.addr)); err != nil {
		c.fail(fmt.Errorf("tcp: hello to %s: %w", remote, err))
		return
	}
	_ = nc.SetDeadline(time.Time{})
	c.up()
}

func (c *conn) writer() {
	defer c.d.wg.Done()
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		for {
			c.mu.Lock()
			if c.err != nil || len(c.wbuf) == 0 {
				c.writing = false
				c.mu.Unlock()
				break
			}
			buf := c.wbuf
			c.wbuf = c.spare[:0]
			c.spare = nil
			c.writing = true
			nc := c.nc
			c.mu.Unlock()
			_, err := nc.Write(buf)
			if err != nil {
				c.fail(fmt.Errorf("tcp: write to %s: %w", c.remote, err))
				return
			}
			c.mu.Lock()
			c.writing = false
			if cap(buf) <= 8<<20 && c.err == nil {
				c.spare = buf[:0]
			}
			c.mu.Unlock()
		}
	}
}

func (c *conn) reader() {
	e := c.d.Engine()
	var b engine.Batch
	buf := make([]byte, readBufSize)
	rd := newPollReader(c.nc, c.d.cfg.PollBudget)
	r, w := 0, 0
	for {
		n, err := rd.Read(buf[w:])
		w += n
		for w-r >= 4 {
			l := int(binary.LittleEndian.Uint32(buf[r:]))
			if l > maxFrame {
				e.EndBatch(&b)
				c.fail(fmt.Errorf("%w: %d-byte frame from %s", ErrProtocol, l, c.remote))
				return
			}
			if w-r < 4+l {
				if 4+l > len(buf)-r { // make room for the whole frame
					nb := buf
					if 4+l > len(buf) {
						nb = make([]byte, 4+l)
					}
					w = copy(nb, buf[r:w])
					r, buf = 0, nb
				}
				break
			}
			if drop := c.d.cfg.DropInbound; drop == nil || !drop(c.port.num, buf[r+4:r+4+l]) {
				e.Deliver(&b, buf[r+4:r+4+l], c)
			}
			r += 4 + l
		}
		e.EndBatch(&b)
		if r == w {
			r, w = 0, 0
		} else if len(buf)-w < 64<<10 {
			w = copy(buf, buf[r:w])
			r = 0
		}
		if err != nil {
			c.fail(fmt.Errorf("tcp: read from %s: %w", c.remote, err))
			return
		}
	}
}
