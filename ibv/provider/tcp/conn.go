package tcp

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
	"github.com/goarmci/goarmci/ibv/wire"
	"github.com/goarmci/goarmci/internal/secret"
	"golang.org/x/sys/unix"
)

// A stream's send side. Frames (4-byte little-endian length, packet) are written by whoever
// finds the stream idle — the engine goroutine that sends (a poster, a reader answering, the
// timer) writes its frame itself with one non-blocking writev of header and payload, so neither
// a goroutine hop nor a copy stands between a request and the kernel. When the socket is full or
// another write is in progress, the frame is queued and the stream's writer goroutine writes the
// queue, several frames per writev, waiting for writability. Senders never block on the socket,
// so a reader that answers a request never waits for its peer (two readers blocked writing to
// each other would deadlock).
//
// A queued frame's header is copied into the queue's arena; its payload is copied too, except
// for the payloads of SendRef/ReplyRef (views of registered memory, engine.RefSender), which are
// queued by reference: RDMA write and read-response data then reach the kernel from the MR with
// no copy in user space. The queue is bounded by the engine's send window.
const (
	copyMax   = 2048    // payloads up to this size are copied into the arena even when they may be kept
	iovMax    = 1024    // IOV_MAX
	arenaKeep = 1 << 20 // a drained arena larger than this is dropped, not reused
)

// conn is one TCP stream of a path; its reader hands frames to the engine (see reader).
type conn struct {
	d      *driver
	port   *port
	remote string // the peer port's address (from the hello)
	key    connKey
	dialed bool

	mu       sync.Mutex
	nc       net.Conn
	raw      syscall.RawConn
	q        [][]byte // frames not yet written, as writev pieces
	arena    []byte   // bytes the queue's pieces copied
	spareQ   [][]byte
	spareA   []byte
	ready    bool
	writing  bool         // a goroutine owns the socket's write side (outside mu)
	corked   int          // Cork depth: frames are queued, Uncork writes them with one writev
	lastAct  atomic.Int64 // ns: the last read or write that moved bytes (engine.StreamActivity)
	outq     atomic.Int64 // the kernel send queue's length at the last LastActivity
	err      error
	settledC bool

	// write state of the goroutine that owns the write side (writing)
	head    [4 + wire.MaxHeaderLen + copyMax]byte // frame length, headers and a small payload
	wbufs   [][]byte
	iov     []unix.Iovec
	wn      int
	werr    error
	wblock  bool     // the writer goroutine waits for writability on EAGAIN
	wwait   parkedIO // the writer goroutine as the progress call wakes it (progress.go)
	writeFn func(fd uintptr) bool

	settled chan struct{} // closed when the stream is up or has failed
	wake    chan struct{}
	done    chan struct{}

	// reader state: headers and placement of a frame being placed
	rd   *pollReader // set once, under driver.mu, when the reader starts
	phdr [wire.MaxHeaderLen]byte
	pl   engine.Placement
}

func newConn(d *driver, p *port, remote string) *conn {
	c := &conn{d: d, port: p, remote: remote, settled: make(chan struct{}), wake: make(chan struct{}, 1),
		done: make(chan struct{}), iov: make([]unix.Iovec, 0, iovMax)}
	c.writeFn = c.writev
	return c
}

// Reply, ReplyRef and RemoteAddr make a stream the engine.Link of the packets it delivers.
func (c *conn) Reply(hdr, payload []byte) error    { return c.write(hdr, payload, false) }
func (c *conn) ReplyRef(hdr, payload []byte) error { return c.write(hdr, payload, true) }
func (c *conn) RemoteAddr() string                 { return c.remote }

var (
	_ engine.Link       = (*conn)(nil)
	_ engine.RefReplier = (*conn)(nil)
)

// SendRef is the zero-copy Send of the transport (engine.RefSender).
func (t *transport) SendRef(path ibv.AHAttr, hdr, payload []byte) error {
	c, err := (*driver)(t).stream(path)
	if err != nil {
		return err
	}
	return c.write(hdr, payload, true)
}

var _ engine.RefSender = (*transport)(nil)

// send writes or queues one frame, copying what it queues.
func (c *conn) send(hdr, payload []byte) error { return c.write(hdr, payload, false) }

