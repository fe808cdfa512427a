package tcp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goarmci/goarmci/ibv/internal/engine"
	"golang.org/x/sys/unix"
)

// pollReader reads a TCP stream: non-blocking reads, and when the socket is empty the goroutine
// parks in the Go netpoller, from which the device's progress call (progress.go) wakes it as
// soon as a consumer that polls asks. Waking a parked goroutine's thread on another core costs
// more than a small RDMA operation takes (a blocking TCP round trip between two Go processes is
// an order of magnitude slower than a busy-polled one: bench/README.md, "Design measurements"):
// a consumer that waits by polling its completion queue calls the progress call between its
// polls (rma does), so a frame is read one poll after it arrives. Without such a consumer a
// reader may poll its socket itself (Config.PollBudget): only while traffic is flowing (the
// previous read found data within the budget), and bounded, so an idle connection costs
// nothing.
//
// A reader that parks in the middle of a placed frame (ReadPlaced with a placement) sets the
// socket's receive low-water mark to the bytes of the frame still missing (see lowat below).
type pollReader struct {
	rc     syscall.RawConn
	nc     net.Conn
	budget time.Duration // poll budget while traffic flows (Config.PollBudget); 0: never poll
	last   time.Time     // when the last read returned data
	// fd is the socket (-1: unknown); wait is the reader as the device's progress call
	// (progress.go) wakes it from the netpoller; progress is that call, made between the
	// reader's own polls (or nil)
	fd       int
	wait     parkedIO
	progress func() bool

	// state of the read in progress, used by fn (built once: no allocation per read)
	b       []byte
	b2      []byte // second buffer of a readv (after b), or empty
	pl      *engine.Placement
	revoked bool // pl was revoked: nothing was read
	iov     [2]unix.Iovec
	n       int
	rerr    error
	active  bool
	act     *atomic.Int64 // set to the time of every read that returns data (or nil)
	fn      func(fd uintptr) bool
	lowat   int // the socket's SO_RCVLOWAT as last set (1: the kernel's default)

	// serve's state: where the reads go, the callback that RawConn.Read calls (built once: no
	// allocation per call), and why the last serve ended
	sink    frameSink
	serveFn func(fd uintptr) bool
	stopped bool
	// own is held by whoever reads the socket into sink: serveRead while it runs, steal while it
	// reads in the reader's place; stealable: the reader is parked inside serve, so its socket
	// stays open and sink is ready for another goroutine's reads (steal)
	own       sync.Mutex
	stealable atomic.Bool
}

// frameSink receives what serve reads: room is where the next read goes (empty: stop serving),
// took hands over the n bytes just read into it and reports whether serving goes on (false: the
// stream failed, or a frame needs reads of its own, ReadPlaced's).
type frameSink interface {
	room() []byte
	took(n int) bool
}

// Receive low-water mark. A large frame arrives as many TCP segments, and every segment that
// finds the reader parked wakes it: the sender's core pays an inter-processor wake-up, the
// reader's core a scheduler round, and the reader reads the few KiB that arrived and parks
// again. A reader placing a frame knows how many bytes it still needs; before it parks it sets
// SO_RCVLOWAT to that count (at most maxFrame), so the kernel wakes it once, when the whole
// rest of the frame is in the receive queue (tcp_set_rcvlowat grows the receive buffer to hold
// the mark, and tcp_data_ready wakes the reader anyway under memory pressure or when the
// receive window closes, so a mark cannot stall a stream; the mark is used from Linux 5.8, the
// first release with both of the kernel's SO_RCVLOWAT hang fixes, "fat skbs" and "high mem
// pressure"). Any other read parks with the
// mark back at 1 byte, so headers, ACKs and small frames wake it as before. With the mark, large
// RDMA writes over loopback come close to the plain socket stream; a mark of half or a quarter
// of the frame gained nothing, so it waits for the whole rest (bench/README.md, "Design
// measurements").
var lowatOK = kernelAtLeast(5, 8)

// setLowat sets the socket's receive low-water mark for the read that is about to park: the
// missing bytes of a placed frame, else 1 (one system call, only when it changes).
func (p *pollReader) setLowat(fd uintptr) {
	want := 1
	if p.pl != nil && lowatOK {
		want = max(1, min(len(p.b), maxFrame))
	}
	if want == p.lowat {
		return
	}
	if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, want) == nil {
		p.lowat = want
	}
}

