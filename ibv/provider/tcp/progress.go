package tcp

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
	"golang.org/x/sys/unix"
)

// Progress of parked readers. A stream reader that finds no data parks in the Go netpoller, and
// the Go scheduler asks the netpoller for ready goroutines only when it has nothing else to run
// (or from its monitor thread, every few milliseconds). A consumer that waits by polling a
// condition and yielding (runtime.Gosched) is always runnable, so where it has a processor to
// itself (GOMAXPROCS 1) a frame it waits for stays in the socket until the consumer gives up
// polling: a two-rank barrier over tcp took a millisecond, the first retry timeout of its
// datagrams, instead of a round trip. The same holds for a reader that polls its own stream
// (Config.PollBudget) while a frame arrives on another stream of the device.
//
// The progress call (Progress) closes that gap without a system call per stream: one poll(2)
// over the sockets of the parked readers, and the caller reads every socket that has data in
// the place of its reader, which is parked inside pollReader.serve (steal: the frames go to the
// engine on the caller's goroutine). A reader that must run itself (an error to report, a frame
// to place directly, a reader parked in the middle of a placed frame) is woken at once by
// setting its read deadline in the past, which makes its goroutine runnable on the caller's
// processor without the netpoller; the reader clears the deadline and reads. With one or two
// parked readers and no parked writer the call reads their sockets without the poll. A
// stream's writer goroutine that waits for room in a full socket is woken the same way (its
// write deadline) when the socket has room again: a large transfer is written by the writer.
// Polling consumers call it between their yields (rma's waits), polling readers between their
// polls.

// streamSet is the device's streams whose readers run, as the progress call scans them.
type streamSet struct {
	all atomic.Pointer[[]*conn] // published under driver.mu on every change

	scan sync.Mutex // one scan at a time (TryLock: a concurrent caller skips its scan)
	fds  []unix.PollFd
	cs   []*conn

	kicks  atomic.Uint64 // readers and writers woken (tests)
	steals atomic.Uint64 // reads in a parked reader's place that found frames (tests)
}

// kickTime is a deadline in the past: setting it wakes a goroutine parked on the socket.
var kickTime = time.Unix(1, 0)

// parkedIO is one direction of a stream (its reader, or its writer goroutine) as the progress
// call sees it: parked while the goroutine waits in the netpoller, woken by wake, which sets
// that direction's deadline in the past. A wake that comes after the goroutine woke by itself
// leaves the deadline set: the next read or write fails with it, and retried clears it.
type parkedIO struct {
	parked      atomic.Bool
	setDeadline func(time.Time) error // the socket's SetReadDeadline or SetWriteDeadline
}

// park marks the goroutine about to wait in the netpoller.
func (w *parkedIO) park() { w.parked.Store(true) }

// unpark marks it running again (it woke by itself; no store when it was not parked).
func (w *parkedIO) unpark() {
	if w.parked.Load() {
		w.parked.Store(false)
	}
}

// wake wakes the goroutine if it is parked, and reports whether it was.
func (w *parkedIO) wake() bool {
	if !w.parked.CompareAndSwap(true, false) {
		return false
	}
	_ = w.setDeadline(kickTime)
	return true
}

// retried reports whether err is a wake's deadline, which it clears: the caller reads or writes
// again.
func (w *parkedIO) retried(err error) bool {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	_ = w.setDeadline(time.Time{})
	return true
}

// publishLocked republishes the streams whose readers run (driver.mu held).
func (d *driver) publishLocked() {
	cs := make([]*conn, 0, len(d.all))
	for c := range d.all {
		if c.rd != nil && c.rd.fd >= 0 {
			cs = append(cs, c)
		}
	}
	d.streams.all.Store(&cs)
}