// write writes or queues one frame; with ref, payload may be queued by reference (see above).
func (c *conn) write(hdr, payload []byte, ref bool) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	if !c.ready || c.writing || len(c.q) > 0 || c.raw == nil || c.corked > 0 {
		c.enqueueLocked(hdr, payload, ref)
		engine.RaceRelease() // after the copies, before the bytes go out (race builds)
		kick := c.ready && c.corked == 0
		c.mu.Unlock()
		if kick {
			c.kick()
		}
		return nil
	}
	// idle stream: write the frame here
	c.writing = true
	c.mu.Unlock()
	head := binary.LittleEndian.AppendUint32(c.head[:0], uint32(len(hdr)+len(payload)))
	head = append(head, hdr...)
	if len(payload) <= copyMax { // one piece: a plain write
		head = append(head, payload...)
		payload = nil
	}
	c.wbufs = append(c.wbufs[:0], head)
	if len(payload) > 0 {
		c.wbufs = append(c.wbufs, payload)
	}
	c.wn, c.werr, c.wblock = 0, nil, false
	engine.RaceRelease()
	rerr := c.raw.Write(c.writeFn)
	for c.wwait.retried(rerr) { // a late wake of the writer goroutine (progress.go)
		rerr = c.raw.Write(c.writeFn)
	}
	n, werr := c.wn, c.werr
	c.mu.Lock()
	c.writing = false
	if rerr == nil && (werr == nil || werr == unix.EAGAIN || werr == unix.EINTR) && c.err == nil {
		if total := len(head) + len(payload); n < total {
			// the socket is full: the rest goes first in the queue, to the writer goroutine
			rest := consume(c.wbufs, n)
			c.prependLocked(rest, ref)
			engine.RaceRelease()
		}
	}
	clear(c.wbufs)
	kick := len(c.q) > 0 && c.err == nil
	c.mu.Unlock()
	if rerr != nil || (werr != nil && werr != unix.EAGAIN && werr != unix.EINTR) {
		err := rerr
		if err == nil {
			err = werr
		}
		c.fail(fmt.Errorf("tcp: write to %s: %w", c.remote, err))
		return err
	}
	if kick {
		c.kick()
	}
	return nil
}

// Cork and Uncork bracket a burst of frames (engine.LinkCorker): the frames sent in between
// are queued and Uncork writes them together, with one writev when the socket takes them.
func (c *conn) Cork() {
	c.mu.Lock()
	c.corked++
	c.mu.Unlock()
}

// Uncork ends a Cork; the last one writes the queue from the calling goroutine when the write
// side is free (what the socket does not take goes to the writer goroutine).
func (c *conn) Uncork() {
	c.mu.Lock()
	if c.corked > 0 {
		c.corked--
	}
	if c.corked > 0 || c.err != nil || !c.ready || c.writing || len(c.q) == 0 || c.raw == nil {
		kick := c.corked == 0 && c.ready && len(c.q) > 0 && c.err == nil
		c.mu.Unlock()
		if kick {
			c.kick()
		}
		return
	}
	bufs, arena := c.q, c.arena
	c.q, c.arena = c.spareQ[:0], c.spareA[:0]
	c.spareQ, c.spareA = nil, nil
	c.writing = true
	c.mu.Unlock()
	// non-blocking writevs until the socket is full
	c.wbufs = bufs
	var err error
	for len(c.wbufs) > 0 {
		c.wn, c.werr, c.wblock = 0, nil, false
		if err = c.raw.Write(c.writeFn); err != nil {
			break
		}
		if c.werr != nil {
			if c.werr != unix.EAGAIN && c.werr != unix.EINTR {
				err = c.werr
			}
			break
		}
		c.wbufs = consume(c.wbufs, c.wn)
	}
	rest := c.wbufs
	c.wbufs = nil
	c.mu.Lock()
	c.writing = false
	if err == nil && c.err == nil {
		if len(rest) == 0 {
			clear(bufs)
			c.spareQ = bufs[:0]
			if cap(arena) <= arenaKeep {
				c.spareA = arena[:0]
			}
		} else {
			// the rest goes first; its pieces keep referring to the old arena
			n := copy(bufs, rest)
			clear(bufs[n:])
			c.q = append(bufs[:n], c.q...)
		}
	}
	kick := len(c.q) > 0 && c.err == nil
	c.mu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("tcp: write to %s: %w", c.remote, err))
		return
	}
	if kick {
		c.kick()
	}
}