// kernelAtLeast reports whether the running Linux kernel's release is at least major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return releaseAtLeast(unix.ByteSliceToString(u.Release[:]), major, minor)
}

// releaseAtLeast reports whether a kernel release string ("6.18.44-fc-v657") is at least
// major.minor; an unparsable one is not.
func releaseAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(release, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

func newPollReader(nc net.Conn, budget time.Duration) *pollReader {
	p := &pollReader{nc: nc, budget: budget, lowat: 1, fd: -1}
	p.wait.setDeadline = nc.SetReadDeadline
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			p.rc = rc
			_ = rc.Control(func(fd uintptr) { p.fd = int(fd) })
		}
	}
	p.fn = p.try
	p.serveFn = p.serveRead
	return p
}

// canServe reports whether the stream may be read with serve: a socket of its own and no poll
// budget (a polling reader keeps ReadPlaced's loop).
func (p *pollReader) canServe() bool { return p.rc != nil && p.budget == 0 }

// serve reads the stream into sink inside one RawConn.Read until sink stops it, the stream
// fails, or the progress call wakes the reader (err then satisfies wait.retried). Staying inside
// one RawConn.Read is what saves a system call per frame: RawConn.Read forgets, on entry, that
// the socket became readable, so a reader that enters it once per frame must read until EAGAIN
// before it parks; inside one call the netpoller keeps the readiness that data arriving after a
// read signals, so a read that returns less than it asked for (the socket drained) parks at
// once. It returns nil when sink stopped it, the read's error (io.EOF at the end of the stream),
// or the netpoller's.
func (p *pollReader) serve(sink frameSink) error {
	p.own.Lock()
	p.sink, p.stopped, p.rerr = sink, false, nil
	p.own.Unlock()
	defer func() {
		p.own.Lock()
		p.stealable.Store(false)
		p.sink, p.b = nil, nil
		p.own.Unlock()
	}()
	err := p.rc.Read(p.serveFn)
	switch {
	case err != nil:
		return err
	case p.stopped:
		return nil
	}
	return p.rerr
}

// serveRead is serve's RawConn.Read callback: false parks the goroutine until the socket is
// readable (or the progress call wakes it).
func (p *pollReader) serveRead(fd uintptr) bool {
	p.wait.unpark()
	p.own.Lock()
	p.stealable.Store(false)
	park := p.serveLocked(fd)
	if park {
		p.stealable.Store(true)
	}
	p.own.Unlock()
	return !park
}

// serveLocked is serveRead's reads (own held); it reports whether the reader parks.
func (p *pollReader) serveLocked(fd uintptr) bool {
	switch end, _, err := p.readFrames(fd); end {
	case readDrained:
		p.park(fd)
		return true
	case readStopped:
		p.stopped = true
	default:
		p.rerr = err
	}
	return false
}

// readEnd is why readFrames stopped.
type readEnd uint8

const (
	readDrained readEnd = iota // the socket is empty (EAGAIN, or a read shorter than asked)
	readStopped                // sink stopped: an empty room, or took returned false
	readFailed                 // a read failed, or the stream ended (io.EOF)
)

// readFrames reads the socket into sink (own held) until it is drained, sink stops, or a read
// fails (err); got reports that something was read and handed over. A read that returns less
// than it asked for drained the socket: data that comes later makes it readable again.
func (p *pollReader) readFrames(fd uintptr) (end readEnd, got bool, err error) {
	for {
		p.b = p.sink.room()
		if len(p.b) == 0 {
			return readStopped, got, nil
		}
		n, rerr := p.read(fd)
		switch {
		case rerr == unix.EINTR:
			continue
		case rerr == unix.EAGAIN:
			return readDrained, got, nil
		case rerr != nil:
			return readFailed, got, rerr
		case n == 0:
			return readFailed, got, io.EOF
		}
		got = true
		p.last = time.Now()
		if p.act != nil {
			p.act.Store(p.last.UnixNano())
		}
		if !p.sink.took(n) {
			return readStopped, got, nil
		}
		if n < len(p.b) {
			return readDrained, got, nil
		}
	}
}