// progress wakes every parked reader of the device whose socket is readable (see above), and
// reports whether it woke any reader or writer. It never blocks: a call while another one scans
// returns at once (false).
func (d *driver) progress() bool {
	all := d.streams.all.Load()
	if all == nil || len(*all) == 0 {
		return false
	}
	s := &d.streams
	if !s.scan.TryLock() {
		return false
	}
	defer s.scan.Unlock()
	if done, woke := d.stealFew(*all); done {
		return woke
	}
	fds, cs := s.fds[:0], s.cs[:0]
	defer clear(cs) // keep no closed stream
	for _, c := range *all {
		var ev int16
		if c.rd.wait.parked.Load() {
			ev |= unix.POLLIN
		}
		if c.wwait.parked.Load() {
			ev |= unix.POLLOUT
		}
		if ev != 0 {
			fds = append(fds, unix.PollFd{Fd: int32(c.rd.fd), Events: ev})
			cs = append(cs, c)
		}
	}
	s.fds, s.cs = fds, cs
	if len(fds) == 0 {
		return false
	}
	if n, err := unix.Poll(fds, 0); err != nil || n <= 0 {
		return false
	}
	woke := false
	for i := range fds {
		re := fds[i].Revents
		if re == 0 {
			continue
		}
		if re&^unix.POLLOUT != 0 { // data, or an error the reader reports
			w, ok := s.readParked(cs[i])
			if !ok && cs[i].rd.wait.wake() {
				s.kicks.Add(1)
				w = true
			}
			woke = woke || w
		}
		if re&^unix.POLLIN != 0 && cs[i].wwait.wake() {
			s.kicks.Add(1)
			woke = true
		}
	}
	return woke
}

// stealMax is the most parked readers whose sockets the progress call reads without a poll(2)
// first (a read that finds nothing costs about what the poll costs).
const stealMax = 2

// stealFew is the progress call for a device with at most stealMax parked readers, all parked
// inside serve, and no parked writer: it reads their sockets in their place (pollReader.steal)
// and wakes a reader only for what the reader must do itself. done is false when the call needs
// the poll (more readers, a writer, a reader parked elsewhere); woke reports frames read or a
// reader woken.
func (d *driver) stealFew(all []*conn) (done, woke bool) {
	n := 0
	for _, c := range all {
		if c.wwait.parked.Load() {
			return false, false
		}
		if c.rd.wait.parked.Load() {
			if n++; n > stealMax || !c.rd.stealable.Load() {
				return false, false
			}
		}
	}
	if n == 0 {
		return true, false
	}
	for _, c := range all {
		if !c.rd.wait.parked.Load() {
			continue
		}
		w, ok := d.streams.readParked(c)
		woke = woke || w
		if !ok {
			return false, woke // the reader runs, or parked elsewhere just now: poll
		}
	}
	return true, woke
}

// readParked reads c's socket in the place of its parked reader (pollReader.steal) and wakes the
// reader for what it must do itself. woke reports frames read or the reader woken; ok is false
// when the socket could not be read in its place (the caller may wake the reader instead).
func (s *streamSet) readParked(c *conn) (woke, ok bool) {
	ok, got, wake := c.rd.steal()
	if got {
		s.steals.Add(1)
		woke = true
	}
	if ok && wake && c.rd.wait.wake() {
		s.kicks.Add(1)
		woke = true
	}
	return woke, ok
}

// Progress returns the progress call of tcp device dev: it wakes the device's stream readers
// that are parked while their sockets hold data, so that a consumer polling a condition on a
// processor of its own sees the frames it waits for (see above). It never blocks and may be
// called from any goroutine, typically between the yields of a polling wait; it reports whether
// it woke a goroutine (which runs once the caller yields its processor to the Go scheduler:
// runtime.Gosched). Errors wrap ibv.ErrInvalidArgument (not a tcp device).
func Progress(dev *ibv.Context) (func() bool, error) {
	d, err := engine.DriverOf[*driver]("tcp", dev)
	if err != nil {
		return nil, err
	}
	return d.progress, nil
}

// OnArrival sets f as the function tcp device dev's stream readers call after each batch of
// frames they handed to the engine (nil: none): a consumer that parks while it waits for what
// the frames change (rma's waits) is woken by it instead of by a timer. f runs on a reader's
// goroutine and must not block. Errors wrap ibv.ErrInvalidArgument (not a tcp device).
func OnArrival(dev *ibv.Context, f func()) error {
	d, err := engine.DriverOf[*driver]("tcp", dev)
	if err != nil {
		return err
	}
	d.Engine().SetArrival(f)
	return nil
}