// Cork and Uncork of the transport (engine.Corker) cork the stream of a path.
func (t *transport) Cork(path ibv.AHAttr) {
	if c, err := (*driver)(t).stream(path); err == nil {
		c.Cork()
	}
}

func (t *transport) Uncork(path ibv.AHAttr) {
	if c, err := (*driver)(t).stream(path); err == nil {
		c.Uncork()
	}
}

// LastActivity is when the stream of path last moved bytes (engine.StreamActivity; 0: none).
func (t *transport) LastActivity(path ibv.AHAttr) int64 {
	d := (*driver)(t)
	k := connKey{port: path.PortNum, addr: path.Addr, dlid: path.DLID, pbits: path.SrcPathBits}
	d.mu.Lock()
	c := d.conns[k]
	d.mu.Unlock()
	if c == nil {
		return 0
	}
	if c.sendQueueShrank() {
		c.lastAct.Store(time.Now().UnixNano())
	}
	return c.lastAct.Load()
}

// sendQueueShrank reports whether the kernel's send queue of the stream (SIOCOUTQ: bytes not yet
// acknowledged by the peer's TCP) is shorter than at the last call: bytes are leaving the host.
// On a slow rail our writes can be far apart while a full socket buffer drains; a dead path's
// queue does not move. A write resets the baseline (the first sample after it counts as
// progress: the write itself was activity).
func (c *conn) sendQueueShrank() bool {
	c.mu.Lock()
	raw := c.raw
	c.mu.Unlock()
	if raw == nil {
		return false
	}
	q := -1
	_ = raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err == nil {
			q = v
		}
	})
	if q < 0 {
		return false
	}
	return int64(q) < c.outq.Swap(int64(q))
}

var (
	_ engine.Corker         = (*transport)(nil)
	_ engine.LinkCorker     = (*conn)(nil)
	_ engine.StreamActivity = (*transport)(nil)
)

func (c *conn) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// enqueueLocked queues a frame (mu held).
func (c *conn) enqueueLocked(hdr, payload []byte, ref bool) {
	start := len(c.arena)
	c.arena = binary.LittleEndian.AppendUint32(c.arena, uint32(len(hdr)+len(payload)))
	c.arena = append(c.arena, hdr...)
	if !ref || len(payload) <= copyMax {
		c.arena = append(c.arena, payload...)
		c.pushArenaLocked(start)
		return
	}
	c.pushArenaLocked(start)
	c.q = append(c.q, payload)
}

// pushArenaLocked queues arena[start:] as a piece, merged with the last piece when that one ends
// right before it in the same arena (many small frames make one iovec).
func (c *conn) pushArenaLocked(start int) {
	if k := len(c.q); k > 0 {
		last := c.q[k-1]
		if l := len(last); l > 0 && start >= l && &c.arena[start-l] == &last[0] {
			c.q[k-1] = c.arena[start-l : len(c.arena) : len(c.arena)]
			return
		}
	}
	c.q = append(c.q, c.arena[start:len(c.arena):len(c.arena)])
}

// consume drops the first n bytes of bufs (in place) and returns what is left.
func consume(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 && n > 0 {
		bufs[0] = bufs[0][n:]
	}
	return bufs
}

// writev is the RawConn.Write callback of the goroutine owning the write side: one writev of
// c.wbufs (at most iovMax pieces). With wblock it asks to wait for writability on EAGAIN.
func (c *conn) writev(fd uintptr) bool {
	c.wwait.unpark()
	iov := c.iov[:0]
	total := 0
	for _, b := range c.wbufs {
		if len(iov) == iovMax {
			break
		}
		if len(b) == 0 {
			continue
		}
		v := unix.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		iov = append(iov, v)
		total += len(b)
	}
	c.iov = iov
	if len(iov) == 0 {
		c.wn, c.werr = 0, nil
		return true
	}
	for {
		n, e := sysIovec(unix.SYS_WRITEV, fd, &iov[0], len(iov), total)
		if e == unix.EINTR {
			continue
		}
		clear(c.iov[:len(iov)])
		if e != 0 {
			c.wn, c.werr = 0, e
			if e == unix.EAGAIN && c.wblock {
				c.wwait.park() // until writable
				return false
			}
			return true
		}
		c.wn, c.werr = int(n), nil
		if n > 0 {
			c.lastAct.Store(time.Now().UnixNano())
			c.outq.Store(math.MaxInt64) // the queue grew: the next sample is the new baseline
		}
		return true
	}
}