// try is the RawConn.Read callback: read, and while traffic is active poll for up to the
// budget; false parks the goroutine until the socket is readable.
func (p *pollReader) try(fd uintptr) bool {
	p.wait.unpark()
	var deadline time.Time
	for spins := 0; ; spins++ {
		if p.pl != nil && !p.pl.Begin() {
			p.revoked = true
			return true
		}
		if len(p.b2) == 0 {
			p.n, p.rerr = p.read(fd)
		} else {
			p.n, p.rerr = p.readv(fd)
		}
		if p.pl != nil {
			p.pl.End()
		}
		if p.rerr == unix.EINTR {
			continue
		}
		if p.rerr != unix.EAGAIN {
			return true
		}
		if !p.active {
			return p.park(fd)
		}
		if spins&15 == 0 {
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(p.budget)
			} else if now.After(deadline) {
				return p.park(fd)
			}
		}
		if spins&7 == 7 && p.progress != nil {
			p.progress() // frames on the device's other streams
		}
		runtime.Gosched()
	}
}

// park prepares the reader to wait in the netpoller (try returns its false): the low-water mark
// is set, and the reader becomes one the progress call may wake.
func (p *pollReader) park(fd uintptr) bool {
	p.setLowat(fd)
	p.wait.park()
	return false
}

// steal reads the socket in the place of a reader parked inside serve, on the caller's
// goroutine: the frames go to the reader's sink as the reader would hand them over, without the
// reader's wake-up (the progress call's deadline, a switch to the reader's goroutine). A reader
// that wakes meanwhile waits for own, then finds the socket drained and parks again. ok is false
// when the reader is not parked inside serve (or another goroutine reads); got reports that
// frames were read; wake that the reader must run (an error or the end of the stream to report,
// a frame to place, a failed stream): the caller wakes it.
func (p *pollReader) steal() (ok, got, wake bool) {
	if !p.stealable.Load() || !p.own.TryLock() {
		return false, false, false
	}
	defer p.own.Unlock()
	if !p.stealable.Load() {
		return false, false, false
	}
	end, got, _ := p.readFrames(uintptr(p.fd)) // a failed read: the reader reads it again and reports it
	return true, got, end != readDrained
}

// readv reads into b, then b2, with one system call.
func (p *pollReader) readv(fd uintptr) (int, error) {
	p.iov[0] = unix.Iovec{Base: &p.b[0]}
	p.iov[0].SetLen(len(p.b))
	p.iov[1] = unix.Iovec{Base: &p.b2[0]}
	p.iov[1].SetLen(len(p.b2))
	n, e := sysIovec(unix.SYS_READV, fd, &p.iov[0], 2, len(p.b)+len(p.b2))
	p.iov = [2]unix.Iovec{}
	if e != 0 {
		return -1, e
	}
	return n, nil
}

// Read reads into b like net.Conn.Read.
func (p *pollReader) Read(b []byte) (int, error) {
	n, _, err := p.ReadPlaced(b, nil, nil)
	return n, err
}

// ReadPlaced reads into b and then b2 (when not empty) like one net.Conn.Read, each attempt
// between pl.Begin and pl.End when pl is not nil (b is a placement's destination). revoked
// reports that pl was revoked before anything was read.
func (p *pollReader) ReadPlaced(b, b2 []byte, pl *engine.Placement) (n int, revoked bool, err error) {
	if len(b) == 0 {
		b, b2 = b2, nil
	}
	if p.rc == nil || len(b) == 0 {
		if pl != nil && !pl.Valid() {
			return 0, true, nil
		}
		n, err = p.nc.Read(b)
		return n, false, err
	}
	defer func() { p.b, p.b2, p.pl = nil, nil, nil }()
	p.b, p.b2, p.pl, p.revoked, p.n, p.rerr = b, b2, pl, false, 0, nil
	p.active = p.budget > 0 && !p.last.IsZero() && time.Since(p.last) < 4*p.budget
	err = p.rc.Read(p.fn)
	for p.wait.retried(err) { // woken by the progress call: the socket has data
		err = p.rc.Read(p.fn)
	}
	n, rerr := p.n, p.rerr
	if err != nil {
		return 0, false, err
	}
	if p.revoked {
		return 0, true, nil
	}
	if rerr != nil {
		if errors.Is(rerr, unix.EAGAIN) {
			rerr = nil
		}
		return max(n, 0), false, rerr
	}
	if n == 0 {
		return 0, false, io.EOF
	}
	p.last = time.Now()
	if p.act != nil {
		p.act.Store(p.last.UnixNano())
	}
	return n, false, nil
}
