package tcp

import (
	"errors"
	"io"
	"net"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollReader reads a TCP stream, polling the socket for a short while before parking in the
// netpoller. Waking a parked goroutine's thread on another core costs tens of µs on this class
// of machine (DESIGN.md §8: a blocking TCP round trip between two Go processes ~97 µs, the same
// with busy-polling ~8 µs), more than a small RDMA operation takes. The poll budget adapts: it
// is spent only while traffic is flowing (the previous read found data within the budget), and
// it is bounded, so an idle connection costs nothing. With more ranks than cores polling steals
// the core a computing rank needs (measured: CG class S, 4 ranks on 2 cores, 2.7 s → 4.1 s), so
// the budget is a device option (tcp.Config.PollBudget) that the runtime sets per node.
type pollReader struct {
	rc     syscall.RawConn
	nc     net.Conn
	budget time.Duration // poll budget; 0: never poll
	last   time.Time     // when the last read returned data

	// state of the read in progress, used by fn (built once: no allocation per read)
	b      []byte
	n      int
	rerr   error
	active bool
	fn     func(fd uintptr) bool
}

func newPollReader(nc net.Conn, budget time.Duration) *pollReader {
	p := &pollReader{nc: nc, budget: budget}
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			p.rc = rc
		}
	}
	p.fn = p.try
	return p
}

// try is the RawConn.Read callback: read, and while traffic is active poll for up to the
// budget; false parks the goroutine until the socket is readable.
func (p *pollReader) try(fd uintptr) bool {
	var deadline time.Time
	for spins := 0; ; spins++ {
		p.n, p.rerr = unix.Read(int(fd), p.b)
		if p.rerr == unix.EINTR {
			continue
		}
		if p.rerr != unix.EAGAIN {
			return true
		}
		if !p.active {
			return false
		}
		if spins&15 == 0 {
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(p.budget)
			} else if now.After(deadline) {
				return false
			}
		}
		runtime.Gosched()
	}
}

// Read reads into b like net.Conn.Read.
func (p *pollReader) Read(b []byte) (int, error) {
	if p.rc == nil || len(b) == 0 {
		return p.nc.Read(b)
	}
	p.b, p.n, p.rerr = b, 0, nil
	p.active = p.budget > 0 && !p.last.IsZero() && time.Since(p.last) < 4*p.budget
	err := p.rc.Read(p.fn)
	n, rerr := p.n, p.rerr
	p.b = nil
	if err != nil {
		return 0, err
	}
	if rerr != nil {
		if errors.Is(rerr, unix.EAGAIN) {
			rerr = nil
		}
		return max(n, 0), rerr
	}
	if n == 0 {
		return 0, io.EOF
	}
	p.last = time.Now()
	return n, nil
}