// failed reports whether the stream has failed (fail was called).
func (c *conn) failed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
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
	clear(c.q)
	c.q, c.arena, c.spareQ, c.spareA = nil, nil, nil, nil
	nc := c.nc
	// A stream that is up is closed by its reader when the reader returns (up): the reader reads
	// and hands frames to the engine inside RawConn.Read (pollReader.serve), and Close waits for
	// that to end, which would deadlock a fail called from the engine's work inside it, or by a
	// goroutine holding a lock that work waits for. shutdown(2) instead ends the stream at once
	// and wakes the reader and the writer.
	readerCloses, raw := c.ready, c.raw
	if !c.settledC {
		c.settledC = true
		close(c.settled)
	}
	close(c.done)
	remote := c.remote // accept sets it under mu
	c.mu.Unlock()
	switch {
	case nc == nil:
	case readerCloses && raw != nil:
		_ = raw.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_RDWR) })
	default:
		_ = nc.Close()
	}
	c.d.forget(c)
	if c.d.stop.Err() == nil && remote != "" {
		c.d.Engine().PathFault(c.port.num, remote)
	}
	if c.d.stop.Err() == nil {
		c.d.log.Debug().Err(err).Str("local", c.port.addr).Str("remote", remote).Msg("tcp: stream closed")
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
	c.wwait.setDeadline = c.nc.SetWriteDeadline
	if tc, ok := c.nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true) // Go's default; stated because batching is ours to do
	}
	if sc, ok := c.nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
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
	_ = c.nc.Close() // the stream failed (fail shut it down)
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
	nD := secret.Nonce()
	if _, err := nc.Write(appendHello(nil, &helloMsg{typ: hDial, addr: c.port.addr, nonce: nD})); err != nil {
		c.fail(fmt.Errorf("tcp: hello to %s: %w", c.remote, err))
		return
	}
	h, err := readHello(nc, hAccept)
	if err == nil {
		err = checkStreamMAC(c.d.key, h.mac, labelTCPAccept, c.port.addr, h.addr, nD, h.nonce)
	}
	if err != nil {
		c.refused(nc.RemoteAddr(), fmt.Errorf("tcp: hello from %s: %w", c.remote, err))
		return
	}
	proof := streamMAC(c.d.key, labelTCPDial, c.port.addr, h.addr, nD, h.nonce)
	if _, err := nc.Write(appendHello(nil, &helloMsg{typ: hProof, mac: proof})); err != nil {
		c.fail(fmt.Errorf("tcp: hello to %s: %w", c.remote, err))
		return
	}
	_ = nc.SetDeadline(time.Time{})
	c.up()
}

func (c *conn) accept() {
	defer c.d.wg.Done()
	nc := c.nc
	_ = nc.SetDeadline(time.Now().Add(c.d.cfg.DialTimeout))
	h, err := readHello(nc, hDial)
	if err != nil {
		c.refused(nc.RemoteAddr(), fmt.Errorf("tcp: hello on %s: %w", c.port.addr, err))
		return
	}
	if c.port.down.Load() {
		c.fail(fmt.Errorf("tcp: port %d down", c.port.num))
		return
	}
	nA := secret.Nonce()
	mac := streamMAC(c.d.key, labelTCPAccept, h.addr, c.port.addr, h.nonce, nA)
	if _, err := nc.Write(appendHello(nil, &helloMsg{typ: hAccept, addr: c.port.addr, nonce: nA, mac: mac})); err != nil {
		c.fail(fmt.Errorf("tcp: hello to %s: %w", h.addr, err))
		return
	}
	p, err := readHello(nc, hProof)
	if err == nil {
		err = checkStreamMAC(c.d.key, p.mac, labelTCPDial, h.addr, c.port.addr, h.nonce, nA)
	}
	if err != nil {
		// the claimed address is not the peer's: the stream never had one (no path fault)
		c.refused(nc.RemoteAddr(), fmt.Errorf("tcp: hello on %s from %s: %w", c.port.addr, nc.RemoteAddr(), err))
		return
	}
	c.mu.Lock()
	c.remote = h.addr
	c.mu.Unlock()
	_ = nc.SetDeadline(time.Time{})
	c.up()
}

// writer writes the queued frames whenever the write side is free, waiting for writability.
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
			if c.err != nil || c.writing || len(c.q) == 0 {
				c.mu.Unlock()
				break
			}
			bufs, arena := c.q, c.arena
			c.q, c.arena = c.spareQ[:0], c.spareA[:0]
			c.spareQ, c.spareA = nil, nil
			c.writing = true
			c.mu.Unlock()
			err := c.writeAll(bufs)
			clear(bufs)
			c.mu.Lock()
			c.writing = false
			if c.err == nil {
				c.spareQ = bufs[:0]
				if cap(arena) <= arenaKeep {
					c.spareA = arena[:0]
				}
			}
			c.mu.Unlock()
			if err != nil {
				c.fail(fmt.Errorf("tcp: write to %s: %w", c.remote, err))
				return
			}
		}
	}
}

// writeAll writes bufs, waiting for writability as needed (the caller owns the write side).
func (c *conn) writeAll(bufs [][]byte) error {
	c.wbufs = bufs
	defer func() { c.wbufs = nil }()
	for len(c.wbufs) > 0 {
		c.wn, c.werr, c.wblock = 0, nil, true
		if err := c.raw.Write(c.writeFn); err != nil {
			if c.wwait.retried(err) { // woken by the progress call: there is room
				continue
			}
			return err
		}
		if c.werr != nil {
			if c.werr == unix.EAGAIN || c.werr == unix.EINTR {
				continue
			}
			return c.werr
		}
		c.wbufs = consume(c.wbufs, c.wn)
	}
	return nil
}

// Receive side. The reader reads the stream into its buffer and hands whole frames to the
// engine. A large frame whose headers have arrived but whose payload has not is offered to the
// engine for direct placement (engine.Place): an in-order RDMA write or read response then has
// its payload read from the socket straight into the registered memory it belongs to, with the
// next frame's first bytes in the same readv; what was already buffered is copied.
const (
	placeMin = 8 << 10 // place a frame directly when at least this much of its payload is unread
	readTail = 2 << 10 // while placing, read this much of what follows into the buffer
)

// reader hands the stream's frames to the engine until the stream fails. It reads with serve
// (pollReader) while frames fit the buffer, and with ReadPlaced for a frame placed directly.
func (c *conn) reader() {
	rd := newPollReader(c.nc, c.d.cfg.PollBudget)
	rd.act = &c.lastAct
	rd.progress = c.d.progress
	c.d.mu.Lock()
	if _, ok := c.d.all[c]; ok {
		c.rd = rd
		c.d.publishLocked()
	}
	c.d.mu.Unlock()
	in := &streamIn{c: c, e: c.d.Engine(), rd: rd, buf: make([]byte, readBufSize)}
	for !c.failed() {
		switch {
		case in.placing:
			in.placing = false
			if !in.frames(0, nil, true) {
				return
			}
		case rd.canServe():
			err := rd.serve(in)
			if c.failed() {
				return
			}
			if rd.wait.retried(err) || err == nil {
				continue // woken by the progress call, or a frame to place
			}
			in.e.EndBatch(&in.b)
			c.fail(fmt.Errorf("tcp: read from %s: %w", c.remote, err))
			return
		default:
			n, err := rd.Read(in.room())
			if !in.frames(n, err, true) {
				return
			}
		}
	}
}

// streamIn is a stream reader's buffer and the frames in it, between reads.
type streamIn struct {
	c    *conn
	e    *engine.Engine
	rd   *pollReader
	b    engine.Batch
	buf  []byte
	r, w int
	skip int // bytes of a dropped frame still to discard
	// streaming: the last frame was placed, so read little until the next one's headers
	streaming bool
	// placing: the frame at r is to be placed directly, which needs reads of its own (frames
	// with place)
	placing bool
}

// room is the part of the buffer the next read fills.
func (in *streamIn) room() []byte {
	rb := in.buf[in.w:]
	if in.streaming && len(rb) > readTail {
		rb = rb[:readTail]
	}
	return rb
}

// took is serve's frameSink: n bytes were read into room. Serving ends with a frame to place,
// and once the stream has failed (by the engine's work in frames, or from another goroutine).
func (in *streamIn) took(n int) bool {
	return in.frames(n, nil, false) && !in.placing && !in.c.failed()
}

// frames accounts n bytes read into room (with the read's error err) and hands every whole
// frame in the buffer to the engine. A large frame whose payload has not arrived is placed
// directly when place is set; without place, frames stops before it and sets placing. It
// reports false when the stream failed (after c.fail).
func (in *streamIn) frames(n int, err error, place bool) bool {
	c, e := in.c, in.e
	in.w += n
	if in.skip > 0 {
		k := min(in.skip, in.w-in.r)
		in.r += k
		in.skip -= k
	}
	for in.w-in.r >= 4 {
		buf, r, w := in.buf, in.r, in.w
		l := int(binary.LittleEndian.Uint32(buf[r:]))
		if l > maxFrame {
			e.EndBatch(&in.b)
			return in.fail(fmt.Errorf("%w: %d-byte frame from %s", ErrProtocol, l, c.remote))
		}
		if w-r >= 4+l {
			in.streaming = false
			if drop := c.d.cfg.DropInbound; drop == nil || !drop(c.port.num, buf[r+4:r+4+l]) {
				e.Deliver(&in.b, buf[r+4:r+4+l], c)
			}
			in.r += 4 + l
			continue
		}
		if 4+l-(w-r) >= placeMin && c.d.cfg.DropInbound == nil {
			if !place {
				in.placing = true
				break
			}
			placed, nr, nw, skip, perr := c.place(e, &in.b, in.rd, buf, r, w, l)
			if placed {
				in.r, in.w, in.skip, in.streaming = nr, nw, skip, true
				if perr != nil {
					e.EndBatch(&in.b)
					return in.fail(fmt.Errorf("tcp: read from %s: %w", c.remote, perr))
				}
				if in.skip > 0 {
					k := min(in.skip, in.w-in.r)
					in.r += k
					in.skip -= k
				}
				continue
			}
		}
		if 4+l > len(buf)-r { // make room for the whole frame
			nb := buf
			if 4+l > len(buf) {
				nb = make([]byte, 4+l)
			}
			in.w = copy(nb, buf[r:w])
			in.r, in.buf = 0, nb
		}
		break
	}
	e.EndBatch(&in.b)
	if in.r == in.w {
		in.r, in.w = 0, 0
	} else if len(in.buf)-in.w < 64<<10 {
		in.w = copy(in.buf, in.buf[in.r:in.w])
		in.r = 0
	}
	if err != nil {
		return in.fail(fmt.Errorf("tcp: read from %s: %w", c.remote, err))
	}
	return true
}

// fail fails the stream with err and reports false.
func (in *streamIn) fail(err error) bool {
	in.c.fail(err)
	return false
}

// place tries direct placement of the frame of length l at buf[r:w] (its headers are there, at
// least placeMin bytes of its payload are not). When the engine grants it, place reads the rest
// of the payload into the destination, delivers the frame, and returns placed with the buffer's
// new bounds (the bytes that followed the frame) and, for a frame dropped because its placement
// was revoked, how many of its bytes are still to be discarded.
func (c *conn) place(e *engine.Engine, b *engine.Batch, rd *pollReader, buf []byte, r, w, l int) (placed bool, nr, nw, skip int, err error) {
	hl := engine.HeaderLen(buf[r+4 : w])
	if hl == 0 || w-r < 4+hl || hl > l || engine.PayloadLen(buf[r+4:]) != l-hl {
		return false, r, w, 0, nil
	}
	var ok bool
	c.pl, ok = e.Place(b, buf[r+4:r+4+hl], c)
	pl := &c.pl
	if !ok {
		return false, r, w, 0, nil
	}
	// the deferred ACKs go out before a read that may wait: a sender streaming large frames
	// would otherwise wait for them with its window full
	e.EndBatch(b)
	hdr := c.phdr[:copy(c.phdr[:], buf[r+4:r+4+hl])]
	dst := pl.Dst
	got := w - (r + 4 + hl)
	revoked := false
	if pl.Begin() {
		copy(dst, buf[r+4+hl:w])
		pl.End()
	} else {
		revoked = true
	}
	w = 0
	for got < len(dst) && !revoked {
		var n int
		n, revoked, err = rd.ReadPlaced(dst[got:], buf[:readTail], pl)
		if revoked {
			break
		}
		if n > len(dst)-got {
			w = n - (len(dst) - got)
			got = len(dst)
		} else {
			got += n
		}
		if err != nil {
			return true, 0, w, 0, err
		}
	}
	if revoked {
		*pl = engine.Placement{}
		return true, 0, w, len(dst) - got, nil
	}
	e.DeliverSplit(b, hdr, dst, c, pl)
	*pl = engine.Placement{}
	return true, 0, w, 0, nil
}
